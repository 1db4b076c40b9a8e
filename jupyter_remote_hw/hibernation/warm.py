"""Reading a hibernated kernel's files ahead, while the kernel that reads them starts.

A kernel that hibernated for hours finds its files evicted from the page cache, so
its restore would wait on the disk after the kernel is up. Asking the disk for them
when the wake begins overlaps that read with the kernel's start (seconds on a host,
more on a cluster or a cloud instance): the restore then reads from memory.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from .files import PIECE


def _read(paths: list[Path]) -> None:
    # Read, not posix_fadvise(WILLNEED): the kernel may cap that advice at its
    # read-ahead window (a few MiB of a GiB file).
    piece = bytearray(PIECE)  # one buffer, reused: nothing more is held in our memory
    for path in paths:
        with open(path, "rb", buffering=0) as file:
            while file.readinto(piece):
                pass


async def read_ahead(paths: list[Path]) -> None:
    """Read ``paths`` from this machine's disk into its page cache now, in a thread
    (one 8 MiB buffer: their bytes are not kept in our memory).

    Raises:
        OSError: A file cannot be read.
    """
    await asyncio.to_thread(_read, paths)


__all__ = ["read_ahead"]
