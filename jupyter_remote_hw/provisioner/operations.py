"""The operations on one kernel, one at a time: a hibernation (its save), a wake, a
hardware switch, a restart or a shutdown.

A hibernation, a wake or a switch asked for while another operation is under way is
refused with :class:`OperationConflictError` (an HTTP 409 that names the one under
way); a second wake joins the first. A restart or a shutdown goes ahead: it first ends
a save or a wake under way, whose work it makes pointless, or waits for a switch to
finish (a shutdown first asks the switch to give up: see :meth:`KernelOperations.end_switch`),
then runs alone. (Jupyter's restart route refuses a restart during a switch
before it reaches here: see :mod:`..server.ended_restart`.)

A restart or a shutdown reaches the provisioner as several calls of jupyter_client
(``shutdown_requested`` or ``kill``, ``cleanup``, ``launch_kernel``): it is under way
from the first of them until the last.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..errors import UserError

HIBERNATION = "a hibernation"
WAKE = "a wake"
SWITCH = "a hardware switch"
RESTART = "a restart"
SHUTDOWN = "a shutdown"

#: The operations a restart or a shutdown ends instead of waiting for them.
ENDED_BY_STOP = (HIBERNATION, WAKE)


class OperationConflictError(UserError):
    """Another operation on the kernel is under way (the message names it)."""


class KernelOperations:
    """Which operation runs on one kernel, and who waits for it.

    Args:
        named: The kernel as messages name it (a callable: the provisioner learns
            where it runs after it is made).
    """

    def __init__(self, named: Callable[[], str]) -> None:
        self._named = named
        self.running: str | None = None
        """The operation under way, or None."""
        self.ended_by: str | None = None
        """The restart or shutdown that ended the save or the wake under way, if one did."""
        self._task: asyncio.Future[Any] | None = None
        self._ended: asyncio.Event | None = None

    def refuse_if_busy(self, wanted: str) -> None:
        """Raise when an operation is under way (but a wake, when ``wanted`` is one: the
        caller joins it).

        Raises:
            OperationConflictError: What runs, and that ``wanted`` can start once it ends.
        """
        running = self.running
        if running is not None and not running == wanted == WAKE:
            raise OperationConflictError(
                f"{self._named()}: {running} is under way, so {wanted} cannot "
                "start now; try again once it has ended"
            )

    def begin(self, name: str, task: asyncio.Future[Any] | None = None) -> None:
        """Start operation ``name``, refusing when another runs.

        Args:
            name: The operation.
            task: What a restart or a shutdown cancels to end a save or a wake early
                (once it is done, they wait for the operation to end).

        Raises:
            OperationConflictError: Another operation is under way.
        """
        self.refuse_if_busy(name)
        self.running, self._task, self.ended_by = name, task, None
        self._ended = None

    def end(self, name: str) -> None:
        """Operation ``name`` has ended (nothing when another one runs)."""
        if self.running != name:
            return
        self.running, self._task = None, None
        if self._ended is not None:
            self._ended.set()
            self._ended = None

    async def stop(self, name: str) -> None:
        """Start a restart or a shutdown (``name``): end a save or a wake under way, wait
        for any other operation, then run. Nothing when one already runs (it is this
        one, reaching its next step)."""
        while self.running not in (None, RESTART, SHUTDOWN):
            task = self._task
            if self.running in ENDED_BY_STOP and task is not None and not task.done():
                self.ended_by = name
                task.cancel()
            await self._operation_ended()
        if self.running is None:
            self.running, self._task = name, None

    async def _operation_ended(self) -> None:
        """Wait until the operation under way ends."""
        if self._ended is None:
            self._ended = asyncio.Event()
        await self._ended.wait()

    def end_save(self) -> None:
        """The kernel died: end a save under way now, rather than when its wait for the
        kernel's answer times out (nothing when no save runs)."""
        task = self._task
        if self.running == HIBERNATION and task is not None and not task.done():
            task.cancel()

    def refuse_restart(self) -> None:
        """Raise when a restart cannot start now: a switch is under way (Jupyter would
        tell the kernel to stop under the switch's copy of its variables). A save or a
        wake under way is ended by the restart instead.

        Raises:
            OperationConflictError: The switch, and that the restart can start once it
                ends.
        """
        if self.running == SWITCH:
            self.refuse_if_busy(RESTART)

    async def end_switch(self, name: str) -> None:
        """A shutdown (``name``) of a kernel that switches hardware: ask the switch to
        give up (it leaves the notebook as it was and stops its new kernel) and wait
        until it has ended, before Jupyter tells the kernel to stop. Nothing when no
        switch runs."""
        if self.running != SWITCH:
            return
        self.ended_by = name
        while self.running == SWITCH:
            await self._operation_ended()

    def ended(self, doing: str) -> str | None:
        """``it was restarted while <doing>`` when a restart (or a shutdown) ended the
        operation, else None."""
        if self.ended_by is None:
            return None
        return f"it was {'restarted' if self.ended_by == RESTART else 'shut down'} while {doing}"

    def stopped(self) -> None:
        """A restart or a shutdown has ended (or failed)."""
        for name in (RESTART, SHUTDOWN):
            self.end(name)


__all__ = [
    "HIBERNATION",
    "RESTART",
    "SHUTDOWN",
    "SWITCH",
    "WAKE",
    "KernelOperations",
    "OperationConflictError",
]
