"""The client side of transfers: push to, pull from and copy between kernels.

Control requests (announce, commit, abort) go over the kernel's shell channel.
Bytes of a large transfer go over a bulk stream (``bulk.py``) when the client
can reach the kernel's host (``opener``: an SSH channel to the host's
127.0.0.1, or a local connection), split over up to ``channels`` streams at
once when it is large; otherwise they go as chunk messages over the shell
channel, pipelined so that up to ``window`` chunks are in flight.
The receiving kernel assigns nothing until every byte has arrived and every
variable has been rebuilt; any failure or interruption aborts the transfer
there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Any

from . import protocol
from .buffers import empty_segment
from .bulk import part_ranges, part_views
from .errors import TransferError
from .kernel_link import KernelLink
from .pickling import Pickled, from_segments, segment_sizes, to_segments
from .queries import KernelQueries, _check
from .streams import (
    STREAM_ERRORS,
    Feed,
    NoStream,
    Parts,
    StreamOpener,
    StreamReader,
    StreamWriter,
    close_parts,
    has_stream,
    open_local_stream,
    open_parts,
    run_parts,
)


def _named(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")

#: Called with (bytes done, bytes in all) as a transfer goes.
Progress = Callable[[int, int], None]

#: Bytes handed to a bulk stream's writer, or taken from its reader, at a time.
STREAM_PIECE = 1024 * 1024


def _chunks(sizes: list[int], chunk_size: int) -> Iterator[tuple[int, int, int]]:
    """(segment, offset, size) of every chunk, in order."""
    for index, size in enumerate(sizes):
        for offset in range(0, size, chunk_size):
            yield index, offset, min(chunk_size, size - offset)


async def _local_chunks(segments: list[Any], sizes: list[int],
                        chunk_size: int) -> AsyncIterator[tuple[int, int, Any]]:
    for segment, offset, size in _chunks(sizes, chunk_size):
        yield segment, offset, segments[segment][offset:offset + size]


#: The feeds of a bulk stream's parts, given each part's ``(start, end)``.
PartFeeds = Callable[[list[tuple[int, int]]], list[Feed]]


def _write_views(views: Iterable[memoryview]) -> Feed:
    """A feed that writes local bytes (views of the variables' memory)."""

    async def feed(writer: StreamWriter, moved: Callable[[int], None]) -> None:
        for view in views:
            for start in range(0, view.nbytes, STREAM_PIECE):
                piece = view[start:start + STREAM_PIECE]
                writer.write(piece)
                await writer.drain()
                moved(piece.nbytes)

    return feed


def _segment_feeds(segments: list[Any]) -> PartFeeds:
    """Feeds that write each part's range of local segments."""
    return lambda ranges: [_write_views(part_views(segments, start, end))
                           for start, end in ranges]


def _pipe(reader: StreamReader, total: int) -> Feed:
    """A feed that passes on ``total`` bytes read from another kernel's bulk stream."""

    async def feed(writer: StreamWriter, moved: Callable[[int], None]) -> None:
        left = total
        while left:
            data = await reader.read(min(STREAM_PIECE, left))
            if not data:
                raise TransferError(f"the sending kernel's stream ended {left} bytes early. "
                                    "Nothing was assigned.")
            writer.write(data)
            await writer.drain()
            left -= len(data)
            moved(len(data))

    return feed


class TransferClient(KernelQueries):
    """Transfers to and from one kernel that answers transfer requests (and the other
    requests it answers: see :class:`.queries.KernelQueries`).

    Args:
        link: The kernel's link.
        where: How to name the kernel in messages ("gpu-box", "this kernel").
        chunk_size: Bytes per chunk message.
        window: Chunk messages in flight at once.
        opener: Opens a byte stream to a port on the kernel's host, for bulk
            streams; None sends large transfers as chunk messages.
        channels: Streams a large bulk stream is split over at most (the
            kernel decides how many, by size: ``bulk.part_count``).
    """

    def __init__(self, link: KernelLink, where: str, chunk_size: int = protocol.CHUNK_SIZE,
                 window: int = protocol.WINDOW, opener: StreamOpener | None = None,
                 channels: int = protocol.CHANNELS) -> None:
        super().__init__(link, where)
        self.chunk_size = chunk_size
        self.window = window
        self.opener = opener
        self.channels = channels


    # ------------------------------------------------------------------ streams

    async def _open(self, content: dict[str, Any]) -> Parts:
        """Connect to every part of the bulk stream a reply announced (see ``open_parts``)."""
        parts = await open_parts(self.opener, content)
        if len(parts) > 1:
            self.link.log.debug("transfer with %s: bulk stream in %d parts", self.where,
                                len(parts))
        return parts

    def _fall_back(self, reason: NoStream) -> None:
        self.link.log.info("transfer with %s: no bulk stream (%s); sending chunk messages",
                           self.where, reason)

    # ------------------------------------------------------------------ push

    async def push(self, pickled: list[Pickled], device: str | None = None,
                   progress: Progress | None = None) -> list[dict[str, Any]]:
        """Send serialized variables and have the kernel assign them all, or none.

        Returns:
            ``{"name", "type"}`` of each assigned variable.

        Raises:
            TransferError: The kernel refused or failed; nothing was assigned there.
        """
        manifest, segments = to_segments(pickled)
        sizes = segment_sizes(manifest)
        if sum(sizes) <= protocol.INLINE_LIMIT:
            content, _ = await self._request(
                {"op": "receive", "id": uuid.uuid4().hex, "variables": manifest,
                 "device": device, "commit": True},
                segments, f"sending to {self.where}")
            if progress:
                progress(sum(sizes), sum(sizes))
            return list(content["assigned"])
        if self.opener is not None:
            try:
                return await self._push_streamed(manifest, _segment_feeds(segments), device,
                                                  progress, self.channels)
            except NoStream as reason:
                self._fall_back(reason)
        return await self._push(manifest, _local_chunks(segments, sizes, self.chunk_size),
                                device, progress)

    async def _push_streamed(self, manifest: list[dict[str, Any]], feeds: PartFeeds,
                             device: str | None, progress: Progress | None, parts: int
                             ) -> list[dict[str, Any]]:
        """Announce the manifest, write every part to the kernel's bulk stream, commit.

        Args:
            feeds: Each part's feed, given the parts' ranges.
            parts: Parts asked for (the kernel answers how many it takes).

        Raises:
            NoStream: The stream could not be opened; nothing was sent (the
                announced transfer was aborted).
        """
        total = sum(segment_sizes(manifest))
        action = f"sending {_named([e['name'] for e in manifest])} to {self.where}"

        async def deliver(transfer_id: str, content: dict[str, Any]) -> None:
            streams = await self._open(content)
            ranges = part_ranges(total, len(streams))
            done = 0

            def moved(count: int) -> None:
                nonlocal done
                done += count
                if progress:
                    progress(done, total)

            async def part(index: int, feed: Feed) -> None:
                reader, writer = streams[index]
                await feed(writer, moved)
                writer.write_eof()
                line = await reader.readline()
                received = int(line) if line.strip().isdigit() else 0
                size = ranges[index][1] - ranges[index][0]
                if received != size:
                    where = f" in part {index + 1} of {len(streams)}" if len(streams) > 1 else ""
                    raise TransferError(f"{action}: {self.where} received {received} of "
                                        f"{size} bytes{where}. Nothing was assigned.")

            try:
                await run_parts([part(index, feed)
                                 for index, feed in enumerate(feeds(ranges))])
            except STREAM_ERRORS as exc:
                raise TransferError(f"{action}: the bulk stream broke after {done} of {total} "
                                    f"bytes ({type(exc).__name__}: {exc}). Nothing was "
                                    "assigned; run it again once the link is back.") from None
            finally:
                close_parts(streams)

        return await self._announced(manifest, device, parts, deliver)

    async def _push(self, manifest: list[dict[str, Any]],
                    chunks: AsyncIterator[tuple[int, int, Any]], device: str | None,
                    progress: Progress | None) -> list[dict[str, Any]]:
        """Announce the manifest, send ``chunks`` as chunk messages, commit."""
        total = sum(segment_sizes(manifest))

        async def deliver(transfer_id: str, content: dict[str, Any]) -> None:
            await self._stream(transfer_id, chunks, total, progress)

        return await self._announced(manifest, device, 0, deliver)

    async def _announced(self, manifest: list[dict[str, Any]], device: str | None,
                         parts: int,
                         deliver: Callable[[str, dict[str, Any]], Awaitable[None]]
                         ) -> list[dict[str, Any]]:
        """Announce an incoming transfer, ``deliver`` its bytes, commit; abort on any failure.

        ``parts``: the parts of a bulk stream to ask for; 0 for chunk messages.

        Returns:
            ``{"name", "type"}`` of each assigned variable.
        """
        transfer_id = uuid.uuid4().hex
        action = f"sending to {self.where}"
        content, _ = await self._request({"op": "receive", "id": transfer_id,
                                          "variables": manifest, "device": device,
                                          "stream": parts > 0, "parts": parts},
                                         action=action)
        try:
            await deliver(transfer_id, content)
            content, _ = await self._request({"op": "commit", "id": transfer_id,
                                              "device": device}, action=action)
        except BaseException:
            await self._abort(transfer_id)
            raise
        return list(content["assigned"])

    async def _stream(self, transfer_id: str, chunks: AsyncIterator[tuple[int, int, Any]],
                      total: int, progress: Progress | None) -> None:
        done = 0
        in_flight: deque[tuple[asyncio.Future[dict[str, Any]], int]] = deque()
        async for segment, offset, data in chunks:
            size = memoryview(data).nbytes
            future = self.link.send(protocol.REQUEST, {"op": "chunk", "id": transfer_id,
                                                       "segment": segment, "offset": offset},
                                    [data])
            in_flight.append((future, size))
            del data
            while len(in_flight) >= self.window or (in_flight and in_flight[0][0].done()):
                done += await self._acked(in_flight.popleft())
                if progress:
                    progress(done, total)
        while in_flight:
            done += await self._acked(in_flight.popleft())
            if progress:
                progress(done, total)

    async def _acked(self, sent: tuple[asyncio.Future[dict[str, Any]], int]) -> int:
        _check(await sent[0], f"sending to {self.where}")
        return sent[1]

    async def _abort(self, transfer_id: str) -> None:
        try:
            async with asyncio.timeout(10):
                await self.link.request(protocol.REQUEST, {"op": "abort", "id": transfer_id})
        except Exception as exc:  # noqa: BLE001 (the kernel forgets it after STALE_AFTER anyway)
            self.link.log.debug("abort of transfer %s on %s: %s", transfer_id, self.where, exc)

    # ------------------------------------------------------------------ pull

    def _read(self, transfer_id: str, segment: int, offset: int,
              size: int) -> asyncio.Future[dict[str, Any]]:
        return self.link.send(protocol.REQUEST, {"op": "read", "id": transfer_id,
                                                 "segment": segment, "offset": offset,
                                                 "size": size})

    async def _announce(self, names: list[str], inline: int,
                        parts: int) -> tuple[str, dict[str, Any], list[Any]]:
        """Ask the kernel to send ``names``; ``parts``: of a bulk stream, or 0 for none."""
        transfer_id = uuid.uuid4().hex
        content, buffers = await self._request(
            {"op": "send", "id": transfer_id, "names": names, "inline": inline,
             "stream": parts > 0 and self.opener is not None, "parts": parts},
            action=f"reading from {self.where}",
        )
        return transfer_id, content, buffers

    async def pull(self, names: list[str], progress: Progress | None = None) -> list[Pickled]:
        """Fetch the named variables, serialized (rebuild them with ``load_variables``).

        Raises:
            TransferError: A name is missing or a variable cannot be serialized
                there (the error names it), or the transfer failed.
        """
        transfer_id, content, buffers = await self._announce(names, protocol.INLINE_LIMIT,
                                                             self.channels)
        manifest = content["variables"]
        sizes = segment_sizes(manifest)
        total = sum(sizes)
        if content.get("inline"):
            segments = [bytearray(memoryview(b).cast("B")) for b in buffers]
            if progress:
                progress(total, total)
            return from_segments(manifest, segments)
        try:
            try:
                segments = await self._fetch_streamed(content, sizes, progress, names)
            except NoStream as reason:
                if has_stream(content):
                    self._fall_back(reason)
                segments = await self._fetch(transfer_id, sizes, progress)
        finally:
            await self._abort(transfer_id)
        return from_segments(manifest, segments)

    async def _fetch_streamed(self, content: dict[str, Any], sizes: list[int],
                              progress: Progress | None, names: list[str]) -> list[Any]:
        """Read every part of the kernel's bulk stream into new segments, all at once."""
        streams = await self._open(content)
        segments = [empty_segment(size) for size in sizes]
        total = sum(sizes)
        ranges = part_ranges(total, len(streams))
        action = f"reading {_named(names)} from {self.where}"
        done = 0

        async def part(reader: StreamReader, start: int, end: int) -> None:
            nonlocal done
            for view in part_views(segments, start, end):
                position = 0
                while position < view.nbytes:
                    data = await reader.read(min(STREAM_PIECE, view.nbytes - position))
                    if not data:
                        raise TransferError(f"{action}: the bulk stream ended after {done} of "
                                            f"{total} bytes. Nothing was assigned.")
                    view[position:position + len(data)] = data
                    position += len(data)
                    done += len(data)
                    if progress:
                        progress(done, total)

        try:
            await run_parts([part(reader, start, end)
                             for (reader, _), (start, end) in zip(streams, ranges, strict=True)])
            return segments
        except STREAM_ERRORS as exc:
            raise TransferError(f"{action}: the bulk stream broke after {done} of {total} bytes "
                                f"({type(exc).__name__}: {exc}). Nothing was assigned; run it "
                                "again once the link is back.") from None
        finally:
            close_parts(streams)

    async def _read_chunks(self, transfer_id: str, sizes: list[int], chunk_size: int,
                           window: int) -> AsyncIterator[tuple[int, int, Any]]:
        """Every chunk of an outgoing transfer, in order, ``window`` reads ahead."""
        chunks = list(_chunks(sizes, chunk_size))
        pending: deque[tuple[asyncio.Future[dict[str, Any]], int, int]] = deque()
        position = 0
        try:
            while position < len(chunks) or pending:
                while position < len(chunks) and len(pending) < window:
                    segment, offset, size = chunks[position]
                    pending.append((self._read(transfer_id, segment, offset, size),
                                    segment, offset))
                    position += 1
                future, segment, offset = pending.popleft()
                reply = await future
                _check(reply, f"reading from {self.where}")
                yield segment, offset, reply["buffers"][0]
                del reply
        finally:
            for future, _, _ in pending:
                future.cancel()

    async def _fetch(self, transfer_id: str, sizes: list[int],
                     progress: Progress | None) -> list[Any]:
        segments = [empty_segment(size) for size in sizes]
        total = sum(sizes)
        done = 0
        async for segment, offset, data in self._read_chunks(transfer_id, sizes,
                                                             self.chunk_size, self.window):
            view = memoryview(data).cast("B")
            segments[segment][offset:offset + view.nbytes] = view
            done += view.nbytes
            if progress:
                progress(done, total)
        return segments

    # ------------------------------------------------------------------ copy

    async def copy_to(self, destination: TransferClient, names: list[str],
                      device: str | None = None,
                      progress: Progress | None = None) -> list[dict[str, Any]]:
        """Copy the named variables from this kernel to ``destination``.

        The bytes go from one kernel's bulk stream to the other's when both
        hosts can be reached that way, else chunk by chunk; nothing is held
        here beyond the bytes in flight.

        Returns:
            ``{"name", "type"}`` of each variable assigned in ``destination``.
        """
        streams = destination.opener is not None
        asked = min(self.channels, destination.channels) if streams else 0
        transfer_id, content, _ = await self._announce(names, 0, asked)
        manifest = content["variables"]
        sizes = segment_sizes(manifest)
        try:
            if streams:
                try:
                    sources = await self._open(content)
                except NoStream as reason:
                    if has_stream(content):
                        self._fall_back(reason)
                else:
                    def pipes(ranges: list[tuple[int, int]]) -> list[Feed]:
                        if len(ranges) != len(sources):
                            raise NoStream(f"the kernels split the stream differently "
                                           f"({len(sources)} and {len(ranges)} parts)")
                        return [_pipe(reader, end - start)
                                for (reader, _), (start, end) in zip(sources, ranges)]

                    try:
                        return await destination._push_streamed(manifest, pipes, device,
                                                                progress, len(sources))
                    except NoStream as reason:
                        destination._fall_back(reason)
                        # This kernel's stream was opened: start over without it.
                        return await self.copy_to(destination.without_streams(), names,
                                                  device, progress)
                    finally:
                        close_parts(sources)
            chunks = self._read_chunks(transfer_id, sizes, destination.chunk_size,
                                       destination.window)
            return await destination._push(manifest, chunks, device, progress)
        finally:
            await self._abort(transfer_id)

    def without_streams(self) -> TransferClient:
        """The same kernel, with large transfers sent as chunk messages."""
        return TransferClient(self.link, self.where, self.chunk_size, self.window,
                              channels=self.channels)


__all__ = ["Progress", "StreamOpener", "TransferClient", "open_local_stream"]
