"""What a hardware switch carries from the old kernel to the new one: the listing
the user confirms first, then the modules re-imported and the variables copied.

Free of HTTP; :class:`..hardware_actions.HardwareActions` runs a switch's steps
and turns the errors raised here into request errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.multikernelmanager import MultiKernelManager

from ...agent_client import AgentError, AgentUnavailableError
from ...machines.manager import MachineManager
from ...transfer import TransferError
from ...transfer.client import TransferClient
from ...transfer.variables import (
    BusyKernelError,
    kernel_namespace,
    source_and_destination,
    user_names,
)

CARRY_ALL = "all"
"""``carry`` value meaning every variable and module the old kernel has that can be carried."""

#: Seconds to wait for the new hardware's agent to say which modules it lacks.
FIND_MODULES_WAIT = 5.0

#: Called with a switch step's name and its fields (see :class:`..hardware_events.EventHub`).
StepReporter = Callable[..., None]


def mebibytes(count: float) -> str:
    """A byte count as the progress line shows it: ``12.3 MiB``, ``512 KiB``, ``40 B``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


def transfer_detail(done: int, total: int, rate: float | None) -> str:
    """``12.3 MiB of 40.0 MiB · 8.1 MiB/s`` (no rate until one is known)."""
    text = f"{mebibytes(done)} of {mebibytes(total)}"
    return f"{text} · {mebibytes(rate)}/s" if rate else text


async def mark_missing_modules(
    machines: MachineManager, target_name: str, modules: list[dict[str, Any]]
) -> None:
    """Say of each module whether the new hardware's Python has it (``installed_there``
    true or false, with ``missing_reason``), when that machine is open now; left
    out when it is not (its kernel then tries, and names what failed after).
    """
    machine = machines.cached(target_name)
    wanted = sorted({m["module"] for m in modules if m.get("importable", True)})
    if machine is None or not machine.link_up or not wanted:
        return
    try:
        client = await machine.agent()
        answer = await client.call("find_modules", wait=FIND_MODULES_WAIT, modules=wanted)
    except (AgentError, AgentUnavailableError, TimeoutError) as exc:
        machines.log.info("%s cannot say which modules it has: %s", target_name, exc)
        return
    missing = answer.get("missing")
    if not isinstance(missing, dict):
        machines.log.info(
            "%s cannot say which modules it has: %s", target_name, answer.get("error")
        )
        return
    for module in modules:
        if module["module"] in missing:
            module.update(installed_there=False, missing_reason=str(missing[module["module"]]))
        elif module["module"] in wanted:
            module["installed_there"] = True


@dataclass
class CarryReport:
    """What a switch carried: variables assigned, modules imported, and what did not
    come across with the reason."""

    carried: list[dict[str, Any]] = field(default_factory=list)
    imported: list[dict[str, str]] = field(default_factory=list)
    not_carried: list[dict[str, str]] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    """The old kernel's running ``%%ranks`` engines, which no switch carries."""


class _Throttle:
    """Passes copy progress on as ``carrying variables`` steps with bytes and rate,
    at most 4 a second."""

    def __init__(self, report: StepReporter, names: list[str], interval: float = 0.25) -> None:
        self.report = report
        self.names = names
        self.interval = interval
        self._began = time.monotonic()
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self._last >= self.interval:
            self._last = now
            elapsed = now - self._began
            rate = done / elapsed if elapsed > 0 and done else None
            self.report(
                "carrying variables",
                names=self.names,
                done=done,
                total=total,
                rate=rate,
                detail=transfer_detail(done, total, rate),
            )


