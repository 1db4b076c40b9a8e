"""``catalog refresh``: where each type runs, its specs and spot prices from moto's EC2, list
prices from the Pricing API (a loopback stand-in that real boto3 talks to), each price
with the date it was read."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import boto3
import pytest

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, Catalog, read_catalog, write_catalog
from jupyter_remote_hw.catalog.entries import CatalogFileError
from jupyter_remote_hw.catalog.refresh import (
    list_prices,
    on_demand_price,
    refresh_entries,
    spec_of,
)

from ..motoserver import NO_RETRY, aws_env, client, moto_endpoint  # noqa: F401
from .pricingserver import PricingAPI, price_item, pricing_api  # noqa: F401


def pricing_client(endpoint: str) -> object:
    return boto3.client(
        "pricing",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=NO_RETRY,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_refresh_from_moto_keeps_prices_when_pricing_is_missing(aws_env: str) -> None:
    previous = Catalog.load(SHIPPED_CATALOG).entries
    regions = ("us-east-1", "us-east-2", "eu-west-1")
    ec2 = {r: client(aws_env, "ec2", r) for r in regions}
    entries, warnings = refresh_entries(
        ec2, client(aws_env, "pricing"), previous, today="2030-01-02"
    )
    by_key = {(e.instance_type, e.region): e for e in entries}
    g5 = by_key["g5.xlarge", "us-east-1"]
    assert (g5.vcpus, g5.memory_gib, g5.gpu_name, g5.gpu_count) == (4, 16.0, "A10G", 1)
    assert g5.gpu_memory_gib == 22.4 and g5.accelerator_count == 0
    assert by_key["p4d.24xlarge", "us-east-1"].gpu_count == 8
    assert by_key["m7i.xlarge", "us-east-1"].gpu_count == 0
    # moto has no Pricing API: the shipped price and the date it was read stay.
    assert g5.on_demand_usd_per_hour == 1.006 and g5.price_date == "2024-08-01"
    assert any("Pricing API did not answer" in w for w in warnings)
    # A row the shipped catalog has no price for stays without one.
    eu = by_key["g5.xlarge", "eu-west-1"]
    assert eu.on_demand_usd_per_hour is None and eu.price_date == "" and eu.gpu_name == "A10G"
    # moto answers spot price history: the refreshed rows carry it, dated today.
    assert g5.spot_usd_per_hour is not None and g5.spot_usd_per_hour > 0
    assert g5.spot_price_date == "2030-01-02"
    assert not any(e.family == "r5" for e in entries)  # families not followed stay out


def test_refresh_reads_where_each_accelerator_runs_and_its_devices(aws_env: str) -> None:
    regions = ("us-east-1", "us-east-2", "eu-west-1")
    entries, warnings = refresh_entries(
        {r: client(aws_env, "ec2", r) for r in regions}, None, [], today="2030-01-02"
    )
    by_key = {(e.instance_type, e.region): e for e in entries}
    where = {r: {t for t, region in by_key if region == r} for r in regions}
    # EC2's offerings say where each type runs: trn2 in us-east-2 only of these three.
    assert "trn2.48xlarge" in where["us-east-2"]
    assert "trn2.48xlarge" not in where["us-east-1"] | where["eu-west-1"]
    assert "trn1.32xlarge" in where["us-east-1"] and "trn1.32xlarge" not in where["eu-west-1"]
    assert "inf2.xlarge" in where["eu-west-1"]
    trn1 = by_key["trn1.32xlarge", "us-east-1"]
    assert (trn1.accelerator_name, trn1.accelerator_count, trn1.accelerator_memory_gib) == (
        "Trainium",
        16,
        32.0,
    )
    assert trn1.accelerator_memory_total_gib == 512.0 and trn1.gpu_count == 0
    assert trn1.hardware == "16 × Trainium 32 GiB"
    inf2 = by_key["inf2.24xlarge", "eu-west-1"]
    assert (inf2.accelerator_name, inf2.accelerator_count, inf2.accelerator_memory_gib) == (
        "Inferentia2",
        6,
        32.0,
    )
    # EC2 reports 512 GiB per Trainium2 chip; the chip has 96 GiB (1.5 TiB per instance).
    trn2 = by_key["trn2.48xlarge", "us-east-2"]
    assert (trn2.accelerator_count, trn2.accelerator_memory_gib) == (16, 96.0)
    assert trn2.accelerator_memory_total_gib == 1536.0
    # Rows new to the catalog have no list price until the Pricing API gives one.
    assert all(e.on_demand_usd_per_hour is None and e.price_date == "" for e in entries)
    assert warnings == []


def test_gaudi_is_an_accelerator_though_ec2_lists_it_under_gpus() -> None:
    dl1 = {
        "InstanceType": "dl1.24xlarge",
        "VCpuInfo": {"DefaultVCpus": 96},
        "MemoryInfo": {"SizeInMiB": 786432},
        "GpuInfo": {
            "Gpus": [
                {
                    "Name": "Gaudi HL-205",
                    "Manufacturer": "Habana",
                    "Count": 8,
                    "MemoryInfo": {"SizeInMiB": 32768},
                }
            ],
            "TotalGpuMemoryInMiB": 262144,
        },
    }
    spec = spec_of(dl1)
    assert (spec["gpu_name"], spec["gpu_count"]) == ("", 0)
    assert (spec["accelerator_name"], spec["accelerator_count"]) == ("Gaudi HL-205", 8)
    assert spec["accelerator_memory_gib"] == 32.0
    # Inferentia as older answers give it, without NeuronInfo.
    inf2 = {
        "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        "InferenceAcceleratorInfo": {
            "Accelerators": [
                {"Count": 1, "Name": "Inferentia2", "MemoryInfo": {"SizeInMiB": 32768}}
            ]
        },
    }
    assert spec_of(inf2)["accelerator_name"] == "Inferentia2"
    assert spec_of(inf2)["accelerator_memory_gib"] == 32.0


def test_refresh_reads_list_prices_through_the_pricing_api(
    aws_env: str, pricing_api: tuple[PricingAPI, str]
) -> None:
    api, endpoint = pricing_api
    api.prices = {
        "g5.xlarge": [
            ("us-east-1", "1.0060000000"),
            ("us-east-1-bos-1", "1.2000000000"),  # a Local Zone: not a region we list
            ("eu-west-1", "1.1230000000"),
            ("ap-south-1", "0.9000000000"),  # a region not being refreshed
        ],
        "trn1.2xlarge": [("us-east-1", "1.3437500000")],
    }
    previous = Catalog.load(SHIPPED_CATALOG).entries
    entries, warnings = refresh_entries(
        {r: client(aws_env, "ec2", r) for r in ("us-east-1", "eu-west-1")},
        pricing_client(endpoint),
        previous,
        today="2030-01-02",
    )
    by_key = {(e.instance_type, e.region): e for e in entries}
    for key, price in {
        ("g5.xlarge", "us-east-1"): 1.006,
        ("g5.xlarge", "eu-west-1"): 1.123,
        ("trn1.2xlarge", "us-east-1"): 1.34375,
    }.items():
        assert (by_key[key].on_demand_usd_per_hour, by_key[key].price_date) == (
            price,
            "2030-01-02",
        )
    # Prices the API did not give keep their value and the date they were read.
    g6 = by_key["g6.xlarge", "us-east-1"]
    assert (g6.on_demand_usd_per_hour, g6.price_date) == (0.8048, "2024-08-01")
    assert by_key["inf2.xlarge", "eu-west-1"].on_demand_usd_per_hour is None
    [unpriced] = [w for w in warnings if "lists no Linux on-demand price" in w]
    assert "g6.xlarge" in unpriced and "g5.xlarge" not in unpriced
    # One query per instance type, for every region at once, paged through NextToken.
    asked = [
        {f["Field"]: f["Value"] for f in call["Filters"]}["instanceType"] for call in api.calls
    ]
    assert asked.count("g5.xlarge") == 2 and len(set(asked)) == len(
        {e.instance_type for e in entries}
    )


def test_a_pricing_api_that_refuses_keeps_every_previous_price(
    aws_env: str, pricing_api: tuple[PricingAPI, str]
) -> None:
    api, endpoint = pricing_api
    api.error = (400, "ThrottlingException")
    previous = Catalog.load(SHIPPED_CATALOG).entries
    entries, warnings = refresh_entries(
        {"us-west-2": client(aws_env, "ec2", "us-west-2")},
        pricing_client(endpoint),
        previous,
        today="2030-01-02",
    )
    [warning] = [w for w in warnings if "Pricing API" in w]
    assert "ThrottlingException" in warning and "kept the previous on-demand prices" in warning
    old = {(e.instance_type, e.region): e for e in previous}
    for entry in entries:
        before = old.get((entry.instance_type, entry.region))
        assert entry.on_demand_usd_per_hour == (before.on_demand_usd_per_hour if before else None)
        assert entry.price_date == (before.price_date if before else "")


def test_list_prices_asks_for_linux_shared_tenancy(pricing_api: tuple[PricingAPI, str]) -> None:
    api, endpoint = pricing_api
    api.prices = {"g5.xlarge": [("us-east-1", "1.0060000000"), ("us-west-2", "1.0060000000")]}
    prices = list_prices(pricing_client(endpoint), ["g5.xlarge"], ["us-east-1"])
    assert prices == {("g5.xlarge", "us-east-1"): 1.006}
    assert api.calls[0]["ServiceCode"] == "AmazonEC2"
    filters = {f["Field"]: f["Value"] for f in api.calls[0]["Filters"]}
    assert filters == {
        "instanceType": "g5.xlarge",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }


def test_price_list_item_parsing() -> None:
    item = price_item("g5.xlarge", "us-east-1", "1.0060000000")
    assert on_demand_price(json.dumps(item)) == 1.006
    dimensions = item["terms"]["OnDemand"]["SKU.JRHW"]["priceDimensions"]
    dimensions["SKU.JRHW.6YS6EN2CT7"]["pricePerUnit"]["USD"] = "0.0000000000"
    assert on_demand_price(item) is None


def test_refreshed_catalog_round_trips_with_its_dates(aws_env: str, tmp_path: Path) -> None:
    entries, _ = refresh_entries(
        {"us-west-2": client(aws_env, "ec2", "us-west-2")},
        None,
        Catalog.load(SHIPPED_CATALOG).entries,
        today="2030-01-02",
    )
    path = tmp_path / "cat" / "aws.csv"
    write_catalog(path, entries)
    assert path.read_text().startswith("# jupyter-remote-hw AWS hardware catalog")
    assert sorted(read_catalog(path), key=repr) == sorted(entries, key=repr)
    catalog = Catalog.load(path)
    assert catalog.search("h100:8", region="us-west-2")[0].instance_type == "p5.48xlarge"
    assert {e.spot_price_date for e in catalog.entries if e.spot_usd_per_hour} == {"2030-01-02"}


def test_a_catalog_from_before_accelerators_and_spot_dates_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "old.csv"
    path.write_text(
        "instance_type,region,vcpus,memory_gib,gpu_name,gpu_count,gpu_memory_gib,"
        "on_demand_usd_per_hour,spot_usd_per_hour,price_date\n"
        "g5.xlarge,us-east-1,4,16.0,A10G,1,22.4,1.006,0.45,2024-08-01\n"
        "t3.medium,us-east-1,2,4.0,,0,0.0,0.0416,,2024-08-01\n"
    )
    g5, t3 = read_catalog(path)
    assert (g5.accelerator_name, g5.accelerator_count, g5.accelerator_memory_gib) == ("", 0, 0.0)
    # Its one date was when all its prices were taken.
    assert (g5.spot_usd_per_hour, g5.spot_price_date) == (0.45, "2024-08-01")
    assert (t3.spot_usd_per_hour, t3.spot_price_date) == (None, "")
    write_catalog(path, [g5, t3])
    assert read_catalog(path) == [g5, t3]
    assert "accelerator_name" in path.read_text().splitlines()[2]


def test_malformed_catalog_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    text = SHIPPED_CATALOG.read_text().replace(
        "g5.xlarge,us-east-1,4,", "g5.xlarge,us-east-1,four,"
    )
    path.write_text(text)
    with pytest.raises(CatalogFileError, match=r"bad.csv: data row \d+"):
        read_catalog(path)
    entry = dataclasses.replace(Catalog.load(SHIPPED_CATALOG).entries[0], price_date="1 Aug 2024")
    write_catalog(path, [entry])
    with pytest.raises(
        CatalogFileError, match=r"data row 1: price_date '1 Aug 2024' is not a date"
    ):
        read_catalog(path)
    path.write_text("instance_type,region\n")
    with pytest.raises(CatalogFileError, match="missing columns"):
        read_catalog(path)
