"""Copying named variables between two kernels of a Jupyter server.

Used to carry variables over when a notebook switches hardware: the bytes go
from the source kernel's bulk stream to the destination's through this
process (or chunk by chunk over their shell channels when a stream cannot be
opened), which holds only the bytes in flight. Both kernels must answer
transfer requests: every kernel started on a hardware target does, and any
IPython kernel does after ``%load_ext jupyter_remote_hw``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.manager import KernelManager
from jupyter_client.multikernelmanager import MultiKernelManager
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from jupyter_client.session import Session

from .client import Progress, StreamOpener, TransferClient, open_local_stream
from .kernel_link import KernelLink
from .kernel_side.errors import NoTransferHandlerError, TransferError
from .kernel_side.restricted import SharedKernelPulls, restriction

#: Names the kernel itself puts in the user's namespace: never offered for carrying.
KERNEL_NAMES = frozenset({"open", "exit", "quit", "get_ipython"})

#: Seconds to wait for a kernel's first answer when it is idle (a remote one may be slow).
ANSWER_WAIT = 10.0
#: Seconds to wait when it is running a cell: it answers only once the cell ends.
BUSY_ANSWER_WAIT = 1.0

#: The expression that makes a plain IPython kernel answer transfer requests.
_LOAD_HANDLER = (
    "__import__('jupyter_remote_hw.transfer.kernel_side.kernel_handler', fromlist=['_'])"
    ".load_ipython_extension(get_ipython())"
)


def stream_opener(manager: Any) -> StreamOpener | None:
    """How to reach a kernel's bulk streams: through its machine, or on this machine.

    Args:
        manager: The kernel's manager.

    Returns:
        The opener, or None when the kernel runs somewhere this process
        cannot reach (its transfers then go as chunk messages).
    """
    provisioner = getattr(manager, "provisioner", None)
    opener = getattr(provisioner, "open_stream", None)
    if opener is not None:
        return cast(StreamOpener, opener)
    if isinstance(provisioner, LocalProvisioner):  # a kernel process of this machine
        return open_local_stream
    return None


#: The server's kernel manager, or one kernel's own manager.
Kernels = MultiKernelManager | KernelManager


def kernel_manager_of(kernels: Kernels, kernel_id: str) -> KernelManager:
    """The manager of kernel ``kernel_id``: from the server's kernel manager, or
    ``kernels`` itself when it is that kernel's own manager (a provisioner's parent).

    Raises:
        KeyError: No kernel with that id.
    """
    if isinstance(kernels, MultiKernelManager):
        return kernels.get_kernel(kernel_id)
    if kernels.kernel_id != kernel_id:
        raise KeyError(f"kernel {kernel_id}: this manager runs kernel {kernels.kernel_id}")
    return kernels


@contextlib.asynccontextmanager
async def transfer_client(kernel_manager: Kernels, kernel_id: str) -> AsyncIterator[TransferClient]:
    """A transfer client of one of the server's kernels, its channels open while in use.

    Args:
        kernel_manager: The server's kernel manager, or the kernel's own manager.
        kernel_id: The kernel.

    Raises:
        KeyError: No kernel with that id.
        TypeError: The kernel manager is not an async one.
    """
    manager = kernel_manager_of(kernel_manager, kernel_id)
    # A session of its own, as each of jupyter_server's websockets has: clients made
    # from the kernel manager share its session id, which is also their identity on
    # the kernel's shell channel, so a hibernation's relay would take this client
    # for one of the clients it held before (one that read the variables earlier).
    session = Session(
        config=manager.session.config,
        key=manager.session.key,
        signature_scheme=manager.session.signature_scheme,
    )
    client = manager.client(session=session)
    if not isinstance(client, AsyncKernelClient):
        raise TypeError(f"kernel {kernel_id}: an async kernel manager is needed")
    # No heartbeat: the manager says whether the kernel lives, and jupyter_client's
    # heartbeat thread, stopped before it first ran (a save that fails at once), spins
    # making sockets until the server has no file descriptors left.
    client.start_channels(hb=False)
    try:
        async with KernelLink(client) as link:
            # Where it runs, for messages ("the kernel on ssh-gpu-box did not answer"): a
            # hardware kernel's provisioner names its target; any other runs here.
            where = str(getattr(manager.provisioner, "target", "") or "this machine")
            yield TransferClient(link, where, opener=stream_opener(manager))
    finally:
        client.stop_channels()


async def others_could_run_code(kernel_manager: Kernels, kernel_id: str) -> bool:
    """Whether someone else can run code in a kernel, or could at any time in its life.

    A kernel of this machine's own process (jupyter_client's local provisioner) is the
    owner's alone; one of ours asks its provisioner (see
    ``RemoteHWProvisioner.others_can_run_code``; a joined kernel always is); any other
    kernel is taken to be so.
    """
    provisioner = getattr(kernel_manager_of(kernel_manager, kernel_id), "provisioner", None)
    if isinstance(provisioner, LocalProvisioner):
        return False
    ask = getattr(provisioner, "others_can_run_code", None)
    return True if ask is None else bool(await ask())


async def _rebuilt_as_from(
    kernel_manager: Kernels, kernel_id: str, destination: TransferClient
) -> TransferClient:
    """``destination``, set to rebuild what comes from kernel ``kernel_id`` with the
    restricted loader when someone else can run code there (see
    :func:`others_could_run_code`), with the owner's ``c.SharedKernelPulls.allowed_types``."""
    if await others_could_run_code(kernel_manager, kernel_id):
        manager = kernel_manager_of(kernel_manager, kernel_id)
        named = getattr(manager.provisioner, "named", None) or f"the {manager.kernel_name} kernel"
        destination.restricted = restriction(
            f"{named}, which someone else can run code in",
            SharedKernelPulls(parent=manager).allowed_types,
        )
    return destination


