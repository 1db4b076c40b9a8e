"""Local port forwards whose local port outlives reconnects of the SSH connection.

asyncssh's own forwarder closes its listener with the connection. Here the
local listener belongs to the forward, not to a connection: every accepted
client is tunnelled through whichever SSH connection is current, waiting for a
reconnect when there is none, so the local port never changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Self, cast

import asyncssh
from asyncssh.forward import SSHForwarder

from .errors import TransportError

#: Receive window asked for on tunnelled channels: larger than asyncssh's
#: default so that bulk downloads are not throttled by round trips. Packets stay
#: at 32 KiB, which measured fastest on loopback (docs/benchmarks.md).
CHANNEL_WINDOW = 8 * 1024 * 1024
CHANNEL_MAX_PACKET = 32 * 1024

#: Bytes kept from a client whose tunnel is not open yet; beyond this, reading
#: from it pauses until the tunnel opens.
EARLY_BYTES_LIMIT = 1024 * 1024

ConnectionGetter = Callable[[], Awaitable[asyncssh.SSHClientConnection]]


class _LocalSide(SSHForwarder):
    """Protocol for one accepted local client; tunnels it once a connection is ready.

    What the client sends before its tunnel is open is kept (up to
    :data:`EARLY_BYTES_LIMIT`, then reading pauses) and handed to the tunnel,
    end of file included, as soon as it opens, as asyncssh's own local
    forwarder does.
    """

    def __init__(self, forward: LocalForward) -> None:
        super().__init__()
        self._forward = forward
        self._opening: asyncio.Task[None] | None = None

    def close(self) -> None:
        self._forward._clients.discard(self)
        opening, self._opening = self._opening, None
        if opening is not None and opening is not asyncio.current_task():
            # The client left while its tunnel was being opened: stop opening it.
            opening.cancel()
        super().close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._forward._closing:
            # Accepted just before the listener closed: nothing will tunnel it.
            self.close()
            return
        self._forward._clients.add(self)
        self._opening = self._forward._spawn(self._open_tunnel())

    def data_received(self, data: bytes, datatype: int | None = None) -> None:
        super().data_received(data, datatype)
        if self._peer is None and len(self._inpbuf) > EARLY_BYTES_LIMIT:
            # No tunnel yet and much already kept: leave the rest in the kernel.
            self.pause_reading()

    async def _open_tunnel(self) -> None:
        fwd = self._forward
        try:
            conn = await fwd._get_connection()
            if fwd.remote_path is not None:
                await conn.create_unix_connection(
                    cast(Callable[[], asyncssh.SSHUNIXSession[bytes]], lambda: SSHForwarder(self)),
                    fwd.remote_path,
                    window=CHANNEL_WINDOW,
                    max_pktsize=CHANNEL_MAX_PACKET,
                )
            else:
                await conn.create_connection(
                    cast(Callable[[], asyncssh.SSHTCPSession[bytes]], lambda: SSHForwarder(self)),
                    fwd.remote_host,
                    fwd.remote_port,
                    window=CHANNEL_WINDOW,
                    max_pktsize=CHANNEL_MAX_PACKET,
                )
        except (OSError, asyncssh.Error, TransportError, TimeoutError) as exc:
            fwd._dropped_a_client(exc)
            self.close()
            return
        finally:
            self._opening = None
        fwd._failing = False
        if self._transport is None or self._peer is None:
            # The client or the channel went away while the tunnel opened.
            self.close()
            return
        # Resume first: writing the kept bytes may pause us again (flow control).
        self._transport.resume_reading()
        if self._inpbuf:
            self._peer.write(self._inpbuf)
            self._inpbuf = b""
        if self._eof_received:
            self._peer.write_eof()


class LocalForward:
    """A listener on 127.0.0.1 whose clients reach ``remote_host:remote_port``, or the
    UNIX socket ``remote_path``, on the host.

    Attributes:
        destination: The SSH host the tunnel goes through.
        remote_host: Address on the far side (usually the host's own 127.0.0.1).
        remote_port: Port on the far side (0 with a ``remote_path``).
        remote_path: A UNIX socket on the far side, or None for a TCP port.
        local_port: The local port; fixed for the forward's whole life.
    """

    def __init__(
        self,
        destination: str,
        get_connection: ConnectionGetter,
        remote_port: int,
        *,
        remote_host: str = "127.0.0.1",
        remote_path: str | None = None,
        local_port: int = 0,
        log: logging.Logger,
    ) -> None:
        self.destination = destination
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.remote_path = remote_path
        self.local_port = local_port
        self.log = log
        self._get_connection = get_connection
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: set[_LocalSide] = set()
        self._closing = False
        self._failing = False

    async def start(self) -> Self:
        """Bind the local listener (127.0.0.1 only) and start accepting."""
        self._closing = False
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _LocalSide(self), "127.0.0.1", self.local_port
        )
        self.local_port = int(self._server.sockets[0].getsockname()[1])
        self.log.debug(
            "forward 127.0.0.1:%d -> %s on %s started",
            self.local_port,
            self.remote,
            self.destination,
        )
        return self

    @property
    def remote(self) -> str:
        """Where clients are tunnelled to, for messages."""
        if self.remote_path is not None:
            return self.remote_path
        return f"{self.remote_host}:{self.remote_port}"

    @property
    def active(self) -> bool:
        """Whether the local listener is open."""
        return self._server is not None

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def expect_drops(self) -> None:
        """The far end is going away (its kernel stops or restarts): log the clients
        dropped from now until a tunnel opens again at debug level only."""
        self._failing = True

    def _dropped_a_client(self, exc: BaseException) -> None:
        """Log a client that could not be tunnelled: the first of a run as a warning.

        A client of a kernel that stopped retries several times a second, so
        the drops that follow are logged at debug level until a tunnel opens.
        """
        log = self.log.debug if self._failing or self._closing else self.log.warning
        self._failing = True
        log(
            "forward 127.0.0.1:%d -> %s on %s: dropped a client: %s",
            self.local_port,
            self.remote,
            self.destination,
            exc,
        )

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.log.error(
                "forward 127.0.0.1:%d -> %s on %s: tunnel task failed",
                self.local_port,
                self.remote,
                self.destination,
                exc_info=exc,
            )

    async def close(self) -> None:
        """Stop listening and drop tunnels that are still being opened."""
        if self._server is None:
            return
        self._closing = True
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for client in list(self._clients):
            client.close()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
