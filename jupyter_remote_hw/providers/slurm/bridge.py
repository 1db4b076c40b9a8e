"""Byte streams to a compute node's sockets, carried by job steps through the login node.

The login node's SSH connection cannot open a socket on a compute node of a
cluster of separate hosts. Each stream there is instead a step of the job
(``srun -u --jobid=ID --overlap -w NODE``), started over the login node's SSH
connection, that runs :data:`BRIDGE_SCRIPT` with the node's Python: it connects
to the socket on the node and copies bytes between it and its stdin and stdout,
which srun carries unchanged (``-u``: no line buffering). The stream our side
gets is the step's stdout and stdin, the same asyncssh stream types as a direct
channel's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

from ...transport import ConnectionFailedError, SSHConnection

#: Runs on the node: ``python -c BRIDGE_SCRIPT unix PATH`` or ``... tcp PORT``. Says
#: ``+`` once connected (our side waits for it), then copies bytes both ways.
BRIDGE_SCRIPT = """
import os, socket, sys, threading
kind, where = sys.argv[1], sys.argv[2]
try:
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.connect(where)
    else:
        s = socket.create_connection(("127.0.0.1", int(where)))
except OSError as exc:
    sys.stderr.write("cannot connect to %s: %s\\n" % (where, exc))
    sys.exit(1)
os.write(1, b"+")
def up():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        s.sendall(data)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
while True:
    data = s.recv(65536)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
os._exit(0)
"""

#: Opens a bridged stream to a UNIX socket path (str) or a TCP port (int) on the node.
Opener = Callable[[str | int], Awaitable[tuple[Any, Any]]]


async def open_bridge(
    conn: SSHConnection,
    command: Callable[[str], str],
    job_id: str,
    node: str,
    python: str,
    where: str | int,
    timeout: float = 30.0,
) -> tuple[Any, Any]:
    """Open a byte stream to ``where`` on ``node``, through a step of job ``job_id``.

    Args:
        conn: The login node's SSH connection.
        command: Puts the cluster's environment in front of a command.
        job_id: The job whose allocation holds the node.
        node: The node.
        python: The node's Python.
        where: A UNIX socket's path, or a port on the node's 127.0.0.1.
        timeout: Seconds the step may take to connect.

    Returns:
        A reader and a writer (asyncssh streams) of the bytes to and from ``where``.

    Raises:
        ConnectionFailedError: The step did not start or could not connect.
    """
    kind = "unix" if isinstance(where, str) else "tcp"
    text = command(
        shlex.join(
            [
                "srun",
                "-u",
                f"--jobid={job_id}",
                "--overlap",
                "-N1",
                "-n1",
                "-w",
                node,
                "--job-name=jupyter-remote-hw-bridge",
                python,
                "-c",
                BRIDGE_SCRIPT,
                kind,
                str(where),
            ]
        )
    )
    raw = await conn.wait_connected(conn.settings.forward_wait_timeout)
    process = await raw.create_process(text, encoding=None)
    try:
        async with asyncio.timeout(timeout):
            first = await process.stdout.read(1)
    except TimeoutError:
        first = b""
    if first != b"+":
        process.close()
        errors = b""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2):
                errors = await process.stderr.read()
        said = errors.decode(errors="replace").strip().splitlines()
        raise ConnectionFailedError(
            conn.destination,
            f"job {job_id} on {node}: cannot open {where}: "
            f"{said[-1] if said else 'the step did not start'}",
        )
    return process.stdout, process.stdin


class BridgeForward:
    """A local port whose every client is bridged to one socket on the node.

    Stands in for :class:`..transport.LocalForward` (a kernel's heartbeat):
    ``local_port`` stays for the forward's life.

    Args:
        opener: Opens a bridged stream to ``remote_path`` or ``remote_port``.
        remote_port: The TCP port on the node (0 when ``remote_path`` is given).
        remote_path: The UNIX socket on the node, or None.
        local_port: The local port to listen on (0: any free one).
        log: Where to log.
    """

    def __init__(
        self,
        opener: Opener,
        remote_port: int,
        remote_path: str | None,
        local_port: int,
        log: logging.Logger,
    ) -> None:
        self.opener = opener
        self.remote_port = remote_port
        self.remote_path = remote_path
        self.local_port = local_port
        self.log = log
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> bool:
        """Whether the local listener is open."""
        return self._server is not None

    async def start(self) -> BridgeForward:
        """Listen on 127.0.0.1."""
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.local_port)
        self.local_port = int(self._server.sockets[0].getsockname()[1])
        return self

    def expect_drops(self) -> None:
        """Nothing to quiet: a dropped client is logged at debug level only."""

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            where: str | int = (
                self.remote_path if self.remote_path is not None else self.remote_port
            )
            far_reader, far_writer = await self.opener(where)
            await _pump_both(reader, writer, far_reader, far_writer)
        except (OSError, ConnectionFailedError, asyncio.IncompleteReadError) as exc:
            self.log.debug(
                "bridge to %s: dropped a client: %s", self.remote_path or self.remote_port, exc
            )
        finally:
            writer.close()
            self._tasks.discard(task)

    async def close(self) -> None:
        """Stop listening and drop every client."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()


async def _pump_both(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, far_reader: Any, far_writer: Any
) -> None:
    """Copy bytes both ways until either side ends."""

    async def pump(source: Any, sink: Any) -> None:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()

    ups = asyncio.ensure_future(pump(reader, far_writer))
    downs = asyncio.ensure_future(pump(far_reader, writer))
    try:
        await asyncio.wait([ups, downs], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (ups, downs):
            task.cancel()
        await asyncio.gather(ups, downs, return_exceptions=True)
        far_writer.close()


__all__ = ["BRIDGE_SCRIPT", "BridgeForward", "open_bridge"]
