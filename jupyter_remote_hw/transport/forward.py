"""Local port forwards whose local port outlives reconnects of the SSH connection.

asyncssh's own forwarder closes its listener with the connection. Here the
local listener belongs to the forward, not to a connection: every accepted
client is tunnelled through whichever SSH connection is current, waiting for a
reconnect when there is none, so the local port never changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Self, cast

import asyncssh
from asyncssh.forward import SSHForwarder

#: Receive window asked for on tunnelled channels: larger than asyncssh's
#: default so that bulk downloads are not throttled by round trips. Packets stay
#: at 32 KiB, which measured fastest on loopback (docs/benchmarks.md).
CHANNEL_WINDOW = 8 * 1024 * 1024
CHANNEL_MAX_PACKET = 32 * 1024

ConnectionGetter = Callable[[], Awaitable[asyncssh.SSHClientConnection]]


class _LocalSide(SSHForwarder):
    """Protocol for one accepted local client; tunnels it once a connection is ready."""

    def __init__(self, forward: LocalForward) -> None:
        super().__init__()
        self._forward = forward

    def close(self) -> None:
        self._forward._clients.discard(self)
        super().close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if self._forward._closing:
            # Accepted just before the listener closed: nothing will tunnel it.
            self.close()
            return
        self._forward._clients.add(self)
        # Hold the client's bytes in the kernel until the tunnel exists.
        self.pause_reading()
        self._forward._spawn(self._open_tunnel())

    async def _open_tunnel(self) -> None:
        fwd = self._forward
        try:
            conn = await fwd._get_connection()
            await conn.create_connection(
                cast(Callable[[], asyncssh.SSHTCPSession[bytes]], lambda: SSHForwarder(self)),
                fwd.remote_host,
                fwd.remote_port,
                window=CHANNEL_WINDOW,
                max_pktsize=CHANNEL_MAX_PACKET,
            )
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            fwd.log.warning(
                "forward 127.0.0.1:%d -> %s:%d on %s: dropped a client: %s",
                fwd.local_port, fwd.remote_host, fwd.remote_port, fwd.destination, exc,
            )
            self.close()
            return
        if self._transport is not None:
            self.resume_reading()


class LocalForward:
    """A listener on 127.0.0.1 whose clients reach ``remote_host:remote_port`` on the host.

    Attributes:
        destination: The SSH host the tunnel goes through.
        remote_host: Address on the far side (usually the host's own 127.0.0.1).
        remote_port: Port on the far side.
        local_port: The local port; fixed for the forward's whole life.
    """

    def __init__(
        self,
        destination: str,
        get_connection: ConnectionGetter,
        remote_port: int,
        *,
        remote_host: str = "127.0.0.1",
        local_port: int = 0,
        log: logging.Logger,
    ) -> None:
        self.destination = destination
        self.remote_host = remote_host
        self.remote_port = remote_port
        self.local_port = local_port
        self.log = log
        self._get_connection = get_connection
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._clients: set[_LocalSide] = set()
        self._closing = False

    async def start(self) -> Self:
        """Bind the local listener (127.0.0.1 only) and start accepting."""
        self._closing = False
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _LocalSide(self), "127.0.0.1", self.local_port
        )
        self.local_port = int(self._server.sockets[0].getsockname()[1])
        self.log.debug(
            "forward 127.0.0.1:%d -> %s:%d on %s started",
            self.local_port, self.remote_host, self.remote_port, self.destination,
        )
        return self

    @property
    def active(self) -> bool:
        """Whether the local listener is open."""
        return self._server is not None

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
