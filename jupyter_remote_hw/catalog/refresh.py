"""Rebuild the catalog from the EC2 API (where each type runs, specs, spot prices) and the
Pricing API (list prices), recording the date each price was read.

Blocking boto3 calls; callers on an event loop run :func:`refresh_entries` in a thread.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .entries import CatalogEntry

GPU_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en")
"""NVIDIA GPU families the catalog follows."""
ACCELERATOR_FAMILIES = ("trn1", "trn1n", "trn2", "inf2", "dl1")
"""Families whose accelerators are not GPUs: AWS Trainium and Inferentia2, Habana Gaudi."""
DEFAULT_FAMILIES = GPU_FAMILIES + ACCELERATOR_FAMILIES
"""Instance families the catalog follows."""
DEFAULT_CPU_TYPES = ("t3.medium", "m7i.xlarge", "m7i.4xlarge", "c7i.2xlarge", "r7i.2xlarge")
"""CPU-only instance types the catalog follows."""

#: The Pricing API answers in these regions only; us-east-1 serves every region's prices.
PRICING_REGION = "us-east-1"

#: Memory of one accelerator as AWS sells it, where DescribeInstanceTypes says otherwise:
#: it reports 512 GiB for each of a trn2.48xlarge's 16 Trainium2 chips, which have
#: 96 GiB of HBM each (1.5 TiB together, as the instance is sold).
SOLD_MEMORY_GIB = {"Trainium2": 96.0}

#: GPU makers whose GPUs are accelerators beside the GPUs (EC2 lists Gaudi under GpuInfo).
_NOT_GPU_MAKERS = ("habana",)

#: DescribeInstanceTypes takes at most this many names per call.
_DESCRIBE_BATCH = 100

log = logging.getLogger(__name__)


def _wanted(instance_type: str, families: Iterable[str], cpu_types: Iterable[str]) -> bool:
    return instance_type.split(".", 1)[0] in set(families) or instance_type in set(cpu_types)


def offered_types(
    ec2: Any,
    families: Iterable[str] = DEFAULT_FAMILIES,
    cpu_types: Iterable[str] = DEFAULT_CPU_TYPES,
) -> set[str]:
    """The wanted instance types that ``ec2``'s region offers (DescribeInstanceTypeOfferings)."""
    families, cpu_types = tuple(families), tuple(cpu_types)
    offered: set[str] = set()
    for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="region"
    ):
        for offering in page.get("InstanceTypeOfferings", []):
            name = offering["InstanceType"]
            if _wanted(name, families, cpu_types):
                offered.add(name)
    return offered


def _mib_to_gib(mib: float) -> float:
    return round(mib / 1024, 1)


def _devices(info: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The GPUs and the other accelerators in one DescribeInstanceTypes answer."""
    gpus: list[dict[str, Any]] = []
    accelerators: list[dict[str, Any]] = []
    for gpu in (info.get("GpuInfo") or {}).get("Gpus") or []:
        maker = str(gpu.get("Manufacturer", "")).lower()
        (accelerators if maker in _NOT_GPU_MAKERS else gpus).append(gpu)
    if not accelerators:
        accelerators = list((info.get("NeuronInfo") or {}).get("NeuronDevices") or [])
    if not accelerators:
        accelerators = list((info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or [])
    return gpus, accelerators


def spec_of(info: dict[str, Any]) -> dict[str, Any]:
    """The catalog's spec columns from one DescribeInstanceTypes ``InstanceTypes`` item.

    GPUs go in the ``gpu_*`` columns; Trainium and Inferentia (``NeuronInfo``, else
    ``InferenceAcceleratorInfo``) and Habana's Gaudi (listed under ``GpuInfo``) in the
    ``accelerator_*`` columns. Memory is of one device, in GiB.
    """
    gpus, accelerators = _devices(info)
    gpu = gpus[0] if gpus else {}
    accelerator = accelerators[0] if accelerators else {}
    accelerator_name = str(accelerator.get("Name", ""))
    accelerator_gib = SOLD_MEMORY_GIB.get(
        accelerator_name,
        _mib_to_gib((accelerator.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
    )
    return {
        "vcpus": int(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": _mib_to_gib(info["MemoryInfo"]["SizeInMiB"]),
        "gpu_name": str(gpu.get("Name", "")),
        "gpu_count": int(sum(g.get("Count", 0) for g in gpus)),
        "gpu_memory_gib": _mib_to_gib((gpu.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
        "accelerator_name": accelerator_name,
        "accelerator_count": int(sum(a.get("Count", 0) for a in accelerators)),
        "accelerator_memory_gib": accelerator_gib if accelerator_name else 0.0,
    }


def describe_types(ec2: Any, instance_types: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Specs of ``instance_types`` in ``ec2``'s region (DescribeInstanceTypes).

    Returns:
        ``{instance_type: spec}``, each spec as :func:`spec_of` gives it.
    """
    names = sorted(instance_types)
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), _DESCRIBE_BATCH):
        batch = names[start : start + _DESCRIBE_BATCH]
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=batch):
            for info in page.get("InstanceTypes", []):
                found[info["InstanceType"]] = spec_of(info)
    return found


def on_demand_price(price_list_item: str | dict[str, Any]) -> float | None:
    """The hourly USD price in one Pricing API ``PriceList`` item (a JSON document)."""
    item = json.loads(price_list_item) if isinstance(price_list_item, str) else price_list_item
    for term in (item.get("terms", {}).get("OnDemand") or {}).values():
        for dimension in (term.get("priceDimensions") or {}).values():
            usd = (dimension.get("pricePerUnit") or {}).get("USD")
            if usd is not None and dimension.get("unit", "Hrs") == "Hrs" and float(usd) > 0:
                return float(usd)
    return None


