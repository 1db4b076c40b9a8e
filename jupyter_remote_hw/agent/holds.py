"""Who holds a kernel, and when a kernel nobody holds is an orphan the agent shuts down.

A kernel is held while

- a client connection on which it was started, or which named it in a request
  (``kernel_status``, ``restart_kernel``, ...: a Jupyter server that reattaches
  asks for the status of its kernels), is open; or
- the process that started it (its owner) still runs, when that process is on
  this machine: same boot and same pid namespace, so its pid and start time can
  be checked.

A kernel started with an orphan grace that nobody holds for that long is shut
down by the agent: the process that started it is gone and no client took it
over. A cut link does not end a kernel early: the agent sees the connection
close only when its SSH server gives up on the link, and the grace starts then.
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from typing import Any

from .processes import pid_alive, process_start_time


@functools.cache
def machine_id() -> str | None:
    """This machine's boot and pid namespace, or None where they cannot be read.

    Two processes with the same value see the same pids.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}" if boot else None


def process_identity(pid: int | None = None) -> dict[str, Any]:
    """The owner description a client sends with ``start_kernel``.

    Args:
        pid: The process; this one by default.

    Returns:
        ``{"machine", "host", "pid", "start_time"}``.
    """
    pid = os.getpid() if pid is None else pid
    return {
        "machine": machine_id(),
        "host": socket.gethostname(),
        "pid": pid,
        "start_time": process_start_time(pid),
    }


@dataclass(frozen=True)
class Owner:
    """The process that started a kernel.

    Attributes:
        machine: Its :func:`machine_id`, or None when unknown.
        host: Its host name, for messages.
        pid: Its pid there.
        start_time: Its start time in clock ticks, to tell a reused pid.
    """

    machine: str | None
    host: str
    pid: int
    start_time: int | None

    @classmethod
    def from_dict(cls, data: Any) -> Owner | None:
        """Read an owner description; None when it is not one."""
        if not isinstance(data, dict):
            return None
        pid = data.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return None
        machine = data.get("machine")
        start_time = data.get("start_time")
        return cls(
            machine=machine if isinstance(machine, str) else None,
            host=str(data.get("host") or "?"),
            pid=pid,
            start_time=start_time if isinstance(start_time, int) else None,
        )

    def describe(self) -> str:
        """``pid N on HOST``, for messages."""
        return f"pid {self.pid} on {self.host}"

    def checkable(self) -> bool:
        """Whether this agent sees the owner's pids (it runs on the same machine)."""
        return self.machine is not None and self.machine == machine_id()

    def alive(self) -> bool:
        """Whether the owner runs, as far as this agent can see (False when it cannot)."""
        return self.checkable() and pid_alive(self.pid, self.start_time)


class Hold:
    """Who holds one kernel, and since when nobody has.

    Args:
        grace: Seconds without a holder before the kernel is an orphan; 0: never.
        owner: The process that started it, if known.
        now: The time to count from (the start, or a re-adoption).
    """

    def __init__(self, grace: float, owner: Owner | None, now: float) -> None:
        self.grace = grace
        self.owner = owner
        self.connections: set[int] = set()
        self.unheld_since: float | None = now

    def add(self, connection: int) -> None:
        """A client connection took hold (it started or named the kernel)."""
        self.connections.add(connection)
        self.unheld_since = None

    def drop(self, connection: int, now: float) -> None:
        """A client connection closed."""
        if connection in self.connections:
            self.connections.discard(connection)
            if not self.connections:
                self.unheld_since = now

    def held(self) -> bool:
        """Whether a connection or the live owner holds the kernel."""
        return bool(self.connections) or (self.owner is not None and self.owner.alive())

    def orphaned_for(self, now: float) -> float | None:
        """Seconds the kernel has had no holder; None while held or without a grace."""
        if self.grace <= 0:
            return None
        if self.held():
            self.unheld_since = None
            return None
        if self.unheld_since is None:
            self.unheld_since = now
        return now - self.unheld_since

    def orphan_in(self, now: float) -> float | None:
        """Seconds left before the kernel is shut down as an orphan; None if it is not."""
        unheld = self.orphaned_for(now)
        return None if unheld is None else max(0.0, self.grace - unheld)
