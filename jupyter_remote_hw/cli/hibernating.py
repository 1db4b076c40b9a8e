"""``jupyter remote-hw hibernate KERNEL`` and ``jupyter remote-hw wake KERNEL [--on
TARGET]``: done by the running Jupyter server that has the kernel (it lives there).

The servers of this user are found from their runtime files (jupyter_server's
:func:`~jupyter_server.serverapp.list_running_servers`, as ``list`` finds them), or
named with ``--server URL``; the one whose ``GET /api/kernels`` has the kernel (its id,
or the start of it) is asked (``POST /jupyter-remote-hw/api/hibernate/<id>`` or
``.../wake/<id>``). While it works, its steps come from the server's event socket
(``hibernation`` and ``launch`` events of that kernel) as progress lines on stderr;
the result is printed once it answers. A server's token is sent, never shown.

:func:`add_parsers` adds the subcommands to the main parser's subcommands, and
:func:`run` runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from ..hibernation import POLICIES
from ..hibernation.store import size_text
from ..machines.manager import MachineManager
from ..validation import KERNEL_ID, NAME, argument_type
from .base import BaseCommands, CLIError
from .machines import RunningServer, ServerRequestError, running_servers

log = logging.getLogger(__name__)

COMMANDS = ("hibernate", "wake")
"""The subcommands this module adds."""

#: The routes asked, under a server's base URL.
KERNELS_ROUTE = "api/kernels"
HIBERNATE_ROUTE = "jupyter-remote-hw/api/hibernate"
WAKE_ROUTE = "jupyter-remote-hw/api/wake"
EVENTS_ROUTE = "jupyter-remote-hw/api/events"
#: Seconds a server has to hibernate or wake a kernel (a wake launches it: a cloud
#: machine may have to start, a cluster job to wait in its queue).
ACTION_TIMEOUT = 1800.0
#: Seconds a server has to list its kernels, for ``hibernated``.
LISTING_TIMEOUT = 3.0
#: Seconds the events of a finished request have to arrive.
EVENTS_DRAIN = 0.2
#: Seconds the server has to close the event socket.
EVENTS_CLOSE = 5.0

NO_SERVER = "no Jupyter server of yours is running; start one, or pass --server"


def add_parsers(commands: Any) -> None:
    """Add the hibernate and wake subcommands to ``commands`` (argparse subparsers)."""
    kernel = {
        "type": argument_type(KERNEL_ID, "kernel"),
        "help": "the kernel's id, or the start of it (`jupyter remote-hw list` shows them)",
    }
    server = {
        "metavar": "URL",
        "help": "the Jupyter server that has the kernel (default: each running server of "
        "yours); its token comes from its runtime file, else from $JUPYTER_TOKEN",
    }
    hibernate = commands.add_parser(
        "hibernate",
        help="save a kernel's state on its Jupyter server and let its hardware go; "
        "it keeps its id and wakes on its next cell",
    )
    hibernate.add_argument("kernel", **kernel)
    hibernate.add_argument(
        "--policy",
        choices=POLICIES,
        help="when something cannot be saved: partial (default) saves the rest and "
        "lists it; refuse saves nothing and the kernel runs on",
    )
    hibernate.add_argument("--server", **server)
    wake = commands.add_parser(
        "wake", help="bring a hibernated kernel back with its state, on its target or another"
    )
    wake.add_argument("kernel", **kernel)
    wake.add_argument(
        "--on",
        metavar="TARGET",
        type=argument_type(NAME, "target"),
        help="wake it on this target instead (it becomes the kernel's target, as a "
        "hardware switch does; tensors come back on their GPU where it has one, "
        "else on the CPU)",
    )
    wake.add_argument("--server", **server)


async def run(args: argparse.Namespace, manager: MachineManager, out: TextIO, err: TextIO) -> None:
    """Run one parsed hibernate or wake subcommand."""
    commands = HibernationCommands(manager, out, err)
    if args.command == "hibernate":
        await commands.hibernate(args.kernel, args.policy, args.server)
    else:
        await commands.wake(args.kernel, args.on, args.server)


def servers_to_ask(url: str | None) -> list[RunningServer]:
    """The running servers of this user, or the one at ``url``.

    Raises:
        CLIError: None runs (and no ``url``), or ``url`` is not an HTTP URL.
    """
    running = running_servers()
    if url is None:
        if not running:
            raise CLIError(NO_SERVER)
        return running
    if not url.startswith(("http://", "https://")):
        raise CLIError(f"--server {url}: give the server's URL, such as http://127.0.0.1:8888/")
    known = [s for s in running if s.url.rstrip("/") == url.rstrip("/")]
    return known[:1] or [RunningServer(url, os.environ.get("JUPYTER_TOKEN", ""))]


async def _kernel_ids(server: RunningServer, timeout: float) -> list[str]:
    kernels = await server.call(KERNELS_ROUTE, timeout=timeout)
    if not isinstance(kernels, list):
        raise ServerRequestError("its kernel listing is not a list")
    return [str(k["id"]) for k in kernels if isinstance(k, dict) and "id" in k]


async def find_kernel(servers: list[RunningServer], key: str) -> tuple[RunningServer, str]:
    """The server that has the kernel whose id is ``key`` or starts with it, and its id.

    Raises:
        CLIError: No server has such a kernel, or several kernels' ids start with ``key``.
    """
    answers = await asyncio.gather(
        *(_kernel_ids(s, LISTING_TIMEOUT * 3) for s in servers), return_exceptions=True
    )
    found: dict[str, RunningServer] = {}
    silent = []
    for server, answer in zip(servers, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, OSError | ServerRequestError | ValueError):
                raise answer
            silent.append(f"{server.url} did not answer: {answer}")
            continue
        for kernel_id in answer:
            if kernel_id == key:
                return server, kernel_id
            if kernel_id.startswith(key):
                found.setdefault(kernel_id, server)
    if len(found) == 1:
        ((kernel_id, server),) = found.items()
        return server, kernel_id
    if found:
        raise CLIError(
            f"{key} is the start of {len(found)} kernels' ids "
            f"({', '.join(k[:12] for k in sorted(found))}); give more of it"
        )
    where = ", ".join(s.url for s in servers)
    unheard = f" ({'; '.join(silent)})" if silent else ""
    raise CLIError(
        f"no kernel {key} on the Jupyter server{'s' if len(servers) > 1 else ''} at "
        f"{where}{unheard}; `jupyter remote-hw list` shows the kernels"
    )


async def held_kernels() -> dict[str, str]:
    """The kernels the running servers of this user have: the URL of each one's server,
    by kernel id (empty when none runs or answers in time)."""
    servers = running_servers()
    answers = await asyncio.gather(
        *(_kernel_ids(s, LISTING_TIMEOUT) for s in servers), return_exceptions=True
    )
    held: dict[str, str] = {}
    for server, answer in zip(servers, answers, strict=True):
        if isinstance(answer, BaseException):
            log.debug("%s: no kernel listing: %s", server.url, answer)
            continue
        held.update((kernel_id, server.url) for kernel_id in answer)
    return held


def _count(items: list[Any], word: str) -> str:
    """``1 variable``, ``2 variables``."""
    return f"{len(items)} {word}{'' if len(items) == 1 else 's'}"


class HibernationCommands(BaseCommands):
    """The hibernate and wake subcommands (see :class:`.base.BaseCommands`): progress on
    ``err``, the result on ``out``."""

    async def hibernate(self, key: str, policy: str | None, url: str | None) -> None:
        """Hibernate the kernel whose id is (or starts with) ``key``."""
        server, kernel_id = await find_kernel(servers_to_ask(url), key)
        self._note(f"Hibernating kernel {kernel_id} on the Jupyter server at {server.url}…")
        body = {"policy": policy} if policy else {}
        answer = await self._ask(server, f"{HIBERNATE_ROUTE}/{kernel_id}", body, kernel_id)
        saved, modules = answer.get("saved") or [], answer.get("modules") or []
        self._print(
            f"kernel {kernel_id} hibernated: {size_text(int(answer.get('bytes') or 0))} "
            f"saved in {float(answer.get('seconds') or 0):.1f} s ({_count(saved, 'variable')}, "
            f"{_count(modules, 'module')}); its hardware is let go, and its next cell wakes it"
        )
        for left in answer.get("left_out") or []:
            what = left.get("type") or left.get("module") or ""
            self._print(
                f"left out: {left.get('name')}{f' ({what})' if what else ''}: {left.get('reason')}"
            )

    async def wake(self, key: str, target: str | None, url: str | None) -> None:
        """Wake the kernel whose id is (or starts with) ``key``, on ``target`` if given."""
        server, kernel_id = await find_kernel(servers_to_ask(url), key)
        where = f" on {target}" if target else ""
        self._note(f"Waking kernel {kernel_id}{where} (Jupyter server at {server.url})…")
        body = {"target": target} if target else {}
        answer = await self._ask(server, f"{WAKE_ROUTE}/{kernel_id}", body, kernel_id)
        on = answer.get("target") or target or "its target"
        if not answer.get("woken"):
            self._print(f"kernel {kernel_id} is not hibernated (it runs on {on}): nothing to wake")
            return
        assigned, imported = answer.get("assigned") or [], answer.get("imported") or []
        self._print(
            f"kernel {kernel_id} woke on {on}: {size_text(int(answer.get('bytes') or 0))} "
            f"restored in {float(answer.get('seconds') or 0):.1f} s "
            f"({_count(assigned, 'variable')}, {_count(imported, 'module')})"
        )
        for note in answer.get("notes") or []:
            self._print(f"note: {note}")

    async def _ask(
        self, server: RunningServer, route: str, body: dict[str, Any], kernel_id: str
    ) -> dict[str, Any]:
        """POST ``body`` to ``route``, showing the kernel's events meanwhile.

        Raises:
            CLIError: The server refused (its message), or did not answer.
        """
        async with self._following(server, kernel_id):
            try:
                answer = await server.call(route, "POST", body, ACTION_TIMEOUT)
            except ServerRequestError as exc:
                raise CLIError(str(exc)) from None
            except OSError as exc:
                raise CLIError(
                    f"the Jupyter server at {server.url} did not answer: {exc}"
                ) from None
            await asyncio.sleep(EVENTS_DRAIN)
        if not isinstance(answer, dict):
            raise CLIError(f"the Jupyter server at {server.url} answered {answer!r}")
        return answer

    @contextlib.asynccontextmanager
    async def _following(self, server: RunningServer, kernel_id: str) -> AsyncIterator[None]:
        """Show the kernel's ``hibernation`` and ``launch`` events while inside (nothing
        when the server's event socket cannot be opened)."""
        began = time.monotonic()
        url = "ws" + server.url.rstrip("/").removeprefix("http") + "/" + EVENTS_ROUTE
        request = HTTPRequest(
            url, headers={"Authorization": f"token {server.token}"}, connect_timeout=5.0
        )
        try:
            socket = await websocket_connect(request)
        except (OSError, HTTPClientError, TimeoutError) as exc:
            log.debug("%s: no event socket: %s", server.url, exc)
            yield
            return
        reader = asyncio.ensure_future(self._read_events(socket, kernel_id, began))
        try:
            yield
        finally:
            socket.close()  # the reader ends once the server has closed its side too
            try:
                async with asyncio.timeout(EVENTS_CLOSE):
                    await asyncio.shield(reader)
            except TimeoutError:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

    async def _read_events(
        self, socket: WebSocketClientConnection, kernel_id: str, began: float
    ) -> None:
        while (message := await socket.read_message()) is not None:
            try:
                event = json.loads(message)
            except ValueError:
                continue
            if not isinstance(event, dict) or event.get("kernel_id") != kernel_id:
                continue
            if event.get("type") == "launch":
                self._show_step(event, began)
            elif event.get("type") == "hibernation" and event.get("state") == "saving":
                self._show_saving(event, began)

    def _show_saving(self, event: dict[str, Any], began: float) -> None:
        step, done, total = event.get("step") or "", event.get("done"), event.get("total")
        if step == "starting":
            return
        amount = f": {size_text(int(done or 0))} of {size_text(int(total))}" if total else ""
        self.err.write(f"[{time.monotonic() - began:6.1f} s]     {step}{amount}\n")
        self.err.flush()


__all__ = [
    "COMMANDS",
    "HibernationCommands",
    "add_parsers",
    "find_kernel",
    "held_kernels",
    "run",
    "servers_to_ask",
]
