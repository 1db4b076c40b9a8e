"""What the provisioner's collaborators (its launch, its hibernation, the reading of its
kernel's end and mark) are given of it: :class:`KernelContext`.

The provisioner (:class:`.provisioner.RemoteHWProvisioner`) is the one that meets this;
its collaborators read the kernel's facts and settings through it, change where the
kernel runs only through its :class:`~.kernel_run.KernelRun`, and never assign into
it. Typing them against this protocol, not the provisioner class, keeps the package
free of import circles: the provisioner imports its collaborators, never the other way.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ..machines.manager import MachineManager
from ..providers import Target
from .kernel_run import KernelRun
from .operations import KernelOperations


class KernelContext(Protocol):
    """One kernel's provisioner, as its collaborators see it."""

    @property
    def kernel_id(self) -> str:
        """The kernel's id."""

    @property
    def target(self) -> str:
        """The name of the kernel's hardware target."""

    @property
    def owner(self) -> str:
        """Who the kernel belongs to in the ledger."""

    @property
    def launch_timeout(self) -> float:
        """Seconds a launch may take."""

    @property
    def poll_timeout(self) -> float:
        """Seconds a liveness check waits for the host."""

    @property
    def orphan_grace(self) -> float:
        """Seconds a kernel whose starter died keeps running on its host."""

    @property
    def log(self) -> logging.Logger:
        """Where to log."""

    @property
    def parent(self) -> Any:
        """The kernel's manager (jupyter_client's), or None."""

    @property
    def kernel_spec(self) -> Any:
        """The kernelspec the kernel was started from, or None."""

    @property
    def manager(self) -> MachineManager:
        """The process's machine manager."""

    @property
    def named(self) -> str:
        """The kernel as messages name it: by its machine."""

    @property
    def run(self) -> KernelRun:
        """Where the kernel runs and how it is reached."""

    @property
    def operations(self) -> KernelOperations:
        """The operation under way on the kernel."""

    @property
    def dead(self) -> str | None:
        """Why the kernel is dead, once its machine ended under it."""

    @property
    def launch_kwargs(self) -> dict[str, Any]:
        """The arguments of the kernel's last launch."""

    def resolved_target(self) -> Target:
        """The kernel's target."""

    def place_on(self, target: Target) -> None:
        """Make ``target`` the kernel's."""

    async def agent_call(self, op: str, wait: float | None = 30.0, **args: Any) -> dict[str, Any]:
        """Ask the kernel's host agent ``op`` about this kernel."""

    async def get_provisioner_info(self) -> dict[str, Any]:
        """What a later server needs to take the kernel over (its ledger row's info)."""

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        """Take over the kernel a ledger row describes."""


__all__ = ["KernelContext"]
