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
from collections.abc import AsyncIterator, Callable
from typing import Any

from .kernel_side import protocol
from .kernel_side.buffers import empty_segment
from .kernel_side.bulk import part_ranges, part_views
from .kernel_side.errors import TransferError
from .kernel_side.pickling import Pickled, from_segments, segment_sizes
from .push import STREAM_PIECE, Progress, PushClient, _chunks, _named
from .queries import _check
from .streams import (
    STREAM_ERRORS,
    Feed,
    NoStream,
    StreamOpener,
    StreamReader,
    StreamWriter,
    close_parts,
    has_stream,
    open_local_stream,
    run_parts,
)


def _pipe(reader: StreamReader, total: int) -> Feed:
    """A feed that passes on ``total`` bytes read from another kernel's bulk stream."""

    async def feed(writer: StreamWriter, moved: Callable[[int], None]) -> None:
        left = total
        while left:
            data = await reader.read(min(STREAM_PIECE, left))
            if not data:
                raise TransferError(
                    f"the sending kernel's stream ended {left} bytes early. Nothing was assigned."
                )
            writer.write(data)
            await writer.drain()
            left -= len(data)
            moved(len(data))

    return feed


class TransferClient(PushClient):
    """Transfers to and from one kernel that answers transfer requests (and the other
    requests it answers: see :class:`.queries.KernelQueries`): pushes (see
    :class:`.push.PushClient`, whose arguments it takes), pulls and copies.
    """

    # ------------------------------------------------------------------ pull

    def _read(
        self, transfer_id: str, segment: int, offset: int, size: int
    ) -> asyncio.Future[dict[str, Any]]:
        return self.link.send(
            protocol.REQUEST,
            {"op": "read", "id": transfer_id, "segment": segment, "offset": offset, "size": size},
        )

    async def _announce(
        self, names: list[str], inline: int, parts: int
    ) -> tuple[str, dict[str, Any], list[Any]]:
        """Ask the kernel to send ``names``; ``parts``: of a bulk stream, or 0 for none."""
        transfer_id = uuid.uuid4().hex
        content, buffers = await self._request(
            {
                "op": "send",
                "id": transfer_id,
                "names": names,
                "inline": inline,
                "stream": parts > 0 and self.opener is not None,
                "parts": parts,
            },
            action=f"reading from {self.where}",
        )
        return transfer_id, content, buffers

    async def pull(self, names: list[str], progress: Progress | None = None) -> list[Pickled]:
        """Fetch the named variables, serialized (rebuild them with ``load_variables``).

        Raises:
            TransferError: A name is missing or a variable cannot be serialized
                there (the error names it), or the transfer failed.
        """
        transfer_id, content, buffers = await self._announce(
            names, protocol.INLINE_LIMIT, self.channels
        )
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

    async def _fetch_streamed(
        self, content: dict[str, Any], sizes: list[int], progress: Progress | None, names: list[str]
    ) -> list[Any]:
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
                        raise TransferError(
                            f"{action}: the bulk stream ended after {done} of "
                            f"{total} bytes. Nothing was assigned."
                        )
                    view[position : position + len(data)] = data
                    position += len(data)
                    done += len(data)
                    if progress:
                        progress(done, total)

        try:
            await run_parts(
                [
                    part(reader, start, end)
                    for (reader, _), (start, end) in zip(streams, ranges, strict=True)
                ]
            )
            return segments
        except STREAM_ERRORS as exc:
            raise TransferError(
                f"{action}: the bulk stream broke after {done} of {total} bytes "
                f"({type(exc).__name__}: {exc}). Nothing was assigned; run it "
                "again once the link is back."
            ) from None
        finally:
            close_parts(streams)

    async def _read_chunks(
        self, transfer_id: str, sizes: list[int], chunk_size: int, window: int
    ) -> AsyncIterator[tuple[int, int, Any]]:
        """Every chunk of an outgoing transfer, in order, ``window`` reads ahead."""
        chunks = list(_chunks(sizes, chunk_size))
        pending: deque[tuple[asyncio.Future[dict[str, Any]], int, int]] = deque()
        position = 0
        try:
            while position < len(chunks) or pending:
                while position < len(chunks) and len(pending) < window:
                    segment, offset, size = chunks[position]
                    pending.append(
                        (self._read(transfer_id, segment, offset, size), segment, offset)
                    )
                    position += 1
                future, segment, offset = pending.popleft()
                reply = await future
                _check(reply, f"reading from {self.where}")
                yield segment, offset, reply["buffers"][0]
                del reply
        finally:
            for future, _, _ in pending:
                future.cancel()

    async def _fetch(
        self, transfer_id: str, sizes: list[int], progress: Progress | None
    ) -> list[Any]:
        segments = [empty_segment(size) for size in sizes]
        total = sum(sizes)
        done = 0
        async for segment, offset, data in self._read_chunks(
            transfer_id, sizes, self.chunk_size, self.window
        ):
            view = memoryview(data).cast("B")
            segments[segment][offset : offset + view.nbytes] = view
            done += view.nbytes
            if progress:
                progress(done, total)
        return segments

    # ------------------------------------------------------------------ copy

    async def copy_to(
        self,
        destination: TransferClient,
        names: list[str],
        device: str | None = None,
        progress: Progress | None = None,
    ) -> list[dict[str, Any]]:
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
                            raise NoStream(
                                f"the kernels split the stream differently "
                                f"({len(sources)} and {len(ranges)} parts)"
                            )
                        return [
                            _pipe(reader, end - start)
                            for (reader, _), (start, end) in zip(sources, ranges)
                        ]

                    try:
                        return await destination._push_streamed(
                            manifest, pipes, device, progress, len(sources)
                        )
                    except NoStream as reason:
                        destination._fall_back(reason)
                        # This kernel's stream was opened: start over without it.
                        return await self.copy_to(
                            destination.without_streams(), names, device, progress
                        )
                    finally:
                        close_parts(sources)
            chunks = self._read_chunks(
                transfer_id, sizes, destination.chunk_size, destination.window
            )
            return await destination._push(manifest, chunks, device, progress)
        finally:
            await self._abort(transfer_id)

    def without_streams(self) -> TransferClient:
        """The same kernel, with large transfers sent as chunk messages."""
        client = TransferClient(
            self.link, self.where, self.chunk_size, self.window, channels=self.channels
        )
        client.restricted = self.restricted
        return client


__all__ = ["Progress", "StreamOpener", "TransferClient", "open_local_stream"]
