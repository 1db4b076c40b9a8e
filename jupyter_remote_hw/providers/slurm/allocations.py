"""Which allocation a kernel runs in: a job of its own (the default), or one that an
earlier kernel holds, when the user asks to share it.

A SLURM target (``slurm-dev-gpu-a100``) stands for "a new allocation of this
partition and GPU type". Each allocation is a machine with a name of its own: the
target's name for the first one, ``<target>.2``, ``<target>.3``... for more at once.
A kernel started on the target gets the first of these names that no kernel of this
server holds and no live job of the ledger has, and so a job of its own.

Each allocation whose job runs is offered as a target too, named ``<target>.1``
for the first and by its own name for the others: a kernel started on it joins
that job, beside the kernels in it (two notebooks on one GPU, say). A cluster whose
entry has ``"share": true`` puts every kernel of a target in one allocation.

These functions only name and pick; :class:`.provider.SLURMProvider` asks them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from ...ledger.store import FINAL_STATES
from ..target import Target

if TYPE_CHECKING:
    from ...ledger.store import MachineRecord
    from .access import ClusterAccess

#: The form of an allocation's name: its target's name, and the allocation's number.
_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<number>[1-9][0-9]{0,3})$")


def split(name: str, is_target: Callable[[str], bool]) -> tuple[str, int | None]:
    """The target and allocation number that ``name`` stands for.

    ``slurm-dev-gpu-a100`` gives ``("slurm-dev-gpu-a100", None)``: a new allocation.
    ``slurm-dev-gpu-a100.2`` gives ``("slurm-dev-gpu-a100", 2)``: allocation 2. A name
    that is a target itself (a partition called ``v1.2``...) is never split.

    Args:
        name: A target or allocation name.
        is_target: Whether a name is one of the provider's targets.
    """
    if is_target(name):
        return name, None
    match = _NUMBERED.match(name)
    if match is None or not is_target(match["base"]):
        return name, None
    return match["base"], int(match["number"])


def machine_name(base: str, number: int) -> str:
    """The name of allocation ``number`` of target ``base`` (the first has the target's)."""
    return base if number == 1 else f"{base}.{number}"


def share_name(machine: str, base: str) -> str:
    """The target that joins the allocation called ``machine`` (of target ``base``)."""
    return f"{base}.1" if machine == base else machine


def place(
    name: str,
    taken: Collection[str],
    is_target: Callable[[str], bool],
    *,
    current: str | None = None,
    share: bool = False,
) -> str:
    """The allocation a kernel that asks for ``name`` runs in.

    Args:
        name: What the kernel asked for: a target (a new allocation), or an
            allocation's name (to run in it).
        taken: Allocations that kernels of this server hold, or whose jobs live.
        is_target: Whether a name is one of the provider's targets.
        current: The allocation the kernel was placed in before (a restart keeps it).
        share: Whether kernels of one target share an allocation (the cluster's
            ``share``).

    Returns:
        The allocation's machine name.
    """
    base, number = split(name, is_target)
    if number is not None:
        return machine_name(base, number)
    if current is not None and split(current, is_target)[0] == base:
        return current
    if share:
        return base
    number = 1
    while machine_name(base, number) in taken:
        number += 1
    return machine_name(base, number)


def _kernels_in(provider: ClusterAccess, machine: str) -> int:
    manager = provider.machine_manager
    placements = manager.placements if manager is not None else {}
    return sum(1 for placed in placements.values() if placed == machine)


def running(provider: ClusterAccess) -> list[MachineRecord]:
    """The allocations of the ledger whose jobs run now (as the ledger last saw them)."""
    if provider.ledger is None:
        return []
    return [
        record
        for record in provider.ledger.machines(provider=provider.name)
        if record.state == "running" and record.resource_id
    ]


def live_names(provider: ClusterAccess) -> set[str]:
    """The allocations of the ledger whose jobs are queued or run."""
    if provider.ledger is None:
        return set()
    return {
        record.name
        for record in provider.ledger.machines(provider=provider.name)
        if record.state not in FINAL_STATES
    }


def record_ended(
    provider: ClusterAccess, pick: Callable[[MachineRecord], bool], why: str
) -> list[str]:
    """Record as ended (``SLURM job <id> ended: <why>``) the allocations of the ledger
    that are still live there and that ``pick`` picks, so that none is offered to share.

    Returns:
        Their job ids.
    """
    if provider.ledger is None:
        return []
    ended = []
    for record in provider.ledger.machines(provider=provider.name):
        if record.state in FINAL_STATES or not record.resource_id or not pick(record):
            continue
        detail = f"SLURM job {record.resource_id} ended: {why}"
        with contextlib.suppress(KeyError):
            provider.ledger.set_machine_state(record.machine_id, "terminated", detail)
        ended.append(record.resource_id)
    return ended


def forget_ended(
    provider: ClusterAccess, cluster: str, live: set[str], asked_at: float
) -> list[str]:
    """Record as ended the allocations of ``cluster`` whose jobs SLURM no longer runs
    or queues (ended while no server watched them: the ledger still has them live),
    so that none is offered to share.

    Args:
        provider: The provider.
        cluster: The cluster asked.
        live: The ids of our jobs squeue lists now.
        asked_at: When squeue was asked (epoch seconds): a row changed since (a job
            submitted meanwhile) is left alone.

    Returns:
        The job ids recorded as ended.
    """
    return record_ended(
        provider,
        lambda record: (
            str(record.info.get("cluster") or record.region) == cluster
            and record.resource_id not in live
            and record.updated < asked_at
        ),
        "SLURM no longer lists it",
    )


def shared_targets(provider: ClusterAccess, bases: dict[str, Target]) -> list[Target]:
    """A target for each running allocation: it puts a kernel in that job.

    Args:
        provider: The provider.
        bases: The provider's targets (new allocations), by name.
    """
    found = []
    for record in running(provider):
        base = split(record.name, bases.__contains__)[0]
        if base not in bases:
            continue  # a target no longer offered
        manager = provider.machine_manager
        opened = manager.cached(record.name) if manager is not None else None
        if opened is not None and opened.end_reason() is not None:
            continue  # its job ended; the ledger hears of it with the next look
        kernels = _kernels_in(provider, record.name)
        facts = [f"{kernels} kernel{'s' if kernels != 1 else ''}"]
        left = _seconds_left(provider, record.name)
        if left is not None:
            if left < _warning(provider, record):
                continue  # no room: it ends before a kernel could do much in it
            facts.append(f"{int(left // 60)} min left")
        found.append(
            dataclasses.replace(
                bases[base],
                name=share_name(record.name, base),
                where=f"{bases[base].where} · share job {record.resource_id} ({', '.join(facts)})",
            )
        )
    return found


def _seconds_left(provider: ClusterAccess, machine: str) -> float | None:
    """The time an open allocation has left (this server's reading), None if unknown."""
    manager = provider.machine_manager
    opened = manager.cached(machine) if manager is not None else None
    return opened.seconds_left() if opened is not None else None


def _warning(provider: ClusterAccess, record: MachineRecord) -> float:
    """Seconds before its end at which SLURM warns a job of the record's cluster."""
    cluster = str(record.info.get("cluster") or "")
    entry = provider.clusters.get(cluster) or {}
    return float(entry.get("warn", 300))


def allocation_target(name: str, bases: dict[str, Target]) -> Target | None:
    """The target of an allocation by its name (``<target>.<n>``), None if not one."""
    base, number = split(name, bases.__contains__)
    if number is None or base not in bases:
        return None
    return dataclasses.replace(
        bases[base], name=name, where=f"{bases[base].where} · allocation {number}"
    )


def availability(provider: ClusterAccess, name: str, base: str) -> str:
    """What a shared allocation's target offers, for people: its job and its kernels."""
    machine = machine_name(base, split(name, base.__eq__)[1] or 1)
    kernels = _kernels_in(provider, machine)
    return f"running, {kernels} kernel{'s' if kernels != 1 else ''} in it"


__all__ = [
    "allocation_target",
    "availability",
    "forget_ended",
    "live_names",
    "machine_name",
    "place",
    "record_ended",
    "running",
    "share_name",
    "shared_targets",
    "split",
]
