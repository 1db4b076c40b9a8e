"""Buffers that received segments are written into.

A large one is an anonymous memory map rather than a ``bytearray``: a
``bytearray`` is zeroed in full before the first byte can arrive, on the
thread that then receives. A map's pages are instead made ready by a thread
of their own (``MADV_POPULATE_WRITE``, on Linux 5.14 and later) while bytes
already arrive, so the receiving thread, which is what limits a transfer,
spends its time on the bytes and not on page faults. Huge pages are asked
for, so there are fewer pages to make ready. Elsewhere the pages are made
ready as they are first written.

Python 3.8 syntax and the standard library only (this module runs in kernels
on any host).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from typing import Any

#: Segments at least this large are received into anonymous memory maps.
MAPPED_FROM = 1024 * 1024

#: Linux's madvise advice that faults pages in, writable, without changing them.
_MADV_POPULATE_WRITE = 23


def empty_segment(size: int) -> Any:
    """A writable, zeroed buffer of ``size`` bytes to receive a segment into."""
    if size < MAPPED_FROM:
        return bytearray(size)
    buffer = mmap.mmap(-1, size)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            buffer.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    if sys.platform.startswith("linux"):
        threading.Thread(
            target=_populate, args=(buffer,), name="remote-hw-populate", daemon=True
        ).start()
    return buffer


def _populate(buffer: mmap.mmap) -> None:
    """Fault every page of ``buffer`` in; a kernel that cannot is left to fault them as written.

    The call runs without the GIL (ctypes releases it) and never changes the
    contents, so it is safe while bytes are being written into the buffer.
    """
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    view = (ctypes.c_char * len(buffer)).from_buffer(buffer)
    try:
        madvise(ctypes.addressof(view), len(buffer), _MADV_POPULATE_WRITE)
    finally:
        del view
