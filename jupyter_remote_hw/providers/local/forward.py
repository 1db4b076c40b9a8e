"""A TCP port on 127.0.0.1 forwarded to a channel of a kernel on this machine.

A kernel here listens on UNIX sockets (or ports) the agent picked, which change
when the kernel is started again (a wake from hibernation). Its clients keep
the ports they were given: the relay keeps those of the shell, control, stdin
and IOPub channels, and this forward the heartbeat's, as an SSH forward does
for a kernel on another host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ...transfer.streams import StreamReader, StreamWriter, open_local_stream

#: Bytes read at a time from one side of a forwarded connection.
_CHUNK = 64 * 1024


class LocalForward:
    """Forwards connections to a local TCP port to a kernel's channel.

    Args:
        where: The channel: a UNIX socket's path, or a port on 127.0.0.1.
        log: Where to log.
    """

    def __init__(self, where: int | str, log: logging.Logger) -> None:
        self.where = where
        self.log = log
        self.local_port = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> bool:
        """Whether it still accepts connections."""
        return self._server is not None and self._server.is_serving()

    async def start(self, local_port: int = 0) -> int:
        """Listen on ``local_port`` when it is free, else on any free port; the port."""
        try:
            self._server = await asyncio.start_server(self._connected, "127.0.0.1", local_port)
        except OSError:
            if not local_port:
                raise
            self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        self.local_port = int(self._server.sockets[0].getsockname()[1])
        return self.local_port

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            try:
                far_reader, far_writer = await open_local_stream(self.where)
            except OSError as exc:
                self.log.debug("forward to %s: %s", self.where, exc)
                return
            try:
                await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))
            finally:
                far_writer.close()
        finally:
            writer.close()
            self._pipes.discard(task)

    def expect_drops(self) -> None:
        """Nothing to do: a failed connection here is logged at debug level only."""

    async def close(self) -> None:
        """Stop listening and end the connections it forwards."""
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


async def _pipe(reader: StreamReader, writer: StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until either side ends."""
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.write_eof()
