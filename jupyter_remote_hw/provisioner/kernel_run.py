"""Where a provisioner's kernel runs and how it is reached: :class:`KernelRun`, the one
holder of that state.

A kernel's run goes through a few states: nothing runs (not launched, or shut down);
its machine is reached; its process runs on that machine's host; its channels are
connected here. A hibernated kernel has no machine and no process, and its relay keeps
its ports. Each change is one method of :class:`KernelRun`, named for what happened
(:meth:`~KernelRun.reached`, :meth:`~KernelRun.connected`, :meth:`~KernelRun.stopped`,
:meth:`~KernelRun.released`...), so the launch, the hibernation and the shutdown
report what they did and none of them writes the state itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

from jupyter_client.connect import KernelConnectionInfo

from ..providers import Machine
from ..providers.base import PORT_NAMES
from ..providers.launch_steps import LaunchSteps

LAUNCH_FRESH = 1.0
"""Seconds after a launch in which the host's answer to it (the kernel runs) stands for
a liveness check: a client's first check, right after the start, costs no round trip."""


class KernelRun:
    """Where one kernel runs (its machine), its connection on its host, and the ports here
    that reach its channels. Read through its properties; changed only by its methods."""

    def __init__(self) -> None:
        self._machine: Machine | None = None
        self._host_connection: dict[str, Any] | None = None
        self._local_ports: dict[str, int] = {}
        self._connection_info: KernelConnectionInfo = cast(KernelConnectionInfo, {})
        self._launched_at: float | None = None
        self._reattached_state: str | None = None
        self._steps: LaunchSteps | None = None

    # ------------------------------------------------------------------ what it is

    @property
    def machine(self) -> Machine | None:
        """The machine the kernel runs on (None: not launched, or hibernated)."""
        return self._machine

    @property
    def host_connection(self) -> dict[str, Any] | None:
        """The kernel's connection info on its host (its transport, ports or socket paths
        there); None while no kernel process runs."""
        return self._host_connection

    @property
    def local_ports(self) -> dict[str, int]:
        """The ports here that reach the kernel's channels, by connection key (a copy)."""
        return dict(self._local_ports)

    @property
    def connection_info(self) -> KernelConnectionInfo:
        """What clients here connect to: the local ports and the key."""
        return self._connection_info

    @property
    def reattached_state(self) -> str | None:
        """The execution state (idle, busy) the host reported for a kernel taken over from
        an earlier server, as of the takeover; None for a kernel started here."""
        return self._reattached_state

    @property
    def steps(self) -> LaunchSteps | None:
        """The steps of the kernel's last launch (or wake), with their timings."""
        return self._steps

    def fresh(self) -> bool:
        """Whether the kernel started within :data:`LAUNCH_FRESH` seconds, so the host's
        answer to its launch still says it runs (after that, never again)."""
        if self._launched_at is None:
            return False
        if time.monotonic() - self._launched_at < LAUNCH_FRESH:
            return True
        self._launched_at = None
        return False

    # ------------------------------------------------------------------ what happened

    def launching(self, steps: LaunchSteps) -> None:
        """A launch (or a wake) begins, its progress told on ``steps``."""
        self._steps = steps

    def reached(self, machine: Machine) -> None:
        """The kernel's machine is reached (prepared when it had to be)."""
        self._machine = machine

    def started(self, remote: Mapping[str, Any]) -> None:
        """A kernel process runs on the host, with ``remote`` its connection there."""
        self._host_connection = dict(remote)

    def connected(
        self, remote: Mapping[str, Any], local: Mapping[str, Any]
    ) -> KernelConnectionInfo:
        """The kernel runs on its host (``remote``) and its channels are reachable here
        (``local``: the ports here); returns what clients connect to."""
        self._host_connection = dict(remote)
        self._local_ports = {name: int(local[name]) for name in PORT_NAMES}
        # jupyter_client compares keys as bytes (its TypedDict says str).
        self._connection_info = cast(
            KernelConnectionInfo, {**local, "key": str(remote["key"]).encode()}
        )
        self._launched_at = time.monotonic()
        return self._connection_info

    def found(self, state: str | None) -> None:
        """A kernel a previous server started was found on its host, in execution state
        ``state`` (as its host said)."""
        self._reattached_state = state if state in ("idle", "busy") else None

    def asleep(self, ports: Mapping[str, int], info: KernelConnectionInfo) -> None:
        """A kernel taken over while it hibernates: its relay answers on ``ports`` here,
        with ``info`` (its new key); it reads as idle."""
        self._local_ports = dict(ports)
        self._connection_info = info
        self._reattached_state = "idle"

    def recorded(
        self, ports: Mapping[str, Any] | None = None, info: KernelConnectionInfo | None = None
    ) -> None:
        """What a ledger row says of the kernel, before it is found or resumed: its ports
        here, its connection info (its key left out)."""
        if ports is not None:
            self._local_ports = {name: int(port) for name, port in ports.items()}
        if info is not None:
            self._connection_info = info

    def signalled(self) -> None:
        """The kernel was signalled or asked to stop: the launch's answer no longer says
        whether it runs."""
        self._launched_at = None

    def stopped(self) -> None:
        """No kernel process runs on the host any more (or is about to stop): a liveness
        check must not take it for dead and restart it."""
        self._host_connection = None
        self._launched_at = None

    def released(self) -> Machine | None:
        """The kernel lets its machine go (it hibernates); returns the machine it had."""
        machine, self._machine = self._machine, None
        return machine


__all__ = ["LAUNCH_FRESH", "KernelRun"]
