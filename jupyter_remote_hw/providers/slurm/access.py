"""What the SLURM provider's helpers (allocations, submission, ending, liveness, reach,
hibernated state) may use of the provider: its settings, its ledger and the login nodes.

They take a :class:`ClusterAccess` (the :class:`.provider.SLURMProvider` is one) instead
of the provider class itself, so that they never reach into the provider's own state and
the provider can import them.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ...ledger import Ledger
from ...transport import SSHConnection, TransportManager
from ..base import Machines
from .queue import SlurmShell
from .targets import NodeRow, Offer


class ClusterAccess(Protocol):
    """The provider's settings and its ways to the clusters' login nodes."""

    @property
    def name(self) -> str:
        """The provider's name (``slurm``), as its machines are recorded in the ledger."""
        ...

    @property
    def log(self) -> logging.Logger:
        """Where to log."""
        ...

    @property
    def ledger(self) -> Ledger | None:
        """The ledger of machines and kernels, when the provider has one."""
        ...

    @property
    def machine_manager(self) -> Machines | None:
        """The machines of the server, to reach their kernels."""
        ...

    @property
    def clusters(self) -> dict[str, Any]:
        """The configured clusters by name (``c.SLURMProvider.clusters``)."""
        ...

    @property
    def owner(self) -> str:
        """Who the provider's jobs belong to in the ledger."""
        ...

    @property
    def queue_poll(self) -> float:
        """Seconds between two readings of a queued job's state."""
        ...

    def cluster_settings(self, name: str) -> dict[str, Any]:
        """A copy of one cluster's entry."""
        ...

    async def connect_login(
        self, cluster: str, transport: TransportManager | None = None
    ) -> SSHConnection:
        """The login node's SSH connection."""
        ...

    def shell(self, cluster: str, conn: SSHConnection) -> SlurmShell:
        """A runner of SLURM commands on the cluster's login node."""
        ...

    def cached_rows(self, cluster: str) -> list[NodeRow] | None:
        """The cluster's partitions as last read, or None."""
        ...

    def find_target(self, target_name: str) -> tuple[str, Offer] | None:
        """The cluster and offer of a target or of one of its allocations."""
        ...


__all__ = ["ClusterAccess"]
