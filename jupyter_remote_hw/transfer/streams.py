"""Byte streams to a kernel's host for bulk streams: what opens them, reads and writes them.

Our side of ``bulk.py``: a :data:`StreamOpener` opens a byte stream to a port
on the kernel's host's 127.0.0.1 (an SSH channel, or a local connection).
A bulk stream in parts takes one stream per part, opened all at once
(:func:`open_parts`), each moving its range of the bytes while the others
move theirs (:func:`run_parts`): the first part to fail stops the others, and
every stream is closed whatever happens (:func:`close_parts`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
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


#: Opens a byte stream to a port on the kernel's host's 127.0.0.1 (an ``int``), or to
#: a UNIX socket there (a ``str``, its path).
StreamOpener = Callable[[int | str], Awaitable[tuple[StreamReader, StreamWriter]]]

#: Writes a transfer's bytes to a bulk stream, reporting bytes written so far.
Feed = Callable[[StreamWriter, Callable[[int], None]], Awaitable[None]]


#: Buffer limit of the reader of a bulk stream on this machine.
_LOCAL_STREAM_LIMIT = 4 * 1024 * 1024


async def open_local_stream(where: int | str) -> tuple[StreamReader, StreamWriter]:
    """A :data:`StreamOpener` for kernels on this machine."""
    if isinstance(where, str):
        return await asyncio.open_unix_connection(where, limit=_LOCAL_STREAM_LIMIT)
    return await asyncio.open_connection("127.0.0.1", where, limit=_LOCAL_STREAM_LIMIT)


def has_stream(content: dict[str, Any]) -> bool:
    """Whether a reply announces a bulk stream."""
    return bool(content.get("path")) or "port" in content


class NoStream(Exception):
    """The bulk stream could not be opened (the chunk path is used instead)."""


#: The streams of a bulk stream's parts, in part order.
Parts = list[tuple[StreamReader, StreamWriter]]


def token_line(token: str, index: int, parts: int) -> bytes:
    """The first line sent on a part's stream: the token, and the part's index if there are several."""
    return token.encode() + (b"\n" if parts == 1 else b" %d\n" % index)


async def open_parts(opener: StreamOpener | None, content: dict[str, Any]) -> Parts:
    """Open a stream for every part of the bulk stream a reply announced, all at once.

    Each stream has presented the token and its part's index.

    Args:
        opener: Opens a stream to a port or UNIX socket on the kernel's host; None
            when there is no way.
        content: The reply announcing the stream: ``path`` or ``port``, ``token``,
            ``parts`` (one when absent, as from a kernel that splits nothing).

    Raises:
        NoStream: The reply announced no stream, or a part's stream could not
            be opened (those that were are closed again).
    """
    if opener is None or not (has_stream(content)):
        raise NoStream("no bulk stream")
    where: int | str = str(content["path"]) if content.get("path") else int(content["port"])
    parts = max(1, int(content.get("parts") or 1))
    tasks = [asyncio.ensure_future(opener(where)) for _ in range(parts)]
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        close_parts(
            [
                task.result()
                for task in tasks
                if task.done() and not task.cancelled() and task.exception() is None
            ]
        )
        raise
    opened = [result for result in results if not isinstance(result, BaseException)]
    failed = [result for result in results if isinstance(result, BaseException)]
    if failed:
        close_parts(opened)
        raise NoStream(f"{type(failed[0]).__name__}: {failed[0]}") from failed[0]
    for index, (_, writer) in enumerate(opened):
        writer.write(token_line(str(content["token"]), index, parts))
    return opened


def close_parts(parts: Parts) -> None:
    """Close every part's stream (those already closed stay so), dropping what is still
    unsent: a transfer that stopped midway sends nothing more. A stream closed behind
    unsent bytes would stay open, sending them, until the kernel read them all, which it
    never does once the transfer is aborted."""
    for _, writer in parts:
        if isinstance(writer, asyncio.StreamWriter):
            writer.transport.abort()
        elif isinstance(writer, asyncssh.SSHWriter):
            writer.channel.abort()
        else:
            writer.close()


async def run_parts(parts: list[Coroutine[Any, Any, None]]) -> None:
    """Run every part at once; the first to fail stops the others and its error is raised.

    Returns once every part has ended, so nothing of the transfer runs on
    after a failure.
    """
    tasks = [asyncio.ensure_future(part) for part in parts]
    try:
        for finished in asyncio.as_completed(tasks):
            await finished
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
