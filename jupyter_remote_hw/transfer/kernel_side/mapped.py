"""Saved state mapped into a kernel's memory, and which of its buffers are still, byte for
byte, the file they were mapped from.

A kernel woken on the host that keeps its state reads each saved file through a
private (copy-on-write) memory map: its variables' large buffers (numpy arrays and
the like) are views of the file's pages, not copies of them. A page the kernel
then writes becomes a private copy; one it never writes stays a page of the file.
So when the kernel hibernates again, a buffer that still lies in a private
mapping of its base file, at the offset where the file holds it, and none of whose
pages became private copies, holds the file's bytes: its variable is linked from
the base without being read or hashed again, as :func:`.state_files.write_state`
does for a variable whose digest did not change. The kernel's own memory map
(``/proc/self/maps``) and page map (``/proc/self/pagemap``) say both; where they
cannot be read (not Linux), every buffer is hashed as before.

Python 3.8 syntax and the standard library only (this module runs in kernels on
any host).
"""

from __future__ import annotations

import array
import ctypes
import mmap
import os
from typing import Any

#: A page map entry's bits: present in memory, swapped out, a file's (or shared) page.
_PRESENT = 1 << 63
_SWAPPED = 1 << 62
_FILE = 1 << 61


def map_file(fd: int, nbytes: int) -> mmap.mmap:
    """``nbytes`` of the open file ``fd``, mapped private and writable (copy on write)."""
    return mmap.mmap(fd, nbytes, access=mmap.ACCESS_COPY)


def address_of(view: memoryview) -> int | None:
    """Where ``view``'s bytes start in this process's memory; None for a read-only buffer
    (never one of ours: those are writable)."""
    if view.readonly or not view.nbytes:
        return None
    anchor = ctypes.c_char.from_buffer(view)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


class FileMappings:
    """The files this process maps privately, read from ``/proc/self/maps`` when first
    asked (once per save); none where that cannot be read."""

    def __init__(self) -> None:
        # Each: start, end, private, file offset, device, inode.
        self._mappings: list[tuple[int, int, bool, int, tuple[int, int], int]] | None = None

    def _read(self) -> list[tuple[int, int, bool, int, tuple[int, int], int]]:
        if self._mappings is not None:
            return self._mappings
        self._mappings = []
        try:
            with open("/proc/self/maps", encoding="ascii", errors="replace") as source:
                lines = source.read().splitlines()
        except OSError:
            return self._mappings
        for line in lines:
            fields = line.split(None, 5)
            if len(fields) < 5 or fields[4] == "0":
                continue
            try:
                start, end = (int(part, 16) for part in fields[0].split("-"))
                major, minor = (int(part, 16) for part in fields[3].split(":"))
            except ValueError:
                continue
            private = fields[1][3:4] == "p"
            self._mappings.append(
                (start, end, private, int(fields[2], 16), (major, minor), int(fields[4]))
            )
        return self._mappings

    def holds(self, view: memoryview, path: str, offset: int) -> bool:
        """Whether ``view`` lies in a private mapping of the file at ``path`` where that
        file holds bytes ``offset`` on, and none of its pages was written since it was
        mapped (so its bytes are the file's)."""
        if not view.nbytes:
            return True
        address = address_of(view)
        mappings = self._read() if address is not None else []
        if address is None or not mappings:
            return False
        try:
            info = os.stat(path)
        except OSError:
            return False
        device = (os.major(info.st_dev), os.minor(info.st_dev))
        end = address + view.nbytes
        for start, stop, private, file_offset, dev, inode in mappings:
            if start <= address and end <= stop:
                return (
                    private
                    and (dev, inode) == (device, info.st_ino)
                    and file_offset + (address - start) == offset
                    and _untouched(address, view.nbytes)
                )
        return False


#: Page map entries read at a time (8 bytes each: 512 KiB for 256 MiB of memory).
_ENTRIES = 65536


def _untouched(address: int, nbytes: int) -> bool:
    """Whether no page of ``nbytes`` from ``address`` became a private copy (written) or
    went to swap (only private copies do) since it was mapped."""
    first = address // mmap.PAGESIZE
    count = (address + nbytes - 1) // mmap.PAGESIZE - first + 1
    try:
        with open("/proc/self/pagemap", "rb", buffering=0) as source:
            source.seek(first * 8)
            while count:
                step = min(count, _ENTRIES)
                entries = array.array("Q")
                entries.frombytes(source.read(step * 8))
                if len(entries) != step:
                    return False
                for entry in entries:
                    if entry & _SWAPPED or (entry & _PRESENT and not entry & _FILE):
                        return False
                count -= step
    except (OSError, ValueError):
        return False
    return True


def unchanged(path: str, segments: list[int], views: list[Any], mappings: FileMappings) -> bool:
    """Whether a variable's ``views`` (its pickle stream, then its buffers, of sizes
    ``segments``) are the bytes of the saved file at ``path``: the stream equal to the
    file's first bytes, and every buffer still the file's own pages there (as
    ``mappings``, read once for a save, say)."""
    if [memoryview(view).nbytes for view in views] != segments or len(segments) < 2:
        return False
    try:
        with open(path, "rb") as source:
            head = source.read(segments[0])
    except OSError:
        return False
    if head != memoryview(views[0]).cast("B").tobytes():
        return False
    offset = segments[0]
    for view, size in zip(views[1:], segments[1:]):
        if not mappings.holds(memoryview(view).cast("B"), path, offset):
            return False
        offset += size
    return True


__all__ = ["FileMappings", "address_of", "map_file", "unchanged"]
