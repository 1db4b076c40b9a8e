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

import shlex
from typing import TYPE_CHECKING

import asyncssh

from ...hibernation.far import FarPlace
from ...transport import TransportError
from ..target import Target

if TYPE_CHECKING:
    from .access import ClusterAccess

#: The place's ``host`` of a cluster: ``slurm:<cluster>``.
PREFIX = "slurm:"
#: Where the state goes under a cluster without a ``root``.
DEFAULT_ROOT = "~/.jupyter-remote-hw"


def _sftp_path(path: str) -> str:
    """``~/x`` as SFTP reads it (relative to the login's home); other paths as they are."""
    return path.removeprefix("~/")


def _shell_path(path: str) -> str:
    """``path`` quoted for ``sh`` on the login node, ``~/`` kept as the home."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


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

    async def read_hibernated(self, place: FarPlace, path: str) -> bytes:
        """The file read over the login node's connection (SFTP)."""
        cluster = self._place_cluster(place)
        try:
            conn = await (await self._slurm.connect_login(cluster)).wait_connected()
            async with conn.start_sftp_client() as sftp, sftp.open(_sftp_path(path), "rb") as file:
                data = await file.read()
        except (asyncssh.Error, TransportError) as exc:
            raise OSError(f"reading {path} on the login node of {cluster} failed: {exc}") from None
        return data if isinstance(data, bytes) else data.encode()

    async def remove_hibernated(self, place: FarPlace) -> str:
        """The directory removed over the login node's connection."""
        cluster = self._place_cluster(place)
        try:
            shell = await self._slurm.connect_login(cluster)
            result = await shell.run(f"rm -rf -- {_shell_path(place.path)}")
        except TransportError as exc:
            raise OSError(f"the login node of {cluster} cannot be reached: {exc}") from None
        if result.exit_status != 0:
            raise OSError(f"removing {place.path} on {cluster} failed: {result.stderr.strip()}")
        return f"its saved state in {place.path} on {place.label} removed"


__all__ = ["HibernatedOnCluster"]
