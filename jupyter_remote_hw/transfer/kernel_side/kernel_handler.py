"""The kernel side of transfers: answers transfer requests inside an ipykernel.

Loaded as an IPython extension: in kernels the agent starts (from the copy of
this package inside the agent zipapp) and in the local kernel by
``%load_ext jupyter_remote_hw``. Python 3.8 syntax; needs ipykernel and
cloudpickle only.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import protocol
from .buffers import empty_segment
from .bulk import BulkStream, part_count
from .devices import check_device, device_of, placements, to_device
from .errors import NotSerializableError, TransferError
from .pickling import (
    dump_variables,
    from_segments,
    load_variables,
    probe_variable,
    segment_sizes,
    to_segments,
    type_name,
)
from .ranks import SAVED_NAME
from .state_files import read_state, remove_state, write_state

if TYPE_CHECKING:
    from .devices import Placement

log = logging.getLogger(__name__)

#: Names IPython puts in every namespace.
_HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython"})

#: Seconds a ``list`` with ``check`` spends trial-pickling variables; those left
#: unchecked when it runs out are listed with ``checked: false``.
CHECK_BUDGET = 2.0


@dataclass
class _Incoming:
    """A transfer being received: one preallocated buffer per segment."""

    manifest: list[dict[str, Any]]
    device: Placement
    segments: list[Any]
    bulk: BulkStream | None = None
    touched: float = field(default_factory=time.monotonic)


@dataclass
class _Outgoing:
    """A transfer being sent: the variables' segments, views of their memory."""

    segments: list[memoryview]
    bulk: BulkStream | None = None
    touched: float = field(default_factory=time.monotonic)


def _sizeof(value: Any) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    try:
        return sys.getsizeof(value)
    except TypeError:
        return 0


def user_items(namespace: dict[str, Any], shell: Any) -> list[tuple[str, Any]]:
    """The user's names and values in ``namespace`` (``shell``'s, when it is an
    IPython shell's): not IPython's own (In, Out, exit, ipykernel's open ...) unless
    the user has since assigned the name, nor ``_`` names."""
    shell_hidden = getattr(shell, "user_ns_hidden", None) or {}
    unset = object()
    return [
        (name, value)
        for name, value in list(namespace.items())
        if not name.startswith("_")
        and name not in _HIDDEN
        and shell_hidden.get(name, unset) is not value
    ]


def module_entry(name: str, module: Any) -> dict[str, Any]:
    """A module bound to ``name``: its import name and whether another kernel can import it."""
    module_name = getattr(module, "__name__", None) or name
    entry: dict[str, Any] = {"name": name, "module": module_name, "importable": True}
    if module_name == "__main__" or getattr(module, "__spec__", None) is None:
        entry.update(
            importable=False,
            reason="it was not imported from a file or package "
            "(made at run time), so it cannot be imported by name",
        )
    return entry


def _trial(name: str, value: Any, check: bool) -> dict[str, Any]:
    """Whether ``value`` can be carried: pickled on trial into a byte counter."""
    if not check:
        return {"carriable": True, "checked": False}
    try:
        nbytes = probe_variable(name, value)
    except NotSerializableError as exc:  # whatever pickling raised, with its reason
        return {"carriable": False, "checked": True, "reason": exc.reason}
    return {"carriable": True, "checked": True, "nbytes": nbytes}


def open_comms(kernel: Any) -> list[dict[str, Any]]:
    """The kernel's open comms (widgets and others), as ``{"target", "count"}`` per
    target name; the transfer comms of this package are not counted."""
    manager = getattr(kernel, "comm_manager", None)
    if manager is None and "comm" in sys.modules:
        manager = sys.modules["comm"].get_comm_manager()
    counts: dict[str, int] = {}
    for comm in list((getattr(manager, "comms", None) or {}).values()):
        target = str(getattr(comm, "target_name", None) or "?")
        if target != protocol.COMM_TARGET:
            counts[target] = counts.get(target, 0) + 1
    return [{"target": target, "count": count} for target, count in sorted(counts.items())]


