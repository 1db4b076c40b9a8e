"""Where a SLURM kernel's state waits while it hibernates: the cluster's shared home.

Hibernating ends the kernel's job, so its state must outlive the job: the
kernel writes it under the cluster's ``root`` (default ``~/.jupyter-remote-hw``),
in ``hibernated/<kernel id>``, which the login node and every compute node see.
The next job's kernel, on any allocation of the same cluster, reads it there,
so the bytes never cross to the Jupyter server. A kernel woken elsewhere gets the
files over the login node's SSH connection (SFTP), and a hibernated kernel shut
down has its directory removed there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...hibernation.far import FarPlace
from ...transport import TransportError
from ..host_files import read_file, remove_dir
from ..target import Target

if TYPE_CHECKING:
    from .access import ClusterAccess

#: The place's ``host`` of a cluster: ``slurm:<cluster>``.
PREFIX = "slurm:"
#: Where the state goes under a cluster without a ``root``.
DEFAULT_ROOT = "~/.jupyter-remote-hw"


class HibernatedOnCluster:
    """Where the :class:`.provider.SLURMProvider`'s kernels keep their state while they
    hibernate, and how it is read and removed from here (see the module).

    Args:
        slurm: The provider's settings and login nodes.
    """

    def __init__(self, slurm: ClusterAccess) -> None:
        self._slurm = slurm

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """The cluster's shared ``root``/hibernated, for every allocation of the cluster."""
        found = self._slurm.find_target(target.name)
        if found is None:
            return None
        cluster = found[0]
        root = str(self._slurm.cluster_settings(cluster).get("root") or DEFAULT_ROOT).rstrip("/")
        return FarPlace(
            self._slurm.name, PREFIX + cluster, f"{root}/hibernated", f"SLURM cluster {cluster}"
        )

    def _place_cluster(self, place: FarPlace) -> str:
        cluster = place.host.removeprefix(PREFIX)
        if not place.host.startswith(PREFIX) or cluster not in self._slurm.clusters:
            raise OSError(
                f"{place.label} is not a configured SLURM cluster (SLURMProvider.clusters)"
            )
        return cluster

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """The file read over the login node's connection (SFTP)."""
        cluster = self._place_cluster(place)
        where = f"the login node of {cluster}"
        try:
            conn = await self._slurm.connect_login(cluster)
        except TransportError as exc:
            raise OSError(f"reading {path} on {where} failed: {exc}") from None
        return await read_file(conn, path, where)

    async def remove_hibernated(self, place: FarPlace) -> str:
        """The directory removed over the login node's connection."""
        cluster = self._place_cluster(place)
        try:
            conn = await self._slurm.connect_login(cluster)
        except TransportError as exc:
            raise OSError(f"the login node of {cluster} cannot be reached: {exc}") from None
        await remove_dir(conn, place.path, cluster)
        return f"its saved state in {place.path} on {place.label} removed"


__all__ = ["HibernatedOnCluster"]
