"""An EC2 instance held by this side: its agent gets the lifetime policy and heartbeats."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from ...agent_client import AgentClient, AgentError, AgentUnavailableError, Progress
from ...ledger import Ledger
from ...transport import SSHConnection, TransportError, TransportManager
from ..ssh.provider import SSHMachine
from ..target import Target


class LifetimeSettings(Protocol):
    """What a held instance reads of the account that holds it (an ``AWSAccount``)."""

    ledger: Ledger | None
    heartbeat_interval: float
    relay_buffer_mib: int

    def lifetime_policy(self) -> dict[str, Any]:
        """The ``set_lifetime`` op's arguments for the instance's agent."""
        ...


class AWSMachine(SSHMachine):
    """An EC2 instance reached over SSH, whose agent enforces the lifetime policy.

    While this side holds it, a heartbeat goes to the agent (the dead-man
    switch) and to the ledger (``last_seen``, which ``reap`` reads).
    """

    def __init__(
        self,
        target: Target,
        transport: TransportManager,
        conn: SSHConnection,
        log: logging.Logger,
        idle_exit: float,
        provider: LifetimeSettings,
        machine_id: str,
    ) -> None:
        super().__init__(
            target, transport, conn, log, idle_exit, provider.relay_buffer_mib * 1024 * 1024
        )
        self.provider = provider
        self.machine_id = machine_id
        self.ended = ""
        """What became of the instance (``stopped``, ``terminated``), or ``""``."""
        self.ended_outside = ""
        """Why, when not by this server (EC2's reason), or ``""``."""
        self._beat: asyncio.Task[None] | None = None

    def end_reason(self) -> str | None:
        """Why the instance ended under its kernels, when something other than this
        server stopped or terminated it; None while it runs (or when we ended it)."""
        if not self.ended_outside:
            return None
        return f"the EC2 instance of {self.target.name} was {self.ended} ({self.ended_outside})"

    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        if self.ended:
            raise AgentUnavailableError(f"{self.target.name}: the instance was {self.ended}")
        client = await super()._start_agent(progress)
        try:
            await client.call("set_lifetime", **self.provider.lifetime_policy())
        except AgentError as exc:
            self.log.warning("machine %s: lifetime policy not set: %s", self.target.name, exc)
        if self._beat is None or self._beat.done():
            self._beat = asyncio.create_task(self._heartbeats())
        return client

    async def _heartbeats(self) -> None:
        ledger = self.provider.ledger
        while not self.ended:
            if ledger is not None:
                await asyncio.to_thread(ledger.touch_machine, self.machine_id)
            client = self._client
            if client is not None and not client.closed:
                try:
                    await client.call("heartbeat", wait=30)
                except (AgentError, TimeoutError, OSError, TransportError) as exc:
                    self.log.debug("machine %s: heartbeat not sent: %s", self.target.name, exc)
                except Exception as exc:  # noqa: BLE001 (the link is down: the next beat tries)
                    self.log.debug("machine %s: heartbeat failed: %s", self.target.name, exc)
            await asyncio.sleep(self.provider.heartbeat_interval)

    async def close(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
            self._beat = None
        await super().close()
