"""Catalog rows for the hardware listing (the REST API and pickers), beside the targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .entries import CatalogEntry

if TYPE_CHECKING:
    from ..machines import MachineManager


def option_name(entry: CatalogEntry) -> str:
    """The target name a catalog row would have (``aws-g5-xlarge``)."""
    return "aws-" + entry.instance_type.replace(".", "-")


def hardware_options(manager: MachineManager) -> list[dict[str, Any]]:
    """One listing row per catalog entry in the aws provider's region.

    A row is usable when the aws provider offers it as a target (configured in
    ``c.AWSProvider.machines`` or launched before); otherwise it says how to
    make it so. Targets are listed by the listing itself; their rows win over these.
    """
    provider: Any = manager.providers.get("aws")
    if provider is None:
        return []
    targets = {t.name for t in provider.targets()}
    rows = []
    for entry in provider.catalog.search("", region=provider.region):
        name = option_name(entry)
        usable = name in targets
        rows.append({
            "name": name,
            "kernel_name": "remote-hw-" + name,
            "provider": "aws",
            "label": f"{entry.hardware} · {entry.instance_type}",
            "hardware": entry.hardware,
            "where": f"{entry.instance_type} · {entry.region}",
            "gpu": entry.gpu_name or None,
            "gpu_count": entry.gpu_count,
            "gpu_memory_gb": entry.gpu_memory_gib or None,
            "vcpus": entry.vcpus,
            "memory_gb": entry.memory_gib,
            "price_per_hour": entry.on_demand_usd_per_hour,
            "usable": usable,
            "why_not": None if usable else (
                f"not configured: add {{'name': '{entry.instance_type.replace('.', '-')}', "
                f"'hardware': '{entry.instance_type}'}} to c.AWSProvider.machines, or run "
                f"`jupyter remote-hw launch {entry.instance_type}`"),
            "source": "catalog",
        })
    return rows
