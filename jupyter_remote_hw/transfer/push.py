"""Pushing variables to a kernel: announce the transfer, send its bytes over a bulk
stream or as chunk messages, commit; the base of :class:`.client.TransferClient`
(``client.py`` says how transfers go)."""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .kernel_link import KernelLink
from .kernel_side import protocol
from .kernel_side.bulk import part_ranges, part_views
from .kernel_side.errors import TransferError
from .kernel_side.pickling import Pickled, segment_sizes, to_segments
from .queries import KernelQueries, _check
from .streams import (
    STREAM_ERRORS,
    Feed,
    NoStream,
    Parts,
    StreamOpener,
    StreamWriter,
    close_parts,
    open_parts,
    run_parts,
)

if TYPE_CHECKING:
    from .kernel_side.devices import Placement


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


async def _local_chunks(
    segments: list[Any], sizes: list[int], chunk_size: int
) -> AsyncIterator[tuple[int, int, Any]]:
    for segment, offset, size in _chunks(sizes, chunk_size):
        yield segment, offset, segments[segment][offset : offset + size]


#: The feeds of a bulk stream's parts, given each part's ``(start, end)``.
PartFeeds = Callable[[list[tuple[int, int]]], list[Feed]]


def _write_views(views: Iterable[memoryview]) -> Feed:
    """A feed that writes local bytes (views of the variables' memory)."""

    async def feed(writer: StreamWriter, moved: Callable[[int], None]) -> None:
        for view in views:
            for start in range(0, view.nbytes, STREAM_PIECE):
                piece = view[start : start + STREAM_PIECE]
                writer.write(piece)
                await writer.drain()
                moved(piece.nbytes)

    return feed


def _segment_feeds(segments: list[Any]) -> PartFeeds:
    """Feeds that write each part's range of local segments."""
    return lambda ranges: [_write_views(part_views(segments, start, end)) for start, end in ranges]


class PushClient(KernelQueries):
    """Pushes to one kernel that answers transfer requests: the base of
    :class:`.client.TransferClient`, which pulls and copies too.

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

    def __init__(
        self,
        link: KernelLink,
        where: str,
        chunk_size: int = protocol.CHUNK_SIZE,
        window: int = protocol.WINDOW,
        opener: StreamOpener | None = None,
        channels: int = protocol.CHANNELS,
    ) -> None:
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
            self.link.log.debug("transfer with %s: bulk stream in %d parts", self.where, len(parts))
        return parts

    def _fall_back(self, reason: NoStream) -> None:
        self.link.log.info(
            "transfer with %s: no bulk stream (%s); sending chunk messages", self.where, reason
        )

    # ------------------------------------------------------------------ push

    async def push(
        self, pickled: list[Pickled], device: Placement = None, progress: Progress | None = None
    ) -> list[dict[str, Any]]:
        """Send serialized variables and have the kernel assign them all, or none.

        ``device``: where their tensors and modules go there: one device for all,
        or one per variable name (see the kernel's ``commit``).

        Returns:
            ``{"name", "type"}`` of each assigned variable (with a per-name
            ``device``: also where it went, and the ``reason`` when not there).

        Raises:
            TransferError: The kernel refused or failed; nothing was assigned there.
        """
        manifest, segments = to_segments(pickled)
        sizes = segment_sizes(manifest)
        if sum(sizes) <= protocol.INLINE_LIMIT:
            content, _ = await self._request(
                {
                    "op": "receive",
                    "id": uuid.uuid4().hex,
                    "variables": manifest,
                    "device": device,
                    "commit": True,
                    **await self._rebuilding(),
                },
                segments,
                f"sending to {self.where}",
            )
            if progress:
                progress(sum(sizes), sum(sizes))
            return list(content["assigned"])
        if self.opener is not None:
            try:
                return await self._push_streamed(
                    manifest, _segment_feeds(segments), device, progress, self.channels
                )
            except NoStream as reason:
                self._fall_back(reason)
        return await self._push(
            manifest, _local_chunks(segments, sizes, self.chunk_size), device, progress
        )

    async def _push_streamed(
        self,
        manifest: list[dict[str, Any]],
        feeds: PartFeeds,
        device: Placement,
        progress: Progress | None,
        parts: int,
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
                    raise TransferError(
                        f"{action}: {self.where} received {received} of "
                        f"{size} bytes{where}. Nothing was assigned."
                    )

            try:
                await run_parts([part(index, feed) for index, feed in enumerate(feeds(ranges))])
            except STREAM_ERRORS as exc:
                raise TransferError(
                    f"{action}: the bulk stream broke after {done} of {total} "
                    f"bytes ({type(exc).__name__}: {exc}). Nothing was "
                    "assigned; run it again once the link is back."
                ) from None
            finally:
                close_parts(streams)

        return await self._announced(manifest, device, parts, deliver)

    async def _push(
        self,
        manifest: list[dict[str, Any]],
        chunks: AsyncIterator[tuple[int, int, Any]],
        device: Placement,
        progress: Progress | None,
    ) -> list[dict[str, Any]]:
        """Announce the manifest, send ``chunks`` as chunk messages, commit."""
        total = sum(segment_sizes(manifest))

        async def deliver(transfer_id: str, content: dict[str, Any]) -> None:
            await self._stream(transfer_id, chunks, total, progress)

        return await self._announced(manifest, device, 0, deliver)

    async def _announced(
        self,
        manifest: list[dict[str, Any]],
        device: Placement,
        parts: int,
        deliver: Callable[[str, dict[str, Any]], Awaitable[None]],
    ) -> list[dict[str, Any]]:
        """Announce an incoming transfer, ``deliver`` its bytes, commit; abort on any failure.

        ``parts``: the parts of a bulk stream to ask for; 0 for chunk messages.

        Returns:
            ``{"name", "type"}`` of each assigned variable.
        """
        transfer_id = uuid.uuid4().hex
        action = f"sending to {self.where}"
        rebuilding = await self._rebuilding()
        content, _ = await self._request(
            {
                "op": "receive",
                "id": transfer_id,
                "variables": manifest,
                "device": device,
                "stream": parts > 0,
                "parts": parts,
            },
            action=action,
        )
        try:
            await deliver(transfer_id, content)
            content, _ = await self._request(
                {"op": "commit", "id": transfer_id, "device": device, **rebuilding}, action=action
            )
        except BaseException:
            await self._abort(transfer_id)
            raise
        return list(content["assigned"])

    async def _stream(
        self,
        transfer_id: str,
        chunks: AsyncIterator[tuple[int, int, Any]],
        total: int,
        progress: Progress | None,
    ) -> None:
        done = 0
        in_flight: deque[tuple[asyncio.Future[dict[str, Any]], int]] = deque()
        async for segment, offset, data in chunks:
            size = memoryview(data).nbytes
            future = self.link.send(
                protocol.REQUEST,
                {"op": "chunk", "id": transfer_id, "segment": segment, "offset": offset},
                [data],
            )
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
