"""Progress of a save or a restore: one callback, called with a step's name and the
bytes done and in all within that step (both 0 for a step that moves no bytes).

Steps of a save: ``listing variables``, ``asking the working directory``,
``reading variables`` (bytes from the kernel), ``writing`` (bytes to disk),
``saved``. Steps of a restore: ``reading saved state`` (bytes from disk, each
part checked), ``reaching the kernel``, ``changing directory``, ``importing modules``, ``sending
variables`` (bytes to the kernel), ``restored``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")

#: Called with (step, bytes done, bytes in all) as a save or a restore goes.
Progress = Callable[[str, int, int], None]


class Stopped(Exception):
    """A save or a restore was cancelled: its worker thread stopped at its next piece."""


class Steps:
    """Reports steps to a caller's :data:`Progress` and remembers the current one,
    so that an error can name it; runs blocking work in a thread that stops when
    the caller is cancelled."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.current = "starting"
        self.stopped = threading.Event()

    async def in_thread(self, func: Callable[..., _T], *args: Any) -> _T:
        """``func(*args)`` in a worker thread. When the caller is cancelled, the
        callbacks of :meth:`from_thread` raise :class:`Stopped` in that thread,
        and the cancellation goes on only once the thread has stopped (so nothing
        is written after it)."""
        work = asyncio.ensure_future(asyncio.to_thread(func, *args))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            self.stopped.set()
            await asyncio.wait([work])
            if not work.cancelled():
                work.exception()  # retrieved: it is Stopped, or whatever ended it
            raise

    def step(self, name: str, done: int = 0, total: int = 0) -> None:
        """Enter step ``name`` and report it."""
        self.current = name
        if self.progress is not None:
            self.progress(name, done, total)

    def bytes(self, name: str, total: int) -> Callable[[int, int], None]:
        """Enter step ``name`` and return a transfer's progress callback for it."""
        self.step(name, 0, total)

        def moved(done: int, _total: int) -> None:
            if self.progress is not None:
                self.progress(name, done, _total)

        return moved

    def from_thread(self, name: str, total: int) -> Callable[[int], None]:
        """Enter step ``name``; a callback for a worker thread, called with the bytes
        just moved, that reports the running count on the event loop (and raises
        :class:`Stopped` once the caller was cancelled)."""
        self.step(name, 0, total)
        loop = asyncio.get_running_loop()
        done = 0

        def moved(count: int) -> None:
            nonlocal done
            if self.stopped.is_set():
                raise Stopped(f"cancelled while {name}")
            done += count
            if self.progress is not None and count:
                loop.call_soon_threadsafe(self.progress, name, done, total)

        return moved
