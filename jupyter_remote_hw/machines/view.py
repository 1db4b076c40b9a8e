"""The one view of a user's machines and their kernels, in the words the UI shows.

The REST route ``GET /jupyter-remote-hw/api/machines`` (the "Remote hardware" panel)
and ``jupyter remote-hw list`` both build their rows with :class:`MachineView`, so
they say the same state for the same machine or kernel. A Jupyter server knows more
than the ledger (its open SSH links, its kernels' execution state, the notebooks
its sessions opened); a process without one (the CLI when no server runs) builds
the view from the ledger alone, with the same code and words.

Machine states: ``running`` (its link is up), ``reconnecting`` (the link dropped and
is being re-established), ``idle`` (nothing open, no kernel), ``unknown`` (kernels are
recorded on it, but no process here holds its link), and for cloud machines their
ledger states (``requested``, ``pending``, ``stopping``, ``stopped``, ...).
Kernel states: the kernel's execution state (``idle``, ``busy``, ``starting``,
``restarting``, ``dead``), ``reconnecting`` while its machine's link is down,
``waiting for HOST`` while a server that started without its host keeps trying to
reattach it, ``hibernated`` while its state is saved and its hardware released (the
kernel's ``hibernated`` then says how many bytes are stored, and since when), and
``unknown`` when no process here talks to it. A machine whose only kernels hibernate
counts as having none.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..ledger.store import ACTIVE_STATES, FINAL_STATES, SERVER_OWNER, Ledger, MachineRecord
from ..providers import Target

#: What every hardware target runs: ipykernel's Python 3, as its own kernelspec names it.
KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"

#: Providers whose hardware the user already has: nothing is billed, nothing to stop.
OWNED_PROVIDERS = frozenset({"local", "ssh"})


def unstoppable_note(target: Target) -> str:
    """Why a machine whose provider cannot stop it (a SLURM allocation, which ends with its
    last kernel) is not stopped, and what does what the user wants."""
    return (
        f"{target.label} cannot be stopped: its {target.provider} machine ends when its "
        "last kernel does. Terminate it to shut its kernels down."
    )


def nothing_to_stop_note(target: Target) -> str:
    """Why a cloud target with no machine running is not stopped."""
    return (
        f"{target.label} has no machine running, so there is nothing to stop: one is "
        "launched when a kernel first needs it."
    )


def link_states(open_machines: Iterable[Any]) -> dict[str, bool]:
    """Whether each open machine's link is up, by target name."""
    return {m.target.name: bool(m.link_up) for m in open_machines}


def machine_state(record: MachineRecord | None, link: bool | None, has_kernels: bool) -> str:
    """A machine's state word.

    Args:
        record: The ledger's machine (cloud machines), or None for owned hardware.
        link: True when this process holds an open link that is up, False when it is
            down, None when it holds none.
        has_kernels: Whether kernels are known on it.
    """
    if record is not None and record.state != "running":
        return record.state
    if link is not None:
        return "running" if link else "reconnecting"
    if record is not None:
        return "running"
    return "unknown" if has_kernels else "idle"


def kernel_state(execution_state: str | None, machine: str, waiting_for: str | None = None) -> str:
    """A kernel's state word, given its machine's state word (and, for a kernel a
    server has yet to reattach, the host it waits for)."""
    if waiting_for is not None:
        return f"waiting for {waiting_for}"
    if machine == "reconnecting":
        return "reconnecting"
    return execution_state or "unknown"


@dataclass(frozen=True)
class KernelFacts:
    """What the process building the view knows of one of its own kernels.

    Attributes:
        id: Jupyter's kernel id.
        target: The target it runs on.
        kernel_name: Its kernelspec (``remote-hw-<target>``).
        execution_state: ``idle``, ``busy``, ... as its kernel manager says.
        path: The notebook (or file) whose session uses it, relative to the server root.
        waiting_for: For a kernel the server is still to reattach: the host it waits for.
        hibernate_after: How long it may stay idle before it hibernates: ``{"seconds"
            (0: never), "source" ("target" or "notebook")}``; None where unknown.
    """

    id: str
    target: str
    kernel_name: str
    execution_state: str | None = None
    path: str | None = None
    waiting_for: str | None = None
    hibernate_after: dict[str, Any] | None = None