async def carry(
    kernel_manager: MultiKernelManager,
    source_id: str,
    destination_id: str,
    names: list[str] | str,
    device: str | None,
    report: StepReporter,
) -> CarryReport:
    """Re-import the named modules in the new kernel and copy the named variables.

    A name bound to a module in the old kernel (``np`` after ``import numpy as
    np``) is imported there by the module's name and bound to the same name. A
    copy is all or nothing, so a variable that fails is left out and the copy
    tried again with the others, over the same two kernel links. What does not
    come across is in ``not_carried`` with the reason.

    Raises:
        CarryError: The old kernel could not be read (or the link to either kernel
            broke): the switch must leave the notebook as it was.

    When someone else can run code in the old kernel (shared as collaborator, at any
    time in its life), the new kernel rebuilds the variables with the restricted
    loader: their pickles call only data types, and what calls anything else is not
    carried, with the reason.
    """
    result = CarryReport()
    if not names:
        return result
    try:
        async with source_and_destination(kernel_manager, source_id, destination_id) as (
            source,
            destination,
        ):
            listing = await source.namespace()
            result.ranks = list(listing.get("ranks") or [])
            modules = {m["name"]: m for m in user_names(listing["modules"])}
            wanted = (
                [v["name"] for v in user_names(listing["variables"])] + list(modules)
                if names == CARRY_ALL
                else list(names)
            )
            saved = listing.get("ranks_saved")
            if isinstance(saved, dict):
                # The ranks' variables a hibernation saved go where the notebook goes:
                # the user cannot pick them, and nothing else keeps them.
                wanted.append(str(saved["name"]))
            await _import(destination, [modules[n] for n in wanted if n in modules], result, report)
            await _copy(
                source, destination, [n for n in wanted if n not in modules], device, result, report
            )
            if isinstance(saved, dict):
                _name_saved_ranks(result, str(saved["name"]), saved.get("size"))
    except TransferError as exc:
        # The old kernel could not be read (it died, it is busy, its link is down): what
        # was not carried would be lost with it, so the switch stops here.
        raise CarryError(
            f"the variables of kernel {source_id} could not be read: {exc}. The notebook "
            "keeps that kernel; nothing was moved"
        ) from None
    return result


class CarryError(TransferError):
    """The old kernel could not be read: the switch must not go on."""


async def _import(
    destination: TransferClient,
    modules: list[dict[str, Any]],
    result: CarryReport,
    report: StepReporter,
) -> None:
    for module in modules:
        if not module.get("importable", True):
            result.not_carried.append({"name": module["name"], "reason": module["reason"]})
    wanted = [
        {"name": m["name"], "module": m["module"]} for m in modules if m.get("importable", True)
    ]
    if not wanted:
        return
    report("importing modules", modules=[m["module"] for m in wanted])
    answer = await destination.import_modules(wanted)
    result.imported.extend(answer["imported"])
    result.not_carried.extend(
        {
            "name": f["name"],
            "module": f["module"],
            "reason": f"module {f['module']} cannot be imported there ({f['reason']})",
        }
        for f in answer["failed"]
    )


def _name_saved_ranks(result: CarryReport, name: str, size: Any) -> None:
    """Name the ranks' saved variables as the user knows them, in what was carried
    or not."""
    for entry in result.carried:
        if entry.get("name") == name:
            entry.update(name="%%ranks", type=f"the variables of {size} ranks, saved")
    for entry in result.not_carried:
        if entry.get("name") == name:
            entry["name"] = "%%ranks"


async def _copy(
    source: TransferClient,
    destination: TransferClient,
    names: list[str],
    device: str | None,
    result: CarryReport,
    report: StepReporter,
) -> None:
    remaining = list(names)
    while remaining:
        report("carrying variables", names=remaining)
        try:
            result.carried.extend(
                await source.copy_to(destination, remaining, device, _Throttle(report, remaining))
            )
            return
        except TransferError as exc:
            if exc.name is None or exc.name not in remaining:
                raise
            remaining.remove(exc.name)
            result.not_carried.append({"name": exc.name, "reason": str(exc)})


__all__ = [
    "CARRY_ALL",
    "BusyKernelError",
    "CarryError",
    "CarryReport",
    "carry",
    "kernel_namespace",
    "mark_missing_modules",
    "transfer_detail",
]
