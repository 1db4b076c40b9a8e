"""Catalog rows for the hardware listing (the REST API and pickers), beside the targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..catalog.entries import CatalogEntry
from ..providers.usability import Unusable

if TYPE_CHECKING:
    from .manager import MachineManager

#: Why a catalog row that the aws provider does not offer yet cannot be picked.
NOT_SET_UP = Unusable(
    "not set up", "start one with `jupyter remote-hw launch TYPE`, or list it in "
    "c.AWSProvider.machines", ("jupyter remote-hw launch TYPE",))


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
    from .hardware import provider_title, unusable_fields

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
            why_not = (f"not set up — start one with `jupyter remote-hw launch "
                       f"{entry.instance_type}`, or list it in c.AWSProvider.machines")
        rows.append({
            "name": name,
            "kernel_name": "remote-hw-" + name,
            "provider": "aws",
            "provider_title": provider_title("aws"),
            "label": f"{entry.hardware} · {entry.instance_type}",
            "hardware": entry.hardware,
            "where": f"{entry.instance_type} · {entry.region}",
            "gpu": entry.gpu_name or None,
            "gpu_count": entry.gpu_count,
            "gpu_memory_gib": entry.gpu_memory_gib or None,
            "vcpus": entry.vcpus,
            "memory_gib": entry.memory_gib,
            "price_per_hour": entry.on_demand_usd_per_hour,
            **unusable_fields(unusable, why_not),
            "source": "catalog",
        })
    return rows
