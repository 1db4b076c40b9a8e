"""The hardware listing: every target a user can pick, with what it offers and whether
it can be used now.

Used by the REST API (``GET /jupyter-remote-hw/api/hardware``), the JupyterLab picker
and the ipywidgets picker. Targets come from the providers (``local`` and SSH
hosts); the aws provider's catalog entries in its region are added
(see :func:`hardware_options`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..agent.hardware import cpu_count, memory_mib
from ..catalog.entries import CatalogEntry
from ..ledger.store import FINAL_STATES
from ..providers.usability import Unusable
from .view import machine_state as view_state

if TYPE_CHECKING:
    from ..providers import Target
    from .manager import MachineManager

#: How the pickers name each provider (``AWS: no credentials — …``).
PROVIDER_TITLES = {
    "local": "This machine",
    "ssh": "SSH",
    "aws": "AWS",
    "slurm": "SLURM",
    "kubernetes": "Kubernetes",
}

#: "A10G 24GB", "2 × A100 80 GB", "Test GPU 24GB": a GPU label with its memory.
_GPU_LABEL = re.compile(
    r"^(?:(?P<count>\d+)\s*[×x]\s*)?(?P<name>.+?)\s+(?P<mem>\d+(?:\.\d+)?)\s*GI?B$", re.IGNORECASE
)
#: "4 CPUs", "1 CPU": a CPU-only label.
_CPU_LABEL = re.compile(r"^\d+\s+CPUs?$", re.IGNORECASE)


@dataclass(frozen=True)
class HardwareOption:
    """One row of the hardware listing.

    Attributes:
        name: The target's name (``local``, ``ssh-gpu-box``, a catalog type).
        kernel_name: The kernelspec that starts a kernel there.
        provider: ``local``, ``ssh`` or a cloud provider.
        label: Short text for the toolbar (``CPU · local``, ``A10G 24 GiB · gpu-box``).
        hardware: What it runs on, as the provider labels it.
        where: Where it runs, for people.
        gpu: GPU model, or None for CPU only or unknown.
        gpu_count: Number of GPUs (0 for CPU only), None when unknown.
        gpu_memory_gib: Memory of one GPU in GiB, None when unknown.
        vcpus: Virtual CPUs, None when unknown.
        memory_gib: RAM in GiB, None when unknown.
        price_per_hour: US dollars per hour; 0 for hardware already owned, None when unknown
            (the pickers then say "price unknown").
        usable: Whether a kernel can be started there now.
        why_not: Why not and what to do, one line for people
            (``no credentials — set AWS_PROFILE or run `aws configure```), when not usable.
        reason: The ``why_not``'s first part (``no credentials``): unusable rows of one
            provider with the same reason fold into one line in the pickers.
        hint: What to do, the same for every row of that fold (commands in backticks).
        provider_title: The provider as people name it (``AWS``, ``SSH``).
        machine_state: The state of its machine when one is open or a cloud machine is
            recorded for it (``running``, ``reconnecting``, ``stopped``, ...), else None.
        availability: What is free there now, where the provider knows (``2 of 2 GPUs
            free on 1 node`` for a SLURM partition), else None.
        unreachable: While no machine is open there and the last try to connect failed:
            ``{"reason" ("unreachable" or "host key not trusted"), "since" (epoch
            seconds), "detail"}``; None otherwise. It can still be picked: a launch
            tries again.
        source: ``target`` (a provider offers it) or ``catalog``.
    """

    name: str
    kernel_name: str
    provider: str
    label: str
    hardware: str
    where: str
    gpu: str | None = None
    gpu_count: int | None = None
    gpu_memory_gib: float | None = None
    vcpus: int | None = None
    memory_gib: float | None = None
    price_per_hour: float | None = None
    usable: bool = True
    why_not: str | None = None
    reason: str | None = None
    hint: str | None = None
    provider_title: str = ""
    machine_state: str | None = None
    availability: str | None = None
    unreachable: dict[str, Any] | None = None
    source: str = "target"

    def to_json(self) -> dict[str, Any]:
        """The option as the REST API sends it."""
        return asdict(self)


def parse_hardware_label(label: str) -> dict[str, Any]:
    """GPU model, count and memory from a provider's hardware label, where it says them.

    Args:
        label: e.g. ``A10G 24GiB``, ``2 × A100 80 GB``, ``4 CPUs``, ``SSH host``.

    Returns:
        ``gpu``, ``gpu_count`` and ``gpu_memory_gib`` where the label gives them.
    """
    if _CPU_LABEL.match(label.strip()):
        return {"gpu": None, "gpu_count": 0, "gpu_memory_gib": None}
    found = _GPU_LABEL.match(label.strip())
    if found is None:
        return {}
    return {
        "gpu": found["name"].strip(),
        "gpu_count": int(found["count"] or 1),
        "gpu_memory_gib": float(found["mem"]),
    }


def _local_memory_gib() -> float | None:
    mib = memory_mib()
    return None if mib is None else round(mib / 1024, 1)


def machine_state(manager: MachineManager, target_name: str) -> str | None:
    """The state of a target's machine when one is open or the ledger has a cloud machine
    for it (``running``, ``reconnecting``, ``stopped``, ...), else None: the word the
    machines panel and ``jupyter remote-hw list`` say, from
    :func:`.machine_view.machine_state`."""
    record = manager.ledger.find_machine(target_name)
    if record is not None and record.state in FINAL_STATES:
        record = None
    machine = manager.cached(target_name)
    if machine is None and record is None:
        return None
    return view_state(record, None if machine is None else bool(machine.link_up), True)


def target_option(manager: MachineManager, target: Target) -> HardwareOption:
    """The listing row of a provider's target."""
    parsed = parse_hardware_label(target.hardware)
    state = machine_state(manager, target.name)
    extra: dict[str, Any] = {}
    if target.provider == "local":
        extra = {"vcpus": cpu_count(), "memory_gib": _local_memory_gib(), "price_per_hour": 0.0}
        short = "CPU" if parsed.get("gpu_count", 0) == 0 else target.hardware
        label = f"{short} · local"
    else:
        if target.provider in ("ssh", "slurm"):
            extra = {"price_per_hour": 0.0}
        label = f"{target.hardware} · {target.where}"
    provider = manager.providers.get(target.provider)
    free = provider.availability(target.name) if provider is not None else None
    specs = provider.specs(target.name) if provider is not None else None
    if specs is not None:
        parsed = {**parsed, **specs}
    # What its agent measured fills what the label and the provider left blank.
    for column, value in manager.measured.of(target.name).items():
        if parsed.get(column) is None and column not in extra:
            parsed[column] = value
    unusable = provider.target_usability(target.name) if provider is not None else None
    unreachable_now = manager.unreachable.get(target.name) if state is None else None
    if state == "reconnecting":
        unusable = Unusable("link down", "it is being re-established; try again in a moment")
    return HardwareOption(
        name=target.name,
        kernel_name=target.kernel_name,
        provider=target.provider,
        label=label,
        hardware=target.hardware,
        where=target.where,
        machine_state=state,
        availability=free or None,
        unreachable=unreachable_now.to_json() if unreachable_now is not None else None,
        provider_title=provider_title(target.provider),
        **unusable_fields(unusable),
        **parsed,
        **extra,
    )


