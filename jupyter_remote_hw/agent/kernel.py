"""One kernel the agent runs: its process, connection, launch record, hold and activity."""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import Any

from . import activity
from .activity import ActivityTracker
from .holds import Hold, Owner
from .launch import LaunchSpec
from .processes import (
    pid_alive,
    process_start_time,
)


class Kernel:
    """One kernel process and what the agent knows about it.

    Args:
        kernel_id: The kernel's id (also the stem of its files).
        connection: Its connection dict.
        launch: How it was launched.
        tracker: Follows its execution state.
    """

    def __init__(
        self,
        kernel_id: str,
        connection: dict[str, Any],
        launch: LaunchSpec,
        tracker: ActivityTracker,
    ) -> None:
        self.kernel_id = kernel_id
        self.connection = connection
        self.launch = launch
        self.tracker = tracker
        self.process: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.start_time: int | None = None
        self.exit_code: int | None = None
        self.exited = False
        self.died_at: float | None = None
        self.retiring = False
        self.lock = asyncio.Lock()
        self.hold = Hold(launch.orphan_grace, Owner.from_dict(launch.owner), time.time())
        self.state_known = asyncio.Event()
        """Set once the execution state is known (at once, but for re-adopted kernels)."""

    def attach(self, process: subprocess.Popen[bytes]) -> None:
        """Make ``process`` (our child) this kernel's process."""
        self.process = process
        self.pid = process.pid
        self.start_time = process_start_time(process.pid)
        self.exit_code = None
        self.exited = False
        self.died_at = None

    def adopt(self, pid: int, start_time: int | None) -> None:
        """Make a running process that is not our child this kernel's process."""
        self.process = None
        self.pid = pid
        self.start_time = start_time
        self.exit_code = None
        self.exited = False
        self.died_at = None

    def poll(self) -> bool:
        """Check whether the process is alive, reaping it and recording its exit code.

        Returns:
            True while the kernel process runs.
        """
        if self.exited:
            return False
        if self.process is not None:
            code = self.process.poll()
            if code is None:
                return True
            self.exit_code = code
        elif pid_alive(self.pid, self.start_time):
            return True
        self.exited = True
        self.died_at = time.monotonic()
        self.tracker.reset(activity.DEAD)
        return False

    def status(self) -> dict[str, Any]:
        """The kernel_status result for this kernel."""
        alive = self.poll()
        return {
            "kernel_id": self.kernel_id,
            "pid": self.pid,
            "alive": alive,
            "exit_code": self.exit_code,
            "execution_state": self.tracker.execution_state if alive else activity.DEAD,
            "last_activity": self.tracker.last_activity,
            "connection": dict(self.connection),
            "cwd": self.launch.cwd,
            "orphan_grace": self.hold.grace,
            "held": self.hold.held(),
            "orphan_in": self.hold.orphan_in(time.time()) if alive else None,
        }

    def start_result(self) -> dict[str, Any]:
        """The start_kernel / restart_kernel result for this kernel."""
        return {
            "kernel_id": self.kernel_id,
            "pid": self.pid,
            "connection": dict(self.connection),
            "cwd": self.launch.cwd,
        }

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit.

        Returns:
            True when it has exited.
        """
        deadline = time.monotonic() + timeout
        while self.poll():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True
