"""A machine whose kernels' clients reach them through relays: what every machine that
lets its kernels hibernate, wake and restart with their ports unchanged has in common.

A kernel's shell, control, stdin and IOPub ports here are its relay's
(:class:`...agent_client.relay.KernelRelayClient`, over a stream to the host's agent),
and its heartbeat port a forward to the kernel's heartbeat. Both keep their local
ports for the kernel's whole life here: across reconnects, restarts and wakes. How the
stream to the agent is opened and how the heartbeat is forwarded is each machine's.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any, Protocol

from ..agent.connection import channel_path
from ..agent_client.relay import KernelRelayClient
from .base import Machine
from .target import Target

#: Where a kernel's heartbeat is on its host: a port on its 127.0.0.1, or a socket path.
Where = int | str


class Forward(Protocol):
    """A forward of a local port to a channel on the host."""

    local_port: int

    @property
    def active(self) -> bool:
        """Whether it still accepts connections."""

    async def close(self) -> None:
        """Stop listening and end the connections it forwards."""

    def expect_drops(self) -> None:
        """Connections will fail for a while (the kernel restarts): not worth a warning."""


class RelayedMachine(Machine):
    """A machine that makes its kernels' ports reachable through relays (see the module).

    Args:
        relay_buffer: Bytes of a kernel's messages the host keeps for its relay.
    """

    def __init__(
        self, target: Target, log: logging.Logger, idle_exit: float, relay_buffer: int
    ) -> None:
        super().__init__(target, log, idle_exit)
        self.relay_buffer = relay_buffer
        self._relays: dict[str, KernelRelayClient] = {}
        self._heartbeat_forwards: dict[str, tuple[Where, Forward]] = {}

    @abstractmethod
    async def _open_agent_stream(self) -> tuple[Any, Any]:
        """A new stream to the host's agent (starting it again if it is gone)."""

    @abstractmethod
    async def _forward_heartbeat(self, where: Where, local_port: int) -> Forward:
        """Forward ``local_port`` here (any free port when 0 or taken) to ``where``."""

    async def expose(
        self, kernel_id: str, connection: dict[str, Any], local_ports: dict[str, int] | None = None
    ) -> dict[str, Any]:
        wanted = dict(local_ports or {})
        relay = self._relays.get(kernel_id)
        if relay is None:
            # Clients may send at once: the relay keeps what they send until its
            # stream to the host is open.
            relay = KernelRelayClient(
                kernel_id, connection, self._open_agent_stream, self.log, self.relay_buffer
            )
            await relay.start(wanted)
            self._relays[kernel_id] = relay
        elif relay.asleep:
            # A kernel woken from hibernation: its relay kept the ports meanwhile.
            await relay.wake(self._open_agent_stream)
        else:
            # A restarted kernel: the host may have refused the relay while the kernel
            # was gone there.
            await relay.attach_again()
        hb_path = channel_path(connection, "hb_port")
        where: Where = hb_path if hb_path is not None else int(connection["hb_port"])
        old_where, hb = self._heartbeat_forwards.get(kernel_id, (None, None))
        if hb is None or not hb.active or old_where != where:
            port = hb.local_port if hb is not None else wanted.get("hb_port", 0)
            if hb is not None:
                await hb.close()
            hb = await self._forward_heartbeat(where, port)
            self._heartbeat_forwards[kernel_id] = (where, hb)
        local = dict(connection)
        local["ip"] = "127.0.0.1"
        local["transport"] = "tcp"
        local.update(relay.ports)
        local["hb_port"] = hb.local_port
        return local

    async def unexpose(self, kernel_id: str) -> None:
        relay = await self.detach(kernel_id)
        if relay is not None:
            await relay.close()

    def relay(self, kernel_id: str) -> KernelRelayClient | None:
        return self._relays.get(kernel_id)

    async def detach(self, kernel_id: str) -> KernelRelayClient | None:
        relay = self._relays.pop(kernel_id, None)
        _, hb = self._heartbeat_forwards.pop(kernel_id, (None, None))
        if hb is not None:
            await hb.close()
        return relay

    def adopt(self, kernel_id: str, relay: KernelRelayClient) -> None:
        self._relays[kernel_id] = relay

    def expect_drops(self, kernel_id: str) -> None:
        _, hb = self._heartbeat_forwards.get(kernel_id, (None, None))
        if hb is not None:
            hb.expect_drops()

    @property
    def exposed(self) -> bool:
        """Whether any kernel's ports are reachable here."""
        return bool(self._relays or self._heartbeat_forwards)

    async def close(self) -> None:
        for kernel_id in set(self._relays) | set(self._heartbeat_forwards):
            await self.unexpose(kernel_id)
        await super().close()


__all__ = ["Forward", "RelayedMachine", "Where"]
