"""What every provider offers: its targets, and a prepared machine for a target."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from traitlets import Float, Int
from traitlets.config import LoggingConfigurable

from ..agent_client import AgentClient, Progress
from ..agent_client.bootstrap import DEFAULT_IDLE_EXIT
from .target import Target
from .usability import Unusable

if TYPE_CHECKING:
    from .launch_steps import LaunchSteps

PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
"""The five ports of a kernel connection."""


class Machine(ABC):
    """A host with a running agent, from which kernel ports can be reached here.

    Args:
        target: The target this machine serves.
        log: Where to log.
        idle_exit: Seconds the agent lingers with no kernel and no client.
    """

    def __init__(self, target: Target, log: logging.Logger, idle_exit: float) -> None:
        self.target = target
        self.log = log
        self.idle_exit = idle_exit
        self._client: AgentClient | None = None
        self._agent_lock = asyncio.Lock()

    @property
    @abstractmethod
    def link_up(self) -> bool:
        """Whether the host can be reached right now (False while reconnecting)."""

    async def agent(self, progress: Progress | None = None) -> AgentClient:
        """A live client of the host's agent, starting the agent (or reopening a
        broken stream to it) first when needed.

        Args:
            progress: Called with a line per preparation step.

        Raises:
            AgentUnavailableError: The agent cannot be reached or started.
        """
        async with self._agent_lock:
            if self._client is None or self._client.closed:
                self._client = await self._start_agent(progress)
            return self._client

    @abstractmethod
    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        """Make sure the host's agent runs; return a new client to it."""

    @abstractmethod
    async def expose(
        self, kernel_id: str, connection: dict[str, Any], local_ports: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """Make a kernel's ports reachable on 127.0.0.1 here.

        Calling it again for the same kernel keeps the ports it gave before.

        Args:
            kernel_id: The kernel.
            connection: The kernel's connection info on the host.
            local_ports: Local ports to use when free (from before a server
                restart); others are picked otherwise.

        Returns:
            The connection info to use here.
        """

    @abstractmethod
    async def unexpose(self, kernel_id: str) -> None:
        """Stop making a kernel's ports reachable here."""

    def end_reason(self) -> str | None:
        """Why the machine ended for good under its kernels (a scheduler's job ended by
        its time limit, say), or None while it lasts. Its kernels are then dead."""
        return None

    def expect_drops(self, kernel_id: str) -> None:
        """The kernel is stopping or restarting: its clients' reconnects will fail for a
        while, which is not worth a warning (only machines with forwards log them)."""

    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        """Open a byte stream to a port on the host's 127.0.0.1 (an ``int``) or to a UNIX
        socket there (a ``str``): a transfer's bulk stream.

        Returns:
            A reader and a writer (``asyncio`` or ``asyncssh`` streams).

        Raises:
            NotImplementedError: This kind of machine cannot; transfers then go
                as chunk messages over the kernel's shell channel.
        """
        raise NotImplementedError(f"{type(self).__name__} opens no byte streams")

    async def close(self) -> None:
        """Drop this side's resources (streams, forwards); the agent keeps running."""
        if self._client is not None:
            await self._client.close()


class Provider(LoggingConfigurable):
    """Where machines come from. Subclasses are configured through traitlets.

    (Not an ``ABC``: traitlets' metaclass rules that out; the two methods
    below raise until a subclass defines them.)
    """

    name: ClassVar[str]

    agent_idle_exit = Float(
        DEFAULT_IDLE_EXIT, config=True,
        help="Seconds a host agent with no kernel and no connected Jupyter server waits "
        "before it exits (0: it never does). While a server is connected, the agent stays, "
        "so that the next kernel starts without starting the agent again.",
    )

    relay_buffer_mib = Int(
        256, min=1, config=True,
        help="MiB of a kernel's messages its host keeps while the link to it is down, so "
        "that a cut of any length loses no output. A longer cut drops the oldest output "
        "beyond this, and the cell says how much.",
    )

    def targets(self) -> list[Target]:
        """The targets this provider offers now."""
        raise NotImplementedError

    def usability(self) -> Unusable | None:
        """None when this provider can start machines now, else why not and what to do."""
        return None

    def close(self) -> None:
        """Release what the provider holds open (HTTP connection pools); it can still be used."""

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """Reach ``target``'s host and make sure its agent runs.

        Runs the ``connect`` and ``prepare host`` steps on ``steps``.

        Raises:
            LaunchError: A step failed.
        """
        raise NotImplementedError