@dataclass
class MachineView:
    """Machines and kernels as the panel and the CLI show them.

    Args:
        targets: The providers' targets, by name.
        ledger: The ledger (cloud machines, every recorded kernel and its start time).
        links: Open machines' link states, by target name (see :func:`link_states`).
        kernels: This process's own kernels (a server's); the ledger adds the others.
        now: The time the view is of (epoch seconds).
        down_since: Since when each machine's link is down (epoch seconds), by name.
        run_by_others: Kernels that someone else can run code in, or could at some time
            in their life (shared with a role that runs code, or marked so), by id; the
            ledger's kernel records add those marked there.
        owner_paths: The notebook of each local kernel that ``%%remote`` kernels may
            belong to, by their owner (``magic:<host>:<pid>``).
    """

    targets: dict[str, Target]
    ledger: Ledger
    links: dict[str, bool] = field(default_factory=dict)
    kernels: list[KernelFacts] = field(default_factory=list)
    now: float = field(default_factory=time.time)
    down_since: dict[str, float] = field(default_factory=dict)
    run_by_others: set[str] = field(default_factory=set)
    owner_paths: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._recorded = {r.kernel_id: r for r in self.ledger.kernels()}

    def record(self, name: str) -> MachineRecord | None:
        """The ledger's machine for a target (a cloud machine), unless it has ended."""
        record = self.ledger.find_machine(name)
        if record is None or record.state in FINAL_STATES:
            return None
        return record

    def names(self) -> list[str]:
        """Every machine to show: open ones, ones with kernels, cloud ones not ended."""
        names = set(self.links) | {k.target for k in self.kernels}
        names |= {r.target for r in self._recorded.values()}
        names |= {r.name for r in self.ledger.machines() if r.state not in FINAL_STATES}
        return sorted(n for n in names if n in self.targets or self.record(n) is not None)

    def models(self, include_ended: bool = False) -> list[dict[str, Any]]:
        """Every machine's model (and ended cloud machines', when asked), by name."""
        models = [self.model(name) for name in self.names()]
        if include_ended:
            models += [
                self._cloud_model(r, [], None)
                for r in self.ledger.machines()
                if r.state in FINAL_STATES
            ]
        return models

    def model(self, name: str) -> dict[str, Any]:
        """One machine: state, hardware, price, cost, uptime, actions and its kernels."""
        record = self.record(name)
        target = self.targets.get(name)
        link = self.links.get(name)
        raw = self._kernels_on(name)
        awake = [k for k, _ in raw if self.hibernation(k.id) is None]
        state = machine_state(record, link, bool(awake))
        down = self.down_since.get(name) if state == "reconnecting" else None
        price = (
            record.price_per_hour
            if record is not None
            else 0.0
            if target is not None and target.provider in OWNED_PROVIDERS
            else None
        )
        kernels = [self._kernel_model(k, state, price) for k in raw]
        if record is not None:
            return {**self._cloud_model(record, kernels, target, state), "link_down_since": down}
        assert target is not None
        started = [k["started"] for k in kernels if k["started"] is not None]
        return {
            "name": name,
            "provider": target.provider,
            "hardware": target.hardware,
            "where": target.where,
            "state": state,
            "kernels": kernels,
            "price_per_hour": price,
            "cost_so_far": 0.0 if price == 0.0 else None,
            "uptime_seconds": round(self.now - min(started), 1) if started else None,
            "resource_id": None,
            "last_seen": None,
            "idle_stop_in": None,
            # Hardware the user owns is stopped (its kernels and agent end; the host runs
            # on), never terminated.
            "actions": (
                ["start", "stop"] if target.provider in OWNED_PROVIDERS else ["start", "terminate"]
            ),
            "shareable": target.provider != "local",
            "link_down_since": down,
        }

    def _cloud_model(
        self,
        record: MachineRecord,
        kernels: list[dict[str, Any]],
        target: Target | None,
        state: str | None = None,
    ) -> dict[str, Any]:
        ended = record.state in FINAL_STATES
        return {
            "name": record.name,
            "provider": record.provider,
            "hardware": target.hardware if target else record.instance_type,
            "where": target.where if target else f"{record.instance_type} · {record.region}",
            "state": state or record.state,
            "kernels": kernels,
            "price_per_hour": record.price_per_hour,
            "cost_so_far": round(record.cost(self.now), 4),
            "uptime_seconds": round(record.running_seconds(self.now), 1),
            "resource_id": record.resource_id or None,
            "last_seen": record.last_seen,
            "idle_stop_in": None,
            "actions": (
                []
                if ended
                else ["stop", "terminate"]
                if record.state in ACTIVE_STATES
                else ["start", "terminate"]
            ),
            "shareable": not ended,
            "link_down_since": None,
        }

    def _kernels_on(self, name: str) -> list[tuple[KernelFacts, str]]:
        """The kernels on a target, each with its owner: this process's, then the ledger's."""
        own = [(k, SERVER_OWNER) for k in self.kernels if k.target == name]
        known = {k.id for k, _ in own}
        others = [
            (KernelFacts(r.kernel_id, r.target, r.kernel_name), r.owner)
            for r in self._recorded.values()
            if r.target == name and r.kernel_id not in known
        ]
        return own + others

    def hibernation(self, kernel_id: str) -> dict[str, Any] | None:
        """A hibernated kernel's ``{"bytes", "kept_on", "saved_at", "left_out", "waking",
        "wake_error"}`` as the ledger has it; None for a kernel that runs."""
        record = self._recorded.get(kernel_id)
        hibernated = record.info.get("hibernated") if record is not None else None
        if not isinstance(hibernated, dict):
            return None
        return {
            "bytes": hibernated.get("bytes"),
            "kept_on": hibernated.get("kept_on"),
            "saved_at": hibernated.get("saved_at"),
            "left_out": [
                {"name": e.get("name"), "reason": e.get("reason")}
                for e in hibernated.get("left_out") or []
            ],
            "waking": bool(hibernated.get("waking")),
            "wake_error": hibernated.get("wake_error"),
        }

    def _kernel_model(
        self, kernel: tuple[KernelFacts, str], machine: str, price: float | None
    ) -> dict[str, Any]:
        facts, owner = kernel
        record = self._recorded.get(facts.id)
        started = record.created if record is not None else None
        uptime = max(0.0, self.now - started) if started is not None else None
        hibernated = self.hibernation(facts.id)
        state = kernel_state(facts.execution_state, machine, facts.waiting_for)
        return {
            "id": facts.id,
            "owner": owner,
            "kernel_name": facts.kernel_name,
            "display_name": KERNEL_DISPLAY_NAME,
            "path": facts.path or self.owner_paths.get(owner),
            "execution_state": facts.execution_state,
            "state": "hibernated" if hibernated is not None else state,
            "hibernated": hibernated,
            "hibernate_after": facts.hibernate_after,
            "run_by_others": facts.id in self.run_by_others
            or (record is not None and record.info.get("run_by_others") is True),
            "started": started,
            "uptime_seconds": None if uptime is None else round(uptime, 1),
            "cost_so_far": (
                None if price is None or uptime is None else round(price * uptime / 3600.0, 4)
            ),
        }


__all__ = [
    "KERNEL_DISPLAY_NAME",
    "KernelFacts",
    "MachineView",
    "kernel_state",
    "link_states",
    "machine_state",
    "nothing_to_stop_note",
    "unstoppable_note",
]
