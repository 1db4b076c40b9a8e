"""Which cluster a target belongs to, what to say while its login node cannot be
reached, and who hears a notice of an allocation: the kernels placed in it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..target import Target, slug
from ..usability import Unusable

if TYPE_CHECKING:
    from .access import ClusterAccess


def cluster_of(clusters: Mapping[str, Any], target_name: str) -> str | None:
    """The configured cluster whose targets are named as ``target_name`` is
    (``slurm-<cluster>-...``); the longest such name when several fit."""
    found = [name for name in clusters if target_name.startswith(f"slurm-{slug(name)}-")]
    return max(found, key=len) if found else None


def unreachable(clusters: Mapping[str, Mapping[str, Any]], errors: Mapping[str, str]) -> Unusable:
    """Why ``clusters`` cannot be used: their login nodes could not be asked.

    Args:
        clusters: The clusters at fault, by name, with their entries.
        errors: What reaching each cluster's login node said, by cluster.
    """
    logins = {name: str(entry["login"]) for name, entry in clusters.items()}
    if len(logins) == 1:
        [(cluster, login)] = logins.items()
        return Unusable(
            f"SLURM cluster {cluster} not reachable",
            f"check that `ssh {login}` works ({errors.get(cluster, 'not asked yet')})",
            (f"ssh {login}",),
        )
    commands = tuple(f"ssh {login}" for login in logins.values())
    return Unusable(
        f"SLURM clusters {', '.join(logins)} not reachable",
        "check that " + " and ".join(f"`{c}`" for c in commands) + " work",
        commands,
    )


def unreached_target(cluster: str, entry: Mapping[str, Any], name: str) -> Target:
    """A stand-in for target ``name`` of a cluster whose partitions were never read
    (its login node did not answer): a kernel asked for it is launched, and the
    launch says at its ``connect`` step that the login node cannot be reached and what
    to do, instead of calling the hardware unknown."""
    login = str(entry["login"])
    return Target(
        name=name,
        provider="slurm",
        where=f"SLURM {cluster} · login node {login} not reached yet",
        hardware="not known until its login node answers",
        host=login,
        python=str(entry.get("python") or "python3"),
        root=str(entry["root"]) if entry.get("root") else None,
        workdir=str(entry.get("workdir") or "~"),
    )


def notify_kernels(provider: ClusterAccess, target: Target, line: str) -> None:
    """Tell the launch listeners (the event socket: toolbar and notices) ``line`` about
    allocation ``target``: one ``time limit`` event for each kernel placed in it, so
    that each notebook shows it (one event with no kernel when none is known)."""
    manager = provider.machine_manager
    placements = manager.placements if manager is not None else {}
    kernels = sorted(k for k, placed in placements.items() if placed == target.name) or [""]
    for kernel_id in kernels:
        event = {
            "kernel_id": kernel_id,
            "target": target.name,
            "step": "time limit",
            "state": "progress",
            "seconds": None,
            "detail": line,
        }
        for listener in list(manager.launch_listeners if manager is not None else []):
            try:
                listener(event)
            except Exception:  # one listener's bug must not stop the others
                provider.log.exception("a launch listener failed on %s", event)


__all__ = ["cluster_of", "notify_kernels", "unreachable", "unreached_target"]