@contextlib.asynccontextmanager
async def source_and_destination(
    kernel_manager: MultiKernelManager, source_id: str, destination_id: str
) -> AsyncIterator[tuple[TransferClient, TransferClient]]:
    """Transfer clients of two of the server's kernels, both answering, for variables
    that go from one to the other: the one way they do (a copy, a switch's carry), so
    the destination rebuilds them with the restricted loader whenever someone else can
    run code in the source.

    Raises:
        KeyError: No kernel with one of the ids.
        TransferError: A kernel does not answer transfer requests.
    """
    async with (
        transfer_client(kernel_manager, source_id) as source,
        transfer_client(kernel_manager, destination_id) as destination,
    ):
        await answering(source)
        await answering(destination)
        await _rebuilt_as_from(kernel_manager, source_id, destination)
        yield source, destination


async def answering(client: TransferClient, timeout: float = 10.0) -> dict[str, Any]:
    """Make sure the kernel answers transfer requests; its ``hello``.

    A plain IPython kernel (``python3``, started without our extension) ignores
    them: the transfer handler is then loaded into it with one quiet request
    (nothing shows in the notebook, nothing is added to its namespace).

    Raises:
        NoTransferHandlerError: It cannot be loaded there (the package is not
            importable in that kernel's Python); the message says what to do.
        TransferError: The kernel did not answer within ``timeout`` seconds.
    """
    try:
        return await client.hello(timeout)
    except NoTransferHandlerError:
        pass
    try:
        async with asyncio.timeout(timeout):
            answer = await client.link.evaluate({"load": _LOAD_HANDLER})
    except TimeoutError:
        raise TransferError(
            f"the kernel on {client.where} did not answer within "
            f"{timeout:g} s: it may be busy running a cell"
        ) from None
    loaded = answer.get("load") or {}
    try:
        # Also when the load failed: a reply that came late the first time counts.
        return await client.hello(timeout)
    except NoTransferHandlerError:
        if loaded.get("status") == "ok":
            raise
    why = f"{loaded.get('ename', 'error')}: {loaded.get('evalue', 'no answer')}"
    raise NoTransferHandlerError(
        f"the kernel on {client.where} cannot hand over its variables: jupyter-remote-hw "
        f"cannot be loaded in it ({why}). Install jupyter-remote-hw in that kernel's "
        "Python, or switch without carrying variables."
    )


