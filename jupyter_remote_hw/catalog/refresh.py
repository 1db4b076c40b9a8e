"""Rebuild the catalog from the EC2 API (specs, spot prices) and the Pricing API (list prices).

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

DEFAULT_FAMILIES = ("g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en")
"""GPU families the catalog follows."""
DEFAULT_CPU_TYPES = ("t3.medium", "m7i.xlarge", "m7i.4xlarge", "c7i.2xlarge", "r7i.2xlarge")
"""CPU-only instance types the catalog follows."""

#: The Pricing API answers in these regions only; us-east-1 serves every region's prices.
PRICING_REGION = "us-east-1"

log = logging.getLogger(__name__)


def _wanted(instance_type: str, families: Iterable[str], cpu_types: Iterable[str]) -> bool:
    return instance_type.split(".", 1)[0] in set(families) or instance_type in set(cpu_types)


def describe_types(
    ec2: Any,
    families: Iterable[str] = DEFAULT_FAMILIES,
    cpu_types: Iterable[str] = DEFAULT_CPU_TYPES,
) -> dict[str, dict[str, Any]]:
    """Specs of the wanted instance types offered in ``ec2``'s region (DescribeInstanceTypes).

    Returns:
        ``{instance_type: {"vcpus", "memory_gib", "gpu_name", "gpu_count", "gpu_memory_gib"}}``.
    """
    found: dict[str, dict[str, Any]] = {}
    for page in ec2.get_paginator("describe_instance_types").paginate():
        for info in page.get("InstanceTypes", []):
            name = info["InstanceType"]
            if not _wanted(name, families, cpu_types):
                continue
            gpus = (info.get("GpuInfo") or {}).get("Gpus") or [{}]
            gpu = gpus[0]
            found[name] = {
                "vcpus": int(info["VCpuInfo"]["DefaultVCpus"]),
                "memory_gib": round(info["MemoryInfo"]["SizeInMiB"] / 1024, 1),
                "gpu_name": str(gpu.get("Name", "")),
                "gpu_count": int(sum(g.get("Count", 0) for g in gpus if g)),
                "gpu_memory_gib": round(
                    (gpu.get("MemoryInfo") or {}).get("SizeInMiB", 0) / 1024, 1
                ),
            }
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


def list_prices(pricing: Any, region: str, instance_types: Iterable[str]) -> dict[str, float]:
    """Linux, shared-tenancy on-demand prices of ``instance_types`` in ``region`` (GetProducts)."""
    prices: dict[str, float] = {}
    for instance_type in instance_types:
        filters = [
            {"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in (
                ("instanceType", instance_type),
                ("regionCode", region),
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
                price = on_demand_price(item)
                if price is not None:
                    prices[instance_type] = price
                    break
            if instance_type in prices:
                break
    return prices


def spot_prices(ec2: Any, instance_types: Iterable[str]) -> dict[str, float]:
    """The lowest current Linux spot price of each type across the region's zones."""
    types = list(instance_types)
    prices: dict[str, float] = {}
    if not types:
        return prices
    response = ec2.describe_spot_price_history(
        InstanceTypes=types,
        ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.datetime.now(datetime.UTC),
    )
    for item in response.get("SpotPriceHistory", []):
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

    Specs come from DescribeInstanceTypes. Prices come from the Pricing API;
    where it does not answer, a type keeps its previous price and date.
    Spot prices come from the spot price history where the region answers.

    Args:
        ec2_clients: An EC2 client per region.
        pricing: A Pricing API client (us-east-1), or None to keep previous prices.
        previous: The current catalog, whose prices are kept where no new one is found.
        families: Instance families to include.
        cpu_types: CPU-only instance types to include.
        today: The date to record with new prices (default: today, UTC).

    Returns:
        The entries, and warnings for people (what could not be refreshed).

    Raises:
        ClientError, BotoCoreError: DescribeInstanceTypes failed (e.g. no credentials).
    """
    today = today or datetime.datetime.now(datetime.UTC).date().isoformat()
    old = {(e.instance_type, e.region): e for e in previous}
    entries: list[CatalogEntry] = []
    warnings: list[str] = []
    for region, ec2 in ec2_clients.items():
        specs = describe_types(ec2, families, cpu_types)
        prices: dict[str, float] = {}
        if pricing is not None:
            try:
                prices = list_prices(pricing, region, sorted(specs))
            except (ClientError, BotoCoreError) as exc:
                warnings.append(
                    f"{region}: the Pricing API did not answer ({exc}); "
                    "kept the previous on-demand prices"
                )
        try:
            spots = spot_prices(ec2, sorted(specs))
        except (ClientError, BotoCoreError) as exc:
            warnings.append(f"{region}: no spot prices ({exc})")
            spots = {}
        for name, spec in sorted(specs.items()):
            before = old.get((name, region))
            price = prices.get(name, before.on_demand_usd_per_hour if before else None)
            date = today if name in prices else (before.price_date if before else "")
            entries.append(
                CatalogEntry(
                    instance_type=name,
                    region=region,
                    on_demand_usd_per_hour=price,
                    spot_usd_per_hour=spots.get(name, before.spot_usd_per_hour if before else None),
                    price_date=date,
                    **spec,
                )
            )
        missing = sorted(name for name, where in old if where == region and name not in specs)
        if missing:
            warnings.append(f"{region}: no longer offered or not visible: {', '.join(missing)}")
    return entries, warnings
