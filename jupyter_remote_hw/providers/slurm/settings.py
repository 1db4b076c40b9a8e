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

#: The help of ``c.SLURMProvider.clusters``: each entry's keys.
CLUSTERS_HELP = (
    "SLURM clusters to offer, by name, each a dict: 'login' (the login node: an "
    "ssh_config alias or [user@]host, required), 'partitions' (list of partitions to "
    "offer, default all), 'account' and 'qos' (sbatch --account/--qos), 'time' (time "
    "limit of a job, SLURM syntax such as '60' or '4:00:00'; default 60 minutes), "
    "'gpus' (GPUs per allocation, per node for several nodes; default 1), 'nodes' (the node counts offered besides one, e.g. [2, 4]: each partition with that many nodes gets a target whose kernel runs on the first node and whose %%ranks cells run on every GPU of every node; default none), 'cpus' (CPUs per allocation, default 1), "
    "'mem' (memory per allocation, e.g. '16G'; default the partition's default), "
    "'sbatch_options' (list of extra sbatch arguments), 'env' (dict of variables set "
    "for every SLURM command, such as SLURM_CONF), 'python' (the nodes' Python with "
    "ipykernel, default python3), 'root' (directory on the cluster for the agent's files, "
    "default the login home; it must be the same path on the nodes), 'workdir' (where "
    "kernels start when the notebook's directory does not exist there), 'warn' (seconds "
    "before the time limit at which SLURM warns the job, default 300), 'idle_stop' "
    "(seconds without kernel activity after which the job is cancelled; default "
    "SLURMProvider.idle_stop), 'hibernate_after' (seconds idle after which a kernel "
    "hibernates; default SLURMProvider.hibernate_after), 'share' (true: the kernels of "
    "a target share one allocation; default false: each kernel gets a job of its own, "
    "and a running job is offered as a target of its own to share it), 'agent_wait' (seconds a running job waits for its agent "
    "before it ends itself, when the server that submitted it went away; default 300), 'reach' ('bridge', the default: streams to the node's "
    "sockets go through job steps started on the login node; 'direct': the login node "
    "opens them itself, for clusters whose login node is the compute node)."
)

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


__all__ = ["CLUSTERS_HELP", "CLUSTER_KEYS", "ENV_NAME", "check_clusters", "env_name_error"]
