"""What every provider offers: its targets, and a prepared machine for a target."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from traitlets import Float
from traitlets.config import LoggingConfigurable

from ..agent_client import AgentClient
from ..agent_client.bootstrap import DEFAULT_IDLE_EXIT
from .target import Target

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
"""The five ports of a kernel connection."""


class Machine(ABC):
    """A host with a running agent, from which kernel ports can be reached here.

    Args:
        target: The target this machine serves.
        log: Where to log.
    """

    def __init__(self, target: Target, log: logging.Logger) -> None:
        self.target = target
        self.log = log

    @property
    @abstractmethod
    def link_up(self) -> bool:
        """Whether the host can be reached right now (False while reconnecting)."""

    @abstractmethod
    async def agent(self) -> AgentClient:
        """A live client of the host's agent; a broken stream is reopened first.

        Raises:
            AgentUnavailableError: The agent cannot be reached or started.
        """

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

    @abstractmethod
    async def close(self) -> None:
        """Drop this side's resources (streams, forwards); the agent keeps running."""


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

    def targets(self) -> list[Target]:
        """The targets this provider offers now."""
        raise NotImplementedError

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """Reach ``target``'s host and make sure its agent runs.

        Runs the ``connect`` and ``prepare host`` steps on ``steps``.

        Raises:
            LaunchError: A step failed.
        """
        raise NotImplementedError
