"""The client side of transfers: push to, pull from and copy between kernels.

Chunks are pipelined: up to ``window`` chunk messages are in flight, so the
link stays busy while the memory held for them stays at ``window`` chunks.
The receiving kernel assigns nothing until every byte has arrived and every
variable has been rebuilt; any failure or interruption aborts the transfer
there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..kernel_link import KernelLink
from . import protocol
from .errors import TransferError
from .pickling import Pickled, from_segments, segment_sizes, to_segments

#: Called with (bytes done, bytes in all) as a transfer goes.
Progress = Callable[[int, int], None]


def _chunks(sizes: list[int], chunk_size: int) -> Iterator[tuple[int, int, int]]:
    """(segment, offset, size) of every chunk, in order."""
    for index, size in enumerate(sizes):
        for offset in range(0, size, chunk_size):
            yield index, offset, min(chunk_size, size - offset)


async def _local_chunks(segments: list[Any], sizes: list[int],
                        chunk_size: int) -> AsyncIterator[tuple[int, int, Any]]:
    for segment, offset, size in _chunks(sizes, chunk_size):
        yield segment, offset, segments[segment][offset:offset + size]


def _check(reply: dict[str, Any], action: str) -> dict[str, Any]:
    content: dict[str, Any] = reply["content"]
    if content.get("status") != "ok":
        raise TransferError(f"{action}: {content.get('evalue', 'failed')}", content.get("name"))
    return content


class TransferClient:
    """Transfers to and from one kernel that answers transfer requests.

    Args:
        link: The kernel's link.
        where: How to name the kernel in messages ("gpu-box", "this kernel").
        chunk_size: Bytes per chunk message.
        window: Chunk messages in flight at once.
    """

    def __init__(self, link: KernelLink, where: str, chunk_size: int = protocol.CHUNK_SIZE,
                 window: int = protocol.WINDOW) -> None:
        self.link = link
        self.where = where
        self.chunk_size = chunk_size
        self.window = window

    async def _request(self, content: dict[str, Any], buffers: list[Any] | None = None,
                       action: str = "transfer") -> tuple[dict[str, Any], list[Any]]:
        reply = await self.link.request(protocol.REQUEST, content, buffers)
        return _check(reply, action), list(reply.get("buffers") or [])

    async def hello(self) -> dict[str, Any]:
        """The kernel's protocol version and Python.

        Raises:
            TransferError: The kernel does not answer transfer requests.
        """
        try:
            async with asyncio.timeout(10):
                content, _ = await self._request({"op": "hello"}, action="hello")
        except TimeoutError:
            raise TransferError(
                f"the kernel on {self.where} does not answer transfer requests; run "
                "%load_ext jupyter_remote_hw in it"
            ) from None
        return content

    async def variables(self) -> list[dict[str, Any]]:
        """The kernel's variables: name, type, nbytes."""
        content, _ = await self._request({"op": "list"}, action="list variables")
        return list(content["variables"])

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
        return await self._push(manifest, _local_chunks(segments, sizes, self.chunk_size),
                                device, progress)

    async def _push(self, manifest: list[dict[str, Any]],
                    chunks: AsyncIterator[tuple[int, int, Any]], device: str | None,
                    progress: Progress | None) -> list[dict[str, Any]]:
        """Announce the manifest, stream ``chunks`` into it, commit; abort on any failure."""
        transfer_id = uuid.uuid4().hex
        total = sum(segment_sizes(manifest))
        action = f"sending to {self.where}"
        await self._request({"op": "receive", "id": transfer_id, "variables": manifest,
                             "device": device}, action=action)
        try:
            await self._stream(transfer_id, chunks, total, progress)
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

    async def _announce(self, names: list[str], inline: int) -> tuple[str, dict[str, Any],
                                                                      list[Any]]:
        transfer_id = uuid.uuid4().hex
        content, buffers = await self._request(
            {"op": "send", "id": transfer_id, "names": names, "inline": inline},
            action=f"reading from {self.where}",
        )
        return transfer_id, content, buffers

    async def pull(self, names: list[str], progress: Progress | None = None) -> list[Pickled]:
        """Fetch the named variables, serialized (rebuild them with ``load_variables``).

        Raises:
            TransferError: A name is missing or a variable cannot be serialized
                there (the error names it), or the transfer failed.
        """
        transfer_id, content, buffers = await self._announce(names, protocol.INLINE_LIMIT)
        manifest = content["variables"]
        sizes = segment_sizes(manifest)
        total = sum(sizes)
        if content.get("inline"):
            segments = [bytearray(memoryview(b).cast("B")) for b in buffers]
            if progress:
                progress(total, total)
        else:
            try:
                segments = await self._fetch(transfer_id, sizes, progress)
            finally:
                await self._abort(transfer_id)
        return from_segments(manifest, segments)

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
                     progress: Progress | None) -> list[bytearray]:
        segments = [bytearray(size) for size in sizes]
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
        """Copy the named variables from this kernel to ``destination``, chunk by chunk.

        Nothing is held here beyond the chunks in flight.

        Returns:
            ``{"name", "type"}`` of each variable assigned in ``destination``.
        """
        transfer_id, content, _ = await self._announce(names, 0)
        manifest = content["variables"]
        chunks = self._read_chunks(transfer_id, segment_sizes(manifest),
                                   destination.chunk_size, destination.window)
        try:
            return await destination._push(manifest, chunks, device, progress)
        finally:
            await self._abort(transfer_id)


__all__ = ["Progress", "TransferClient"]