def _placed(values: dict[str, Any], device: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Move each variable named in ``device`` there, in ``values``; one that cannot go
    (the device ran out of memory ...) stays on the CPU. Where each went, or why not."""
    where: dict[str, dict[str, Any]] = {}
    for name, target in device.items():
        if name not in values:
            continue
        try:
            values[name] = to_device(values[name], target)
        except Exception as exc:  # noqa: BLE001 (moving can raise anything; it is named)
            try:
                values[name] = to_device(values[name], "cpu")  # a module moves in place
            except Exception:  # noqa: BLE001 (it stays as it was left)
                log.warning("%r could not be put back on the CPU either", name)
            where[name] = {"device": "cpu", "reason": f"{type(exc).__name__}: {exc}"}
        else:
            where[name] = {"device": target}
    return where


def _live_ranks() -> list[dict[str, Any]]:
    """The ``%%ranks`` engines that run now (none where no ``%%ranks`` cell ran)."""
    magic = sys.modules.get(f"{__package__}.ranks.magic")
    return list(magic.live_ranks()) if magic is not None else []


def _saved_ranks(namespace: dict[str, Any]) -> dict[str, Any] | None:
    """The ranks' variables a hibernation saved here, waiting to be given back."""
    saved = namespace.get(SAVED_NAME)
    if not isinstance(saved, dict):
        return None
    return {"name": SAVED_NAME, "size": saved.get("size")}


def socket_directory() -> str | None:
    """The directory of this kernel's UNIX sockets, when its channels are UNIX sockets.

    A bulk stream listens there: a directory only the kernel's owner can enter.
    """
    try:
        from ipykernel.kernelapp import IPKernelApp
    except ImportError:
        return None
    if not IPKernelApp.initialized():
        return None
    app = IPKernelApp.instance()
    if app.transport != "ipc":
        return None
    return os.path.dirname(os.path.abspath(app.ip))


def _where(bulk: BulkStream) -> dict[str, Any]:
    """Where a reply says its bulk stream listens: ``path`` or ``port``."""
    return {"path": bulk.path} if bulk.path is not None else {"port": bulk.port}


class TransferHandler:
    """Answers transfer requests against one namespace.

    Args:
        namespace: Where variables are read from and assigned to (the user's).
        kernel: The ipykernel whose shell channel the replies go out on.
    """

    def __init__(self, namespace: dict[str, Any], kernel: Any = None) -> None:
        self.namespace = namespace
        self.kernel = kernel
        self._incoming: dict[str, _Incoming] = {}
        self._outgoing: dict[str, _Outgoing] = {}

    @property
    def pending(self) -> int:
        """Transfers begun and not finished (received or sent)."""
        return len(self._incoming) + len(self._outgoing)

    def on_shell_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        """ipykernel's shell handler: answer to the requesting client alone."""
        reply, buffers = self.handle(parent.get("content") or {}, parent.get("buffers") or [])
        self.kernel.session.send(stream, protocol.REPLY, reply, parent, ident, buffers=buffers)

    def on_comm_open(self, comm: Any, message: dict[str, Any]) -> None:
        """Comm target: answer the opening message's request, then each message's."""

        def answer(msg: dict[str, Any]) -> None:
            content = msg["content"].get("data") or {}
            reply, buffers = self.handle(content, msg.get("buffers") or [])
            comm.send(reply, buffers=buffers)

        comm.on_msg(answer)
        if message["content"].get("data"):
            answer(message)

    def handle(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Answer one request; errors become ``status: error`` replies naming the variable."""
        self._forget_stale()
        op = content.get("op")
        method = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
        if method is None:
            return {
                "status": "error",
                "ename": "TransferError",
                "name": None,
                "evalue": f"unknown transfer op {op!r}",
            }, []
        try:
            reply, reply_buffers = method(content, buffers)
        except TransferError as exc:
            self._drop(content.get("id"))
            return {
                "status": "error",
                "ename": type(exc).__name__,
                "evalue": str(exc),
                "name": exc.name,
            }, []
        except Exception as exc:
            self._drop(content.get("id"))
            log.exception("transfer op %s failed", op)
            return {
                "status": "error",
                "ename": type(exc).__name__,
                "name": None,
                "evalue": f"{type(exc).__name__}: {exc}. Nothing was assigned.",
            }, []
        reply["status"] = "ok"
        return reply, reply_buffers

    # ------------------------------------------------------------------ bookkeeping

    def _drop(self, transfer_id: Any) -> None:
        for transfer in (
            self._incoming.pop(str(transfer_id), None),
            self._outgoing.pop(str(transfer_id), None),
        ):
            if transfer is not None and transfer.bulk is not None:
                transfer.bulk.close()

    def _forget_stale(self) -> None:
        limit = time.monotonic() - protocol.STALE_AFTER
        transfers: list[tuple[str, _Incoming | _Outgoing]] = [
            *self._incoming.items(),
            *self._outgoing.items(),
        ]
        for key, transfer in transfers:
            moving = transfer.bulk is not None and not transfer.bulk.wait(0)
            if transfer.touched < limit and not moving:
                self._drop(key)

    def _incoming_for(self, content: dict[str, Any]) -> _Incoming:
        incoming = self._incoming.get(str(content.get("id")))
        if incoming is None:
            raise TransferError(
                f"no transfer {content.get('id')!r} in progress here (it was "
                "aborted or forgotten). Nothing was assigned."
            )
        incoming.touched = time.monotonic()
        return incoming

    # ------------------------------------------------------------------ ops

    def _op_hello(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        return {
            "version": protocol.VERSION,
            "python": sys.executable,
            "python_version": sys.version.split()[0],
            "restricted": True,  # rebuilds with the restricted loader when asked
        }, []

    def _user_names(self) -> list[tuple[str, Any]]:
        return user_items(self.namespace, getattr(self.kernel, "shell", None))

    def _op_list(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """The variables (name, type, nbytes) and the modules bound to names.

        With ``check``, each variable is also pickled on trial (within
        :data:`CHECK_BUDGET` seconds in all): ``carriable``, the ``reason`` when
        not, and ``nbytes`` as sent; and one holding tensors or modules says
        where they live (``device``: see :func:`.devices.device_of`). Each module
        says whether it can be re-imported by name elsewhere (``importable``,
        ``reason``). ``comms``: the open comms, by target (see :func:`open_comms`).
        ``ranks``: the ``%%ranks`` engines running beside the kernel, each
        ``{"rank", "node"}`` (their state is in their own processes).
        ``ranks_saved``: the ranks' variables a hibernation saved, which wait for the
        next ``%%ranks`` cell (``{"name", "size"}``), or None.
        """
        check = bool(content.get("check"))
        deadline = time.monotonic() + CHECK_BUDGET
        variables: list[dict[str, Any]] = []
        modules: list[dict[str, Any]] = []
        for name, value in self._user_names():
            if type(value).__name__ == "module":
                modules.append(module_entry(name, value))
                continue
            entry: dict[str, Any] = {
                "name": name,
                "type": type_name(value),
                "nbytes": _sizeof(value),
            }
            if check:
                entry.update(_trial(name, value, time.monotonic() < deadline))
                device = device_of(value)
                if device is not None:
                    entry["device"] = device
            variables.append(entry)
        return {
            "variables": variables,
            "modules": modules,
            "comms": open_comms(self.kernel),
            "ranks": _live_ranks(),
            "ranks_saved": _saved_ranks(self.namespace),
        }, []

    def _op_ranks_save(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Gather the ``%%ranks`` engines' variables into a hidden variable here (see
        :func:`.ranks.magic.save_ranks`)."""
        from .ranks.controller import RanksError
        from .ranks.magic import save_ranks

        try:
            return save_ranks(self.namespace), []
        except RanksError as exc:
            raise TransferError(str(exc)) from None

    def _op_ranks_unsave(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Drop what ``ranks_save`` gathered."""
        from .ranks.saving import drop

        drop(self.namespace)
        return {}, []

    def _op_import(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Import modules by name and bind each to its name here (``np`` for numpy).

        Content: ``modules``, a list of ``{"name", "module"}``. Answers
        ``imported`` (those bound) and ``failed`` (with the ``reason``).
        """
        imported: list[dict[str, str]] = []
        failed: list[dict[str, str]] = []
        for item in content.get("modules") or []:
            name, module = str(item["name"]), str(item["module"])
            try:
                self.namespace[name] = importlib.import_module(module)
            except Exception as exc:  # noqa: BLE001 (an import can raise anything; named)
                failed.append(
                    {"name": name, "module": module, "reason": f"{type(exc).__name__}: {exc}"}
                )
            else:
                imported.append({"name": name, "module": module})
        return {"imported": imported, "failed": failed}, []

    def _op_receive(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        device = content.get("device") or None
        for each in placements(device):
            check_device(each)
        manifest = list(content["variables"])
        sizes = segment_sizes(manifest)
        incoming = _Incoming(manifest, device, [empty_segment(size) for size in sizes])
        if buffers:
            if len(buffers) != len(sizes):
                raise TransferError(f"{len(buffers)} buffers for {len(sizes)} segments")
            for target, buffer in zip(incoming.segments, buffers):
                target[:] = memoryview(buffer).cast("B")
        self._incoming[str(content["id"])] = incoming
        if content.get("commit"):
            return self._op_commit(content, [])
        if content.get("stream"):
            parts = part_count(sum(sizes), int(content.get("parts") or 1))
            incoming.bulk = BulkStream(
                incoming.segments, sending=False, parts=parts, directory=socket_directory()
            ).start()
            return {**_where(incoming.bulk), "token": incoming.bulk.token, "parts": parts}, []
        return {}, []

    def _op_chunk(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        incoming = self._incoming_for(content)
        data = memoryview(buffers[0]).cast("B")
        offset = int(content["offset"])
        segment = incoming.segments[int(content["segment"])]
        if offset + data.nbytes > len(segment):
            raise TransferError("a chunk runs past the end of its segment")
        segment[offset : offset + data.nbytes] = data
        return {}, []

    def _op_commit(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Rebuild and assign every variable received, or none (``device``: see
        :meth:`_assign`)."""
        incoming = self._incoming.pop(str(content.get("id")), None)
        if incoming is None:
            raise TransferError(
                f"no transfer {content.get('id')!r} in progress here. Nothing was assigned."
            )
        if incoming.bulk is not None:
            bulk = incoming.bulk
            if not bulk.wait(protocol.COMMIT_WAIT):
                bulk.close()
            if not bulk.done:
                raise TransferError(
                    f"only {bulk.moved} of {bulk.total} bytes arrived"
                    f"{': ' + bulk.error if bulk.error else ''}. Nothing was assigned."
                )
        pickled = from_segments(incoming.manifest, incoming.segments)
        del incoming
        return self._assign(pickled, content.get("device"), content.get("restricted")), []

    def _assign(
        self, pickled: list[Any], device: Placement, restricted: Any = None
    ) -> dict[str, Any]:
        """Rebuild every variable, then assign them all (none when one fails).

        ``restricted``: they come from a kernel that someone else can run code in, so
        the restricted loader rebuilds them (``source``: that kernel in words;
        ``allowed_types``: the owner's ``c.SharedKernelPulls.allowed_types``).

        ``device``: one device for all (each must go there, or nothing is
        assigned), or one per name: a variable that cannot go to its device is
        assigned on the CPU, and its ``assigned`` entry says ``device`` and
        ``reason``.
        """
        if restricted is None:
            values = load_variables(pickled)
        else:
            from .restricted import load_variables_restricted

            values = load_variables_restricted(
                pickled,
                str(restricted.get("source") or "a kernel that someone else can run code in"),
                [str(entry) for entry in restricted.get("allowed_types") or []],
            )
        del pickled[:]
        where: dict[str, dict[str, Any]] = {}
        if isinstance(device, dict):
            where = _placed(values, device)
        elif device:
            values = {name: to_device(value, device) for name, value in values.items()}
        self.namespace.update(values)
        return {
            "assigned": [
                {"name": name, "type": type_name(value), **where.get(name, {})}
                for name, value in values.items()
            ]
        }

    def _op_abort(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        self._drop(content.get("id"))
        return {}, []

    def _op_send(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        manifest, segments = to_segments(dump_variables(self.namespace, list(content["names"])))
        if sum(s.nbytes for s in segments) <= int(content.get("inline") or 0):
            return {"variables": manifest, "inline": True}, list(segments)
        outgoing = _Outgoing(segments)
        self._outgoing[str(content["id"])] = outgoing
        if content.get("stream"):
            parts = part_count(sum(s.nbytes for s in segments), int(content.get("parts") or 1))
            outgoing.bulk = BulkStream(
                segments, sending=True, parts=parts, directory=socket_directory()
            ).start()
            return {
                "variables": manifest,
                "inline": False,
                **_where(outgoing.bulk),
                "token": outgoing.bulk.token,
                "parts": parts,
            }, []
        return {"variables": manifest, "inline": False}, []

    def _op_store(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Write the named variables into ``path`` on this host (see :mod:`.state_files`),
        refusing beyond ``max_bytes`` or leaving less than ``min_free`` on its disk."""
        return write_state(
            self.namespace,
            list(content["names"]),
            str(content["path"]),
            int(content.get("max_bytes") or 0),
            int(content.get("min_free") or 0),
        ), []

    def _op_load(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Read the ``variables`` written into ``path`` and assign them all, or none
        (``device``: see :meth:`_assign`)."""
        device = content.get("device") or None
        for each in placements(device):
            check_device(each)
        pickled = read_state(str(content["path"]), list(content["variables"]))
        return self._assign(pickled, device, content.get("restricted")), []

    def _op_unstore(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        """Remove a directory written by ``store`` (with ``keep``: keep it as the base of
        the next save, see :func:`.state_files.remove_state`)."""
        return {"removed": remove_state(str(content["path"]), bool(content.get("keep")))}, []

    def _op_read(
        self, content: dict[str, Any], buffers: list[Any]
    ) -> tuple[dict[str, Any], list[Any]]:
        outgoing = self._outgoing.get(str(content.get("id")))
        if outgoing is None:
            raise TransferError(f"no transfer {content.get('id')!r} in progress here")
        outgoing.touched = time.monotonic()
        offset = int(content["offset"])
        segment = outgoing.segments[int(content["segment"])]
        return {}, [segment[offset : offset + int(content["size"])]]


def load_ipython_extension(ipython: Any) -> None:
    """Answer transfer requests in this kernel (shell messages and the comm target)."""
    kernel = getattr(ipython, "kernel", None)
    if kernel is None:  # plain IPython, no kernel to answer for
        return
    if protocol.REQUEST in kernel.shell_handlers:
        return
    handler = TransferHandler(ipython.user_ns, kernel)
    kernel.shell_handlers[protocol.REQUEST] = handler.on_shell_request
    kernel.comm_manager.register_target(protocol.COMM_TARGET, handler.on_comm_open)
    # A cell on every rank of the kernel's allocation (elsewhere %%ranks says to pick one).
    from .ranks.magic import register

    register(ipython)
