"""What the agent of each target's machine measured of its host: CPUs, memory and GPU
memory, to fill the hardware listing's columns that a target's label leaves blank (an
SSH host's label names its GPU; its CPUs and memory are known once it is reached)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..agent_client import AgentError, AgentUnavailableError
from ..errors import one_line
from ..providers.base import Machine
from ..transport import TransportError

#: Seconds the agent may take to answer (its GPU query's own limit is 5 s).
MEASURE_WAIT = 10.0

#: The listing's columns a measurement fills.
MEASURED_COLUMNS = ("vcpus", "memory_gib", "gpu_memory_gib")


def facts_of(reading: dict[str, Any]) -> dict[str, Any]:
    """The listing's columns from one agent ``metrics`` reading (only those it gives)."""
    facts: dict[str, Any] = {}
    count = (reading.get("cpu") or {}).get("count")
    if isinstance(count, int) and count > 0:
        facts["vcpus"] = count
    total = (reading.get("memory") or {}).get("total_gib")
    if isinstance(total, int | float) and total > 0:
        facts["memory_gib"] = round(float(total), 1)
    gpus = reading.get("gpus") or []
    gpu_total = gpus[0].get("memory_total_gib") if gpus and isinstance(gpus[0], dict) else None
    if isinstance(gpu_total, int | float) and gpu_total > 0:
        facts["gpu_memory_gib"] = round(float(gpu_total), 1)
    return facts


class MeasuredHosts:
    """The host facts of each target, measured once each time its machine is opened.

    Args:
        log: Where to log a measurement that failed (at debug: the columns stay blank).
    """

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self._facts: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def of(self, target_name: str) -> dict[str, Any]:
        """What was measured of a target's host (empty until its machine was reached)."""
        return dict(self._facts.get(target_name, {}))

    def measure_soon(self, machine: Machine) -> None:
        """Ask the machine's agent in the background: a launch never waits for it."""
        task = asyncio.ensure_future(self._measure(machine))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _measure(self, machine: Machine) -> None:
        name = machine.target.name
        try:
            client = await machine.agent()
            reading = await client.call("metrics", wait=MEASURE_WAIT)
        except (AgentError, AgentUnavailableError, TransportError, OSError) as exc:
            self.log.debug("machine %s: not measured: %s", name, one_line(str(exc)))
            return
        self._facts[name] = facts_of(reading)

    async def close(self) -> None:
        """Stop the measurements under way."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


__all__ = ["MEASURED_COLUMNS", "MEASURE_WAIT", "MeasuredHosts", "facts_of"]
