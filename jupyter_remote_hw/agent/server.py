"""The agent's unix-socket server: reads requests, runs ops, writes responses."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from typing import Any, Awaitable, Callable, Dict

from . import AGENT_VERSION
from .hardware import HardwareReporter
from .kernels import KernelManager
from .lifetime import LifetimeWatch
from .metrics import MetricsSampler
from .nodes import NodeReadings
from .operations import AgentOperations
from .paths import StatePaths
from .processes import write_pid_file
from .protocol import (
    BAD_REQUEST,
    INTERNAL,
    MAX_LINE_BYTES,
    AgentError,
    Request,
    RequestParseError,
    arg_bool,
    encode,
    error_response,
    ok_response,
    parse_request,
)
from .relay import KernelRelays
from .shares import ShareRelays
from .zmqcompat import new_context

log = logging.getLogger(__name__)

AGENT_STOPPING = "agent_stopping"
"""Error kind for requests that arrive while the agent shuts down."""

Handler = Callable[[Dict[str, Any]], Awaitable[Dict[str, Any]]]


class AgentServer(AgentOperations):
    """Serves the agent protocol on ``<state>/agent.sock`` until told to stop.

    Construct it inside the running event loop.

    Args:
        paths: The prepared state directory.
        idle_exit: Stop (leaving no kernel, since there is none) after this
            many seconds with no kernel and no client connected; 0: never.
    """

    def __init__(self, paths: StatePaths, idle_exit: float = 0.0) -> None:
        self.paths = paths
        self.idle_exit = idle_exit
        self.context = new_context()
        self.kernels = KernelManager(paths, self.context, on_forget=self._kernel_forgotten)
        self.hardware = HardwareReporter()
        self.metrics = MetricsSampler()
        self.nodes = NodeReadings(os.environ)
        self.lifetime = LifetimeWatch(os.path.join(paths.root, "lifetime.json"), self.kernels)
        self.shares = ShareRelays(os.path.join(paths.root, "shares.json"), self._kernel_channel)
        self.relays = KernelRelays(self.context, lambda kid: self.kernels.get(kid).connection)
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._connection_ids = itertools.count(1)
        self._open_connections: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()
        self._kill_kernels = False
        self._stopping = False
        self._handlers: dict[str, Handler] = {
            "hello": self._hello,
            "hardware": self._hardware,
            "metrics": self._metrics,
            "find_modules": self._find_modules,
            "start_kernel": self._start_kernel,
            "restart_kernel": self._restart_kernel,
            "interrupt_kernel": self._interrupt_kernel,
            "signal_kernel": self._signal_kernel,
            "shutdown_kernel": self._shutdown_kernel,
            "kernel_status": self._kernel_status,
            "list_kernels": self._list_kernels,
            "shutdown_agent": self._shutdown_agent,
            "heartbeat": self._heartbeat,
            "set_lifetime": self._set_lifetime,
            "lifetime": self._lifetime,
            "add_share": self._add_share,
            "drop_share": self._drop_share,
            "list_shares": self._list_shares,
        }

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Re-adopt kernels, then listen on the socket (0600) and write the pid file."""
        self.kernels.open()
        self.lifetime.load()
        self.lifetime.start()
        await self.shares.open()
        try:
            os.unlink(self.paths.socket)
        except FileNotFoundError:
            pass
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve_connection, path=self.paths.socket, limit=MAX_LINE_BYTES
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.paths.socket, 0o600)
        write_pid_file(self.paths.pid, os.getpid())
        if self.idle_exit > 0:
            watch = asyncio.ensure_future(self._exit_when_idle())
            self._tasks.add(watch)
            watch.add_done_callback(self._tasks.discard)
        log.info(
            "agent %s (pid %d) serving %s with %d re-adopted kernel(s)",
            AGENT_VERSION,
            os.getpid(),
            self.paths.socket,
            len(self.kernels.kernels),
        )

    def idle(self) -> bool:
        """Whether the agent has no kernel (running or starting), no client, and no
        lifetime policy to enforce."""
        return not self.kernels.busy() and not self._writers and not self.lifetime.enforcing

    async def _exit_when_idle(self) -> None:
        """Stop once :meth:`idle` has held for ``idle_exit`` seconds."""
        check = min(5.0, max(0.2, self.idle_exit / 4))
        idle_since: float | None = None
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(check)
            if not self.idle():
                idle_since = None
            elif idle_since is None:
                idle_since = loop.time()
            elif loop.time() - idle_since >= self.idle_exit:
                log.info("no kernel and no client for %.0f s: stopping", self.idle_exit)
                self.request_stop(kill_kernels=False)

    def ready_line(self) -> dict[str, Any]:
        """The readiness line printed by ``serve``: socket, pid and version."""
        return {"socket": self.paths.socket, "pid": os.getpid(), "version": AGENT_VERSION}

    def request_stop(self, kill_kernels: bool) -> None:
        """Ask the agent to stop (from a signal handler or the shutdown_agent op).

        Args:
            kill_kernels: Shut down every kernel too; otherwise they keep running
                and the next agent re-adopts them.
        """
        if not self._stopping:
            self._stopping = True
            self._kill_kernels = kill_kernels
            self._stop.set()

    async def wait_stopped(self) -> None:
        """Wait until asked to stop, then stop serving, stop kernels if asked, clean up."""
        await self._stop.wait()
        log.info("agent stopping (kill kernels: %s)", self._kill_kernels)
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.lifetime.close()
        await self.shares.close()
        await self.relays.close()
        await self.kernels.close(kill_kernels=self._kill_kernels)
        if self.context is not None:
            self.context.destroy(linger=0)
        for path in (self.paths.socket, self.paths.pid):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        log.info("agent stopped")

    # ------------------------------------------------------------------ connections

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read requests from one client until it disconnects.

        Requests run concurrently; a client that disconnects does not cancel
        them (a kernel being started keeps starting).
        """
        self._writers.add(writer)
        connection = next(self._connection_ids)
        self._open_connections.add(connection)
        write_lock = asyncio.Lock()
        try:
            while True:
                try:
                    line = await reader.readline()
                except ValueError:
                    await self._send(
                        writer,
                        write_lock,
                        error_response(
                            None, BAD_REQUEST, f"request line longer than {MAX_LINE_BYTES} bytes"
                        ),
                    )
                    break
                except ConnectionError:
                    break
                if not line:
                    break
                if not line.strip():
                    continue
                if b"relay" in line and await self._serve_relay(
                    line, reader, writer, write_lock, connection
                ):
                    break  # the stream was a relay's, for as long as it lasted
                task = asyncio.ensure_future(
                    self._serve_request(line, writer, write_lock, connection)
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            self._writers.discard(writer)
            self._open_connections.discard(connection)
            self.kernels.release(connection)
            writer.close()

    async def _serve_request(
        self,
        line: bytes,
        writer: asyncio.StreamWriter,
        write_lock: asyncio.Lock,
        connection: int,
    ) -> None:
        request: Request | None = None
        try:
            request = parse_request(line)
        except RequestParseError as exc:
            response = error_response(exc.request_id, exc.kind, exc.message)
        else:
            if request.op != "start_kernel":  # a start names a kernel that is not there yet
                self._hold(connection, request.args.get("kernel_id"))
            response = await self.dispatch(request)
            if request.op == "start_kernel" and response["ok"]:
                kernel_id = response["result"].get("kernel_id")
                if connection not in self._open_connections:
                    await self._end_unconfirmed(str(kernel_id))
                    return
                self._hold(connection, kernel_id)
        await self._send(writer, write_lock, response)
        if (
            request is not None
            and request.op == "shutdown_agent"
            and response["ok"]
            and response["result"]["stopping"]
        ):
            self.request_stop(arg_bool(request.args, request.op, "kill_kernels", True))

    async def _serve_relay(
        self,
        line: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        write_lock: asyncio.Lock,
        connection: int,
    ) -> bool:
        """Serve a ``relay`` request's stream until it ends; False if ``line`` is another op."""
        try:
            request = parse_request(line)
        except RequestParseError:
            return False
        if request.op != "relay":
            return False
        self._hold(connection, request.args.get("kernel_id"))

        async def answer(result: dict[str, Any]) -> None:
            await self._send(writer, write_lock, ok_response(request.id, result))

        try:
            await self.relays.attach(request.args, reader, writer, answer)
        except AgentError as exc:
            await self._send(writer, write_lock, error_response(request.id, exc.kind, exc.message))
        return True

    async def _send(
        self, writer: asyncio.StreamWriter, write_lock: asyncio.Lock, response: dict[str, Any]
    ) -> None:
        async with write_lock:
            if writer.is_closing():
                return
            try:
                writer.write(encode(response))
                await writer.drain()
            except ConnectionError:
                pass

    async def _end_unconfirmed(self, kernel_id: str) -> None:
        """A kernel whose starter went away before it was told the kernel had started:
        nobody knows it runs, so it ends now, not after its orphan grace."""
        log.warning(
            "kernel %s: its starter went away before it was told the kernel had started; "
            "shutting it down",
            kernel_id,
        )
        try:
            await self._shutdown_kernel({"kernel_id": kernel_id, "now": True})
        except AgentError as exc:
            log.info("kernel %s: %s", kernel_id, exc.message)
        await self.relays.drop(kernel_id)

    def _hold(self, connection: int, kernel_id: Any) -> None:
        """Let an open connection hold the kernel it started or named in a request."""
        if connection in self._open_connections and isinstance(kernel_id, str):
            self.kernels.hold(kernel_id, connection)

    async def _kernel_forgotten(self, kernel_id: str) -> None:
        """A kernel the agent ended or forgot on its own: its shares end with it."""
        await self.shares.drop_kernel(kernel_id)
        await self.relays.drop(kernel_id)

    async def dispatch(self, request: Request) -> dict[str, Any]:
        """Run one request's op and build its response.

        Args:
            request: The parsed request.

        Returns:
            The response dict (never raises).
        """
        handler = self._handlers.get(request.op)
        if handler is None:
            known = ", ".join(sorted(self._handlers))
            return error_response(
                request.id,
                BAD_REQUEST,
                f"unknown op {request.op!r}: agent {AGENT_VERSION} knows {known}",
            )
        if self._stopping and request.op != "hello":
            return error_response(
                request.id,
                AGENT_STOPPING,
                f"the agent at {self.paths.socket} is shutting down: start it again",
            )
        log.debug("request %d: %s", request.id, request.op)
        self.lifetime.heartbeat()
        try:
            result = await handler(request.args)
        except AgentError as exc:
            log.info("request %d (%s) failed: %s", request.id, request.op, exc.kind)
            return error_response(request.id, exc.kind, exc.message)
        except Exception as exc:
            log.exception("request %d (%s) failed unexpectedly", request.id, request.op)
            return error_response(
                request.id,
                INTERNAL,
                f"the agent failed on {request.op}: {type(exc).__name__}: {exc}; "
                f"its log is {self.paths.log}",
            )
        return ok_response(request.id, result)
