"""The checks of ``c.SLURMProvider.clusters``: each entry's keys, its login node, its way
of reaching nodes, and the names of the variables its ``env`` sets."""

from __future__ import annotations

import re
from typing import Any

from traitlets import TraitError

from ...validation import quote

#: The keys a cluster's entry in ``c.SLURMProvider.clusters`` may have.
CLUSTER_KEYS = {
    "login",
    "partitions",
    "account",
    "qos",
    "time",
    "gpus",
    "nodes",
    "cpus",
    "mem",
    "sbatch_options",
    "env",
    "python",
    "root",
    "workdir",
    "warn",
    "idle_stop",
    "reach",
    "agent_wait",
    "hibernate_after",
    "share",
}

#: A variable name the shell takes in ``export NAME=value``.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_name_error(cluster: str, key: object) -> str | None:
    """Why ``key`` cannot be a variable of ``cluster``'s ``env``, or None when it can."""
    if isinstance(key, str) and ENV_NAME.match(key):
        return None
    return (
        f"SLURMProvider.clusters: {cluster!r} has 'env' key {quote(key)}, which is not a "
        "shell variable name: use letters, digits and '_', not starting with a digit"
    )


def check_clusters(value: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``value`` when every cluster's entry is valid.

    Raises:
        TraitError: An entry is not a dict with a 'login', has a 'reach' other than
            'bridge' or 'direct', has unknown keys, or an 'env' that is not a dict of
            shell variable names; the message names the cluster and the key.
    """
    for name, entry in value.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("login"), str):
            raise TraitError(f"SLURMProvider.clusters: {name!r} has no 'login'")
        if not entry["login"]:
            raise TraitError(f"SLURMProvider.clusters: {name!r} has no 'login'")
        if entry.get("reach", "bridge") not in ("bridge", "direct"):
            raise TraitError(
                f"SLURMProvider.clusters: {name!r} has 'reach' "
                f"{entry['reach']!r}; use 'bridge' or 'direct'"
            )
        unknown = set(entry) - CLUSTER_KEYS
        if unknown:
            raise TraitError(
                f"SLURMProvider.clusters: {name!r} has unknown keys "
                f"{sorted(unknown)}; use {sorted(CLUSTER_KEYS)}"
            )
        counts = entry.get("nodes") or []
        if not isinstance(counts, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts
        ):
            raise TraitError(
                f"SLURMProvider.clusters: {name!r} has 'nodes' {quote(counts)}; give a list "
                "of node counts such as [2, 4]"
            )
        env = entry.get("env") or {}
        if not isinstance(env, dict):
            raise TraitError(
                f"SLURMProvider.clusters: {name!r} has an 'env' that is not a dict of "
                "variable names and values"
            )
        for key in env:
            error = env_name_error(name, key)
            if error is not None:
                raise TraitError(error)
    return dict(value)


__all__ = ["CLUSTER_KEYS", "ENV_NAME", "check_clusters", "env_name_error"]
