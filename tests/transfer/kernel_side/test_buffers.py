"""Receive buffers: zeroed, writable, the right size; making their pages ready never changes
what was already written into them."""

from __future__ import annotations

import threading
import time

from jupyter_remote_hw.transfer.kernel_side.buffers import MAPPED_FROM, empty_segment


def test_small_segments_are_bytearrays_and_large_ones_zeroed_maps() -> None:
    small = empty_segment(10)
    assert isinstance(small, bytearray) and small == bytearray(10)
    large = empty_segment(3 * MAPPED_FROM + 5)
    assert len(large) == 3 * MAPPED_FROM + 5
    assert memoryview(large)[-5:].tobytes() == bytes(5)
    assert not memoryview(large).readonly


def test_bytes_written_while_pages_are_made_ready_stay() -> None:
    size = 256 * 1024 * 1024
    before = {t.ident for t in threading.enumerate()}
    buffer = empty_segment(size)
    view = memoryview(buffer)
    pattern = bytes(range(256)) * 4096  # 1 MiB
    for start in range(0, size, 8 * len(pattern)):  # every 8th MiB, at once
        view[start : start + len(pattern)] = pattern
    deadline = time.monotonic() + 30
    while any(
        t.name == "remote-hw-populate" and t.ident not in before for t in threading.enumerate()
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    for start in range(0, size, 8 * len(pattern)):
        assert view[start : start + len(pattern)] == pattern
    assert view[len(pattern) : 2 * len(pattern)] == bytes(len(pattern))
    view.release()