def _region_of(price_list_item: str | dict[str, Any]) -> str:
    item = json.loads(price_list_item) if isinstance(price_list_item, str) else price_list_item
    return str(((item.get("product") or {}).get("attributes") or {}).get("regionCode", ""))


def list_prices(
    pricing: Any, instance_types: Iterable[str], regions: Iterable[str]
) -> dict[tuple[str, str], float]:
    """Linux, shared-tenancy on-demand prices of ``instance_types`` in ``regions``.

    One GetProducts query per instance type answers for every region at once (each
    product names its ``regionCode``).

    Returns:
        ``{(instance_type, region): USD per hour}`` for the prices found.

    Raises:
        ClientError, BotoCoreError: The Pricing API did not answer.
    """
    wanted = set(regions)
    prices: dict[tuple[str, str], float] = {}
    for instance_type in sorted(set(instance_types)):
        filters = [
            {"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in (
                ("instanceType", instance_type),
                ("operatingSystem", "Linux"),
                ("tenancy", "Shared"),
                ("preInstalledSw", "NA"),
                ("capacitystatus", "Used"),
            )
        ]
        for page in pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=filters
        ):
            for item in page.get("PriceList", []):
                region = _region_of(item)
                if region not in wanted or (instance_type, region) in prices:
                    continue
                price = on_demand_price(item)
                if price is not None:
                    prices[instance_type, region] = price
    return prices


def spot_prices(ec2: Any, instance_types: Iterable[str]) -> dict[str, float]:
    """The lowest current Linux spot price of each type across the region's zones."""
    types = sorted(instance_types)
    prices: dict[str, float] = {}
    if not types:
        return prices
    for page in ec2.get_paginator("describe_spot_price_history").paginate(
        InstanceTypes=types,
        ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.datetime.now(datetime.UTC),
    ):
        for item in page.get("SpotPriceHistory", []):
            price = item.get("SpotPrice")
            if price is None:
                continue
            name = item["InstanceType"]
            prices[name] = min(float(price), prices.get(name, float("inf")))
    return prices


def refresh_entries(
    ec2_clients: dict[str, Any],
    pricing: Any | None,
    previous: list[CatalogEntry],
    *,
    families: Iterable[str] = DEFAULT_FAMILIES,
    cpu_types: Iterable[str] = DEFAULT_CPU_TYPES,
    today: str | None = None,
) -> tuple[list[CatalogEntry], list[str]]:
    """Build catalog entries for every region of ``ec2_clients``.

    Where each type runs comes from DescribeInstanceTypeOfferings, specs from
    DescribeInstanceTypes, on-demand prices from the Pricing API and spot prices
    from the spot price history. Each price read is dated ``today``; a price that
    could not be read keeps its previous value and date (or stays unknown).

    Args:
        ec2_clients: An EC2 client per region.
        pricing: A Pricing API client (us-east-1), or None to keep previous prices.
        previous: The current catalog, whose prices are kept where no new one is found.
        families: Instance families to include.
        cpu_types: CPU-only instance types to include.
        today: The date to record with each price read (default: today, UTC).

    Returns:
        The entries, and warnings for people (what could not be refreshed).

    Raises:
        ClientError, BotoCoreError: EC2 did not answer (e.g. no credentials).
    """
    today = today or datetime.datetime.now(datetime.UTC).date().isoformat()
    families, cpu_types = tuple(families), tuple(cpu_types)
    old = {(e.instance_type, e.region): e for e in previous}
    warnings: list[str] = []
    specs: dict[str, dict[str, dict[str, Any]]] = {}
    for region, ec2 in ec2_clients.items():
        specs[region] = describe_types(ec2, offered_types(ec2, families, cpu_types))
        log.debug("catalog refresh: %s offers %d of the types followed", region, len(specs[region]))
    prices: dict[tuple[str, str], float] = {}
    if pricing is not None:
        try:
            prices = list_prices(
                pricing, {name for found in specs.values() for name in found}, specs
            )
        except (ClientError, BotoCoreError) as exc:
            warnings.append(
                f"the Pricing API did not answer ({exc}); kept the previous on-demand prices"
            )
        else:
            unpriced = sorted(
                {name for region, found in specs.items() for name in found}
                - {name for name, _ in prices}
            )
            if unpriced:
                warnings.append(
                    "the Pricing API lists no Linux on-demand price for "
                    f"{', '.join(unpriced)}: their previous prices stay, or none is known"
                )
    entries: list[CatalogEntry] = []
    for region, ec2 in ec2_clients.items():
        try:
            spots = spot_prices(ec2, specs[region])
        except (ClientError, BotoCoreError) as exc:
            warnings.append(f"{region}: no spot prices ({exc})")
            spots = {}
        for name, spec in sorted(specs[region].items()):
            before = old.get((name, region))
            price = prices.get((name, region))
            spot = spots.get(name)
            entries.append(
                CatalogEntry(
                    instance_type=name,
                    region=region,
                    on_demand_usd_per_hour=price
                    if price is not None
                    else (before.on_demand_usd_per_hour if before else None),
                    price_date=today
                    if price is not None
                    else (before.price_date if before else ""),
                    spot_usd_per_hour=spot
                    if spot is not None
                    else (before.spot_usd_per_hour if before else None),
                    spot_price_date=today
                    if spot is not None
                    else (before.spot_price_date if before else ""),
                    **spec,
                )
            )
        missing = sorted(
            name for name, where in old if where == region and name not in specs[region]
        )
        if missing:
            warnings.append(f"{region}: no longer offered or not visible: {', '.join(missing)}")
    return entries, warnings