def user_names(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of a kernel's listing without the names the kernel itself defines."""
    return [e for e in entries if e["name"] not in KERNEL_NAMES]


def ranks_phrase(ranks: list[dict[str, Any]]) -> str:
    """The ``%%ranks`` engines of a listing in words: ``2 %%ranks engines (on gpu1,
    gpu2)``."""
    nodes = ", ".join(dict.fromkeys(str(r.get("node")) for r in ranks))
    return f"{len(ranks)} %%ranks engine{'s' if len(ranks) != 1 else ''} (on {nodes})"


class BusyKernelError(TransferError):
    """The kernel is running a cell, so it cannot list its variables now."""


async def listing(client: TransferClient, busy: bool = False) -> dict[str, Any]:
    """What could be carried from a kernel (see :func:`kernel_namespace`), over an
    open client; ``busy``: the kernel is running a cell, so wait only briefly."""
    try:
        await answering(client, BUSY_ANSWER_WAIT if busy else ANSWER_WAIT)
        found = await client.namespace(check=True)
    except TransferError as exc:
        if busy and not exc.name:
            raise BusyKernelError(
                "the kernel is running a cell: its variables can be listed when the cell "
                "ends. Wait for it or interrupt it, or go on without carrying variables."
            ) from None
        raise
    return {
        "variables": user_names(found["variables"]),
        "modules": user_names(found["modules"]),
        "comms": found.get("comms") or [],
        "ranks": found.get("ranks") or [],
        "ranks_saved": found.get("ranks_saved"),
    }


def is_busy(kernel_manager: Kernels, kernel_id: str) -> bool:
    """Whether the server last saw the kernel running a cell."""
    manager = kernel_manager_of(kernel_manager, kernel_id)
    return getattr(manager, "execution_state", None) == "busy"


async def kernel_namespace(kernel_manager: MultiKernelManager, kernel_id: str) -> dict[str, Any]:
    """What could be carried from a kernel: each variable with whether it can be
    carried (and why not), and each module bound to a name.

    A plain IPython kernel is made to answer first (see :func:`answering`).

    Returns:
        ``variables`` (``name``, ``type``, ``nbytes``, ``carriable``, ``reason``,
        and ``device`` for one holding tensors or modules), ``modules``
        (``name``, ``module``, ``importable``, ``reason``) and ``comms``
        (``target``, ``count``: the open comms, widgets included).

    Raises:
        BusyKernelError: It is running a cell and did not answer at once.
        TransferError: It cannot answer (the message says why and what to do).
    """
    busy = is_busy(kernel_manager, kernel_id)
    async with transfer_client(kernel_manager, kernel_id) as client:
        return await listing(client, busy)


async def copy_variables(
    kernel_manager: MultiKernelManager,
    source_id: str,
    destination_id: str,
    names: list[str],
    device: str | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Copy the named variables of one kernel into another: all of them, or none.

    Args:
        kernel_manager: The server's kernel manager.
        source_id: The kernel the variables come from.
        destination_id: The kernel they are assigned in.
        names: The variables.
        device: Where arriving tensors and modules go in the destination (``cuda``).
        progress: Called with (bytes done, bytes in all).

    Returns:
        ``{"name", "type"}`` of each variable assigned.

    Raises:
        KeyError: No kernel with one of the ids.
        TransferError: A kernel does not answer transfer requests, a variable
            is missing or cannot be serialized (named), or the copy failed;
            nothing was assigned in the destination.
    """
    async with source_and_destination(kernel_manager, source_id, destination_id) as (
        source,
        destination,
    ):
        return await source.copy_to(destination, names, device, progress)
