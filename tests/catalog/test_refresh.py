"""``catalog refresh``: specs and spot prices from moto's EC2, list prices from the Pricing API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, Catalog, read_catalog, write_catalog
from jupyter_remote_hw.catalog.entries import CatalogFileError
from jupyter_remote_hw.catalog.refresh import list_prices, on_demand_price, refresh_entries

from ..motoserver import aws_env, client, moto_endpoint  # noqa: F401


def test_refresh_from_moto_keeps_prices_when_pricing_is_missing(aws_env: str) -> None:
    previous = Catalog.load(SHIPPED_CATALOG).entries
    ec2 = {"us-east-1": client(aws_env, "ec2"), "eu-west-1": client(aws_env, "ec2", "eu-west-1")}
    entries, warnings = refresh_entries(
        ec2, client(aws_env, "pricing"), previous, today="2030-01-02"
    )
    by_key = {(e.instance_type, e.region): e for e in entries}
    g5 = by_key["g5.xlarge", "us-east-1"]
    assert (g5.vcpus, g5.memory_gib, g5.gpu_name, g5.gpu_count) == (4, 16.0, "A10G", 1)
    assert g5.gpu_memory_gib == 22.4
    assert by_key["p4d.24xlarge", "us-east-1"].gpu_count == 8
    assert by_key["m7i.xlarge", "us-east-1"].gpu_count == 0
    # moto has no Pricing API: the shipped price and its date stay.
    assert g5.on_demand_usd_per_hour == 1.006 and g5.price_date == "2024-08-01"
    assert any("Pricing API did not answer" in w for w in warnings)
    # A region the shipped catalog lacks gets specs but no price.
    eu = by_key["g5.xlarge", "eu-west-1"]
    assert eu.on_demand_usd_per_hour is None and eu.gpu_name == "A10G"
    # moto answers spot price history: the refreshed rows carry it.
    assert g5.spot_usd_per_hour is not None and g5.spot_usd_per_hour > 0
    assert not any(e.family == "r5" for e in entries)  # families not followed stay out


def test_refreshed_catalog_round_trips(aws_env: str, tmp_path: Path) -> None:
    entries, _ = refresh_entries(
        {"us-west-2": client(aws_env, "ec2", "us-west-2")},
        None,
        Catalog.load(SHIPPED_CATALOG).entries,
    )
    path = tmp_path / "cat" / "aws.csv"
    write_catalog(path, entries)
    assert path.read_text().startswith("# jupyter-remote-hw AWS hardware catalog")
    assert sorted(read_catalog(path), key=repr) == sorted(entries, key=repr)
    assert Catalog.load(path).search("h100:8", region="us-west-2")[0].instance_type == "p5.48xlarge"


PRICE_ITEM = {
    "product": {"attributes": {"instanceType": "g5.xlarge", "regionCode": "us-east-1"}},
    "terms": {
        "OnDemand": {
            "ABC.JRHW": {
                "priceDimensions": {
                    "ABC.JRHW.6YS6EN2CT7": {
                        "unit": "Hrs",
                        "pricePerUnit": {"USD": "1.0060000000"},
                        "description": "$1.006 per On Demand Linux g5.xlarge Instance Hour",
                    }
                }
            }
        }
    },
}


def test_price_list_item_parsing() -> None:
    assert on_demand_price(json.dumps(PRICE_ITEM)) == 1.006
    free = json.loads(json.dumps(PRICE_ITEM))
    free["terms"]["OnDemand"]["ABC.JRHW"]["priceDimensions"]["ABC.JRHW.6YS6EN2CT7"]["pricePerUnit"][
        "USD"
    ] = "0.0000000000"
    assert on_demand_price(free) is None


class _Pages:
    """What a boto3 paginator yields, for the one Pricing API call moto cannot serve."""

    def __init__(self, pages: list[dict]) -> None:
        self.pages = pages
        self.calls: list[dict] = []

    def get_paginator(self, name: str) -> _Pages:
        assert name == "get_products"
        return self

    def paginate(self, **kwargs: object) -> list[dict]:
        self.calls.append(kwargs)
        return self.pages


def test_list_prices_asks_for_linux_shared_tenancy() -> None:
    pricing = _Pages([{"PriceList": [json.dumps(PRICE_ITEM)]}])
    assert list_prices(pricing, "us-east-1", ["g5.xlarge"]) == {"g5.xlarge": 1.006}
    filters = {f["Field"]: f["Value"] for f in pricing.calls[0]["Filters"]}
    assert filters == {
        "instanceType": "g5.xlarge",
        "regionCode": "us-east-1",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }


def test_malformed_catalog_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    text = SHIPPED_CATALOG.read_text().replace(
        "g5.xlarge,us-east-1,4,", "g5.xlarge,us-east-1,four,"
    )
    path.write_text(text)
    with pytest.raises(CatalogFileError, match=r"bad.csv: data row \d+"):
        read_catalog(path)
    path.write_text("instance_type,region\n")
    with pytest.raises(CatalogFileError, match="missing columns"):
        read_catalog(path)
