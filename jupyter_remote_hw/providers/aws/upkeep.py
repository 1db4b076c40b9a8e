"""Periodic upkeep of cloud machines, for a long-running process (the Jupyter server).

Every ``interval`` seconds: bring the ledger's states in line with EC2 (a
machine that stopped itself stops accruing cost at EC2's time of the change),
and terminate machines stopped for longer than ``terminate_after_stopped``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from .provider import AWSProvider


@dataclass
class UpkeepRound:
    """What one round did.

    Attributes:
        synced: Machines looked at.
        terminated: Instance ids terminated by the terminate timer.
        error: Why the round could not finish (no credentials, EC2 down), or ``""``.
    """

    synced: int = 0
    terminated: list[str] = field(default_factory=list)
    error: str = ""


class CloudUpkeep:
    """Runs :meth:`run_once` every ``interval`` seconds until stopped.

    Args:
        provider: The aws provider.
        interval: Seconds between rounds.
        log: Where to log.
    """

    def __init__(self, provider: AWSProvider, interval: float, log: logging.Logger) -> None:
        self.provider = provider
        self.interval = interval
        self.log = log
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> UpkeepRound:
        """One round; failures are reported in the result, never raised."""
        done = UpkeepRound()
        if not self.provider.ledger or not any(
            m.state not in ("terminated", "failed")
            for m in self.provider.ledger.machines(provider=self.provider.name)
        ):
            return done  # nothing of ours: no AWS call at all
        try:
            done.synced = len(await self.provider.sync_all())
            done.terminated = await self.provider.terminate_overdue()
        except Exception as exc:  # noqa: BLE001 (the next round tries again)
            done.error = f"{type(exc).__name__}: {exc}"
            self.log.warning("cloud upkeep: %s", done.error)
        if done.terminated:
            self.log.info(
                "cloud upkeep: terminated %s (stopped too long)", ", ".join(done.terminated)
            )
        return done

    def start(self) -> None:
        """Start the rounds in the background (on the running loop)."""
        if self._task is None and self.interval > 0:
            self._task = asyncio.create_task(self._forever())

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.run_once()

    async def stop(self) -> None:
        """Stop the rounds."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