def provider_title(provider: str) -> str:
    """The provider as people name it: ``AWS``, ``SSH``."""
    return PROVIDER_TITLES.get(provider, provider.upper())


def unusable_fields(unusable: Unusable | None, why_not: str | None = None) -> dict[str, Any]:
    """``usable``, ``why_not``, ``reason`` and ``hint`` of a row, from why it is unusable.

    Args:
        unusable: Why not, or None for a usable row.
        why_not: The row's own line when it says more than ``unusable.text``.
    """
    if unusable is None:
        return {"usable": True, "why_not": None, "reason": None, "hint": None}
    return {
        "usable": False,
        "why_not": why_not or unusable.text,
        "reason": unusable.reason,
        "hint": unusable.hint,
    }


@dataclass(frozen=True)
class ProviderStatus:
    """Whether one provider can start machines now, for the pickers and the CLI.

    Attributes:
        name: ``aws``, ``ssh``...
        title: ``AWS``, ``SSH``...
        usable: Whether it can.
        reason: Why not, in words (``no credentials``), or None.
        hint: What to do, or None.
        commands: Commands the hint names.
    """

    name: str
    title: str
    usable: bool
    reason: str | None = None
    hint: str | None = None
    commands: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The status as the REST API sends it."""
        return {**asdict(self), "commands": list(self.commands)}


def provider_statuses(manager: MachineManager) -> list[ProviderStatus]:
    """Every provider of ``manager`` with whether it can start machines now."""
    statuses = []
    for name, provider in manager.providers.items():
        unusable = provider.usability()
        statuses.append(
            ProviderStatus(
                name=name,
                title=provider_title(name),
                usable=unusable is None,
                reason=unusable.reason if unusable else None,
                hint=unusable.hint if unusable else None,
                commands=unusable.commands if unusable else (),
            )
        )
    return statuses


#: Why a catalog row that the aws provider does not offer yet cannot be picked.
NOT_SET_UP = Unusable(
    "not set up",
    "start one with `jupyter remote-hw launch TYPE`, or list it in c.AWSProvider.machines",
    ("jupyter remote-hw launch TYPE",),
)


def option_name(entry: CatalogEntry) -> str:
    """The target name a catalog row would have (``aws-g5-xlarge``)."""
    return "aws-" + entry.instance_type.replace(".", "-")


def hardware_options(manager: MachineManager) -> list[dict[str, Any]]:
    """One listing row per catalog entry in the aws provider's region.

    A row is usable when the aws provider offers it as a target (configured in
    ``c.AWSProvider.machines`` or launched before); otherwise it says why in words and
    what to do: the provider's own reason (no credentials) first, else how to set the
    type up. Targets are listed by the listing itself; their rows win over these.
    """
    provider: Any = manager.providers.get("aws")
    if provider is None:
        return []
    targets = {t.name for t in provider.targets()}
    blocked: Unusable | None = provider.usability()
    rows = []
    for entry in provider.catalog.search("", region=provider.region):
        name = option_name(entry)
        unusable, why_not = blocked, None
        if unusable is None and name not in targets:
            unusable = NOT_SET_UP
            why_not = (
                f"not set up — start one with `jupyter remote-hw launch "
                f"{entry.instance_type}`, or list it in c.AWSProvider.machines"
            )
        rows.append(
            {
                "name": name,
                "kernel_name": "remote-hw-" + name,
                "provider": "aws",
                "provider_title": provider_title("aws"),
                "label": f"{entry.hardware} · {entry.instance_type}",
                "hardware": entry.hardware,
                "where": f"{entry.instance_type} · {entry.region}",
                # An accelerator that is not a GPU (Trainium, Gaudi) fills the same columns.
                "gpu": entry.gpu_name or entry.accelerator_name or None,
                "gpu_count": entry.gpu_count or entry.accelerator_count,
                "gpu_memory_gib": entry.gpu_memory_gib or entry.accelerator_memory_gib or None,
                "vcpus": entry.vcpus,
                "memory_gib": entry.memory_gib,
                "price_per_hour": entry.on_demand_usd_per_hour,
                **unusable_fields(unusable, why_not),
                "source": "catalog",
            }
        )
    return rows


def catalog_options(manager: MachineManager) -> list[HardwareOption]:
    """Rows of the hardware catalog (see :func:`hardware_options`) as listing rows."""
    fields = set(HardwareOption.__dataclass_fields__)
    options = []
    for row in hardware_options(manager):
        values = {key: value for key, value in dict(row).items() if key in fields}
        values.setdefault("source", "catalog")
        options.append(HardwareOption(**values))
    return options


def list_hardware(manager: MachineManager) -> list[HardwareOption]:
    """Every hardware option: the providers' targets (default first), then catalog rows.

    A catalog row with the same name as a target is left out (the target wins).
    """
    options = [target_option(manager, target) for target in manager.targets()]
    names = {option.name for option in options}
    options.extend(o for o in catalog_options(manager) if o.name not in names)
    return options


__all__ = [
    "HardwareOption",
    "ProviderStatus",
    "catalog_options",
    "hardware_options",
    "list_hardware",
    "parse_hardware_label",
    "provider_statuses",
    "provider_title",
    "unusable_fields",
]
