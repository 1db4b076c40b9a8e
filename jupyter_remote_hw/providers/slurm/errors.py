"""Errors of the ``slurm`` provider, each one line that says what to do."""

from __future__ import annotations

import re

from ...errors import UserError
from ...transport import HostUnreachableError


class SLURMError(UserError):
    """SLURM refused or ended something we asked for; the message is one line for people.

    Attributes:
        cluster: The configured cluster's name.
        http_status: The status a launch that fails so answers (502: the cluster did
            not do what we asked).
    """

    http_status = 502

    def __init__(self, cluster: str, message: str) -> None:
        super().__init__(f"SLURM cluster {cluster}: {message}")
        self.cluster = cluster


class SLURMRefusedError(SLURMError):
    """SLURM refused a request as the cluster's settings make it (an unknown partition,
    more GPUs than a node has, a time over the partition's limit): the user's to fix.

    Attributes:
        http_status: The status a launch refused so answers (422: the request is
            well formed, but this cluster cannot run it as configured).
    """

    http_status = 422


class LoginUnreachableError(HostUnreachableError):
    """The cluster's login node cannot be reached over SSH."""


#: What sbatch says (lower-cased fragments) and how we say it; ``{detail}`` is the
#: request, ``{partitions}`` the partitions that exist.
_SBATCH_ERRORS: tuple[tuple[str, str], ...] = (
    (
        "invalid partition",
        (
            "partition {partition!r} does not exist (there are: {partitions}); "
            "pick a listed target or fix c.SLURMProvider.clusters"
        ),
    ),
    (
        "requested node configuration is not available",
        (
            "no node of partition {partition!r} can ever hold {detail}: ask for fewer GPUs, CPUs "
            "or less memory"
        ),
    ),
    (
        "more processors requested than permitted",
        "partition {partition!r} does not allow {detail}: ask for fewer CPUs",
    ),
    (
        "requested time limit is invalid",
        "the time limit {time} is over partition {partition!r}'s maximum: lower it",
    ),
    (
        "invalid account",
        ("the account is not valid on this cluster: check the cluster's 'account'"),
    ),
    ("invalid qos", "the QOS is not valid for this account: check the cluster's 'qos'"),
    (
        "job violates accounting/qos policy",
        "the request {detail} is over a limit of the account or QOS: ask for less",
    ),
    ("invalid generic resource", "partition {partition!r} has no such GPU ({detail})"),
)

#: Pending reasons that never clear by waiting: the launch fails at once with these.
HOPELESS_REASONS = {
    "PartitionTimeLimit": "the time limit is over the partition's maximum",
    "PartitionNodeLimit": "the job asks for more nodes than the partition allows",
    "PartitionDown": "the partition is down",
    "PartitionInactive": "the partition is inactive",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "BadConstraints": "no node can satisfy the request",
    "AccountNotAllowed": "the account may not use this partition",
    "QOSNotAllowed": "the QOS may not be used in this partition",
    "DependencyNeverSatisfied": "a dependency can never be met",
}


def sbatch_error(
    cluster: str, stderr: str, *, partition: str, partitions: list[str], detail: str, time: str
) -> SLURMError:
    """The one-line error for a refused submission, from sbatch's own words."""
    lines = [
        re.sub(r"^sbatch: error:\s*", "", line.strip())
        for line in stderr.splitlines()
        if line.strip()
    ]
    said = lines[-1] if lines else "no reason given"
    lowered = " ".join(lines).lower()
    for fragment, template in _SBATCH_ERRORS:
        if fragment in lowered:
            text = template.format(
                partition=partition,
                partitions=", ".join(partitions) or "none",
                detail=detail,
                time=time,
            )
            return SLURMRefusedError(cluster, f"sbatch refused the job: {text} ({said})")
    if "unable to contact slurm controller" in lowered:
        return SLURMError(cluster, f"sbatch could not reach SLURM's controller: {said}")
    return SLURMRefusedError(cluster, f"sbatch refused the job: {said}")


__all__ = [
    "HOPELESS_REASONS",
    "LoginUnreachableError",
    "SLURMError",
    "SLURMRefusedError",
    "sbatch_error",
]
