"""What the ledger holds, as records: kernels, machines with their events, shares
with theirs, and the machine states that count for cost and budget."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

#: Machine states that are billed by the hour.
BILLED_STATES = frozenset({"running"})
#: Machine states that count against the budget (they run, or are about to).
ACTIVE_STATES = frozenset({"requested", "pending", "running"})
#: Machine states from which nothing comes back.
FINAL_STATES = frozenset({"terminated", "failed"})

#: The owner of kernels a Jupyter server started (and reattaches after a restart).
SERVER_OWNER = "server"
#: Owner prefix of kernels ``%%remote`` started: ``magic:<host>:<pid>``, the machine and
#: process of the local kernel the cell ran in (see :func:`magic_owner`).
MAGIC_OWNER = "magic:"


def magic_owner(host: str, pid: int) -> str:
    """The owner recorded for a kernel that ``%%remote`` started from the local kernel
    whose process is ``pid`` on the machine ``host``."""
    return f"{MAGIC_OWNER}{host}:{pid}"


def magic_owner_process(owner: str) -> tuple[str, int] | None:
    """The machine and process of a ``%%remote`` kernel's owner; None for another owner."""
    if not owner.startswith(MAGIC_OWNER):
        return None
    host, _, pid = owner[len(MAGIC_OWNER) :].rpartition(":")
    return (host, int(pid)) if host and pid.isdigit() else None


class MachineExistsError(Exception):
    """A machine of that name has not ended; the message names it."""


@dataclass(frozen=True)
class KernelRecord:
    """A kernel the ledger knows about.

    Attributes:
        kernel_id: Jupyter's kernel id (the same on the host).
        kernel_name: The kernelspec it was started from.
        target: The target's name.
        info: The provisioner's persisted state.
        created: When it was first recorded (epoch seconds).
        updated: When it was last recorded.
        owner: Who started it: :data:`SERVER_OWNER`, or ``magic:<host>:<pid>``
            for a kernel that ``%%remote`` started from a local kernel.
    """

    kernel_id: str
    kernel_name: str
    target: str
    info: dict[str, Any]
    created: float
    updated: float
    owner: str = SERVER_OWNER


@dataclass(frozen=True)
class MachineRecord:
    """A machine a provider launched (a cloud instance), as the ledger knows it.

    Attributes:
        machine_id: The ledger's id for it (also in the instance's tags).
        name: The target name it serves (``aws-g5-xlarge``).
        provider: The provider that launched it (``aws``).
        instance_type: Its instance type.
        region: Its region.
        resource_id: The provider's id (the EC2 instance id); empty until known.
        market: ``on-demand`` or ``spot``.
        price_per_hour: The US dollars per hour it costs while running.
        state: ``requested``, ``pending``, ``running``, ``stopping``, ``stopped``,
            ``terminated`` or ``failed``.
        owner: Who launched it (``user@host``).
        info: Provider details (address, host key, SSH alias).
        created: When it was recorded (epoch seconds).
        updated: When it last changed.
        running_since: When its current running interval began; None when not running.
        accrued_seconds: Seconds it ran in finished intervals.
        accrued_cost: What those intervals cost, in US dollars.
        last_seen: When a client last showed it was alive (a heartbeat), or None.
    """

    machine_id: str
    name: str
    provider: str
    instance_type: str
    region: str
    resource_id: str
    market: str
    price_per_hour: float
    state: str
    owner: str
    info: dict[str, Any]
    created: float
    updated: float
    running_since: float | None
    accrued_seconds: float
    accrued_cost: float
    last_seen: float | None

    def running_seconds(self, now: float | None = None) -> float:
        """Seconds it has run in all, the current interval included."""
        now = time.time() if now is None else now
        current = max(0.0, now - self.running_since) if self.running_since is not None else 0.0
        return self.accrued_seconds + current

    def cost(self, now: float | None = None) -> float:
        """US dollars accrued so far: price times running time, the current interval included."""
        now = time.time() if now is None else now
        current = max(0.0, now - self.running_since) if self.running_since is not None else 0.0
        return self.accrued_cost + current * self.price_per_hour / 3600.0

    @property
    def active(self) -> bool:
        """Whether it runs or is about to (it counts against the budget)."""
        return self.state in ACTIVE_STATES


@dataclass(frozen=True)
class MachineEvent:
    """One lifecycle event of a machine (``launched``, ``running``, ``stopped``, ...)."""

    machine_id: str
    time: float
    event: str
    detail: str


_MACHINE_FIELDS = [name for name in MachineRecord.__dataclass_fields__]
_UPDATABLE = {
    "name",
    "instance_type",
    "region",
    "resource_id",
    "market",
    "price_per_hour",
    "owner",
    "info",
}


def _machine(row: tuple[Any, ...]) -> MachineRecord:
    values = dict(zip(_MACHINE_FIELDS, row, strict=True))
    values["info"] = json.loads(values["info"])
    return MachineRecord(**values)


def _record(row: tuple[Any, ...]) -> KernelRecord:
    kernel_id, kernel_name, target, info, created, updated, owner = row
    return KernelRecord(kernel_id, kernel_name, target, json.loads(info), created, updated, owner)


@dataclass(frozen=True)
class ShareRecord:
    """A share of a kernel with a teammate's SSH key, as the owner's ledger knows it.

    Attributes:
        share_id: The share's id (also in the host's key line comment).
        kernel_id: The shared kernel.
        target: The target the kernel runs on.
        role: ``viewer`` or ``collaborator``.
        teammate: The teammate's key comment (who it is for).
        fingerprint: The SHA256 fingerprint of the teammate's key.
        expires: When the share ends (epoch seconds).
        created: When it was granted.
        revoked: When it was revoked, or None.
        info: The host, the relay ports.
    """

    share_id: str
    kernel_id: str
    target: str
    role: str
    teammate: str
    fingerprint: str
    expires: float
    created: float
    revoked: float | None
    info: dict[str, Any]


@dataclass(frozen=True)
class ShareEvent:
    """One event of a share (``granted``, ``joined``, ``revoked``)."""

    share_id: str
    time: float
    event: str
    detail: str


_SHARE_FIELDS = [name for name in ShareRecord.__dataclass_fields__]


def _share(row: tuple[Any, ...]) -> ShareRecord:
    values = dict(zip(_SHARE_FIELDS, row, strict=True))
    values["info"] = json.loads(values["info"])
    return ShareRecord(**values)
