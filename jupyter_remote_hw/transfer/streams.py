"""Byte streams to a kernel's host for bulk streams: what opens them, reads and writes them.

Our side of ``bulk.py``: a :data:`StreamOpener` opens a byte stream to a port
on the kernel's host's 127.0.0.1 (an SSH channel, or a local connection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import asyncssh

#: How a bulk stream breaks: a socket error here, or the SSH connection under it lost.
STREAM_ERRORS = (OSError, asyncssh.Error)


class StreamReader(Protocol):
    """What a bulk stream reads with (``asyncio.StreamReader``, ``asyncssh.SSHReader``)."""

    async def read(self, n: int = -1) -> bytes: ...

    async def readline(self) -> bytes: ...


class StreamWriter(Protocol):
    """What a bulk stream writes with (``asyncio.StreamWriter``, ``asyncssh.SSHWriter``)."""

    def write(self, data: Any) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...

    def close(self) -> None: ...


#: Opens a byte stream to a port on the kernel's host's 127.0.0.1.
StreamOpener = Callable[[int], Awaitable[tuple[StreamReader, StreamWriter]]]

#: Writes a transfer's bytes to a bulk stream, reporting bytes written so far.
Feed = Callable[[StreamWriter, Callable[[int], None]], Awaitable[None]]


#: Buffer limit of the reader of a bulk stream on this machine.
_LOCAL_STREAM_LIMIT = 4 * 1024 * 1024


async def open_local_stream(port: int) -> tuple[StreamReader, StreamWriter]:
    """A :data:`StreamOpener` for kernels on this machine."""
    return await asyncio.open_connection("127.0.0.1", port, limit=_LOCAL_STREAM_LIMIT)


class _NoStream(Exception):
    """The bulk stream could not be opened (the chunk path is used instead)."""
