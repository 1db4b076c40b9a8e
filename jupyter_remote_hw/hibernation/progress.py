"""Progress of a save or a restore: one callback, called with a step's name and the
bytes done and in all within that step (both 0 for a step that moves no bytes).

Steps of a save: ``listing variables``, ``asking the working directory``,
``reading variables`` (bytes from the kernel), ``writing`` (bytes to disk),
``saved``. Steps of a restore: ``reading saved state`` (bytes from disk, each
part checked), ``changing directory``, ``importing modules``, ``sending
variables`` (bytes to the kernel), ``restored``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: Called with (step, bytes done, bytes in all) as a save or a restore goes.
Progress = Callable[[str, int, int], None]


class Steps:
    """Reports steps to a caller's :data:`Progress` and remembers the current one,
    so that an error can name it."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.current = "starting"

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
        just moved, that reports the running count on the event loop."""
        self.step(name, 0, total)
        loop = asyncio.get_running_loop()
        done = 0

        def moved(count: int) -> None:
            nonlocal done
            done += count
            if self.progress is not None:
                loop.call_soon_threadsafe(self.progress, name, done, total)

        return moved
