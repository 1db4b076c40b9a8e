"""Queries over the shipped catalog: GPU names, counts, memory, price, spot, did-you-mean."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, Catalog, CatalogQueryError


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load(SHIPPED_CATALOG)


def types(entries: list) -> list[str]:
    return [e.instance_type for e in entries]


def test_gpu_name_any_case_cheapest_first(catalog: Catalog) -> None:
    found = catalog.search("a10g", region="us-east-1")
    assert types(found)[:2] == ["g5.xlarge", "g5.2xlarge"]
    assert {e.gpu_name for e in found} == {"A10G"}
    prices = [e.on_demand_usd_per_hour for e in found]
    assert prices == sorted(prices)
    assert types(catalog.search("A10G", region="us-east-1")) == types(found)


def test_gpu_count(catalog: Catalog) -> None:
    assert types(catalog.search("A100:8", region="us-east-1")) == ["p4d.24xlarge", "p4de.24xlarge"]
    assert types(catalog.search("a10g:4", region="us-east-1")) == ["g5.12xlarge", "g5.24xlarge"]
    assert catalog.search("h100:3") == []


def test_gpu_memory(catalog: Catalog) -> None:
    found = catalog.search("gpu_mem>=40", region="us-east-1")
    assert found and all(e.gpu_memory_gib >= 40 for e in found)
    assert "g5.xlarge" not in types(found) and "p4d.24xlarge" in types(found)
    assert types(catalog.search("gpu_mem>=40 cheapest", region="us-east-1")) == ["g6e.xlarge"]
    assert all(e.gpu_memory_total_gib >= 300 for e in catalog.search("gpu_mem_total>=300"))


def test_price_limits_and_cheapest(catalog: Catalog) -> None:
    cheap_gpus = catalog.search("gpu <=0.9", region="us-east-1")
    assert types(cheap_gpus) == ["g4dn.xlarge", "g4dn.2xlarge", "g6.xlarge"]
    assert types(catalog.search("gpu price<=0.9", region="us-east-1")) == types(cheap_gpus)
    assert types(catalog.search("cheapest", region="us-east-1")) == ["t3.medium"]
    assert types(catalog.search("cpu vcpus>=8 cheapest", region="us-east-1")) == ["c7i.2xlarge"]


def test_region_term_and_unknown_prices_last(catalog: Catalog) -> None:
    west = catalog.search("h200 region=us-west-2")
    assert {e.region for e in west} == {"us-west-2"}
    # p5en has a list price, p5e none (Capacity Blocks only): the unknown price comes last.
    assert types(west) == ["p5en.48xlarge", "p5e.48xlarge"]
    assert west[-1].on_demand_usd_per_hour is None
    assert types(catalog.search("h200 cheapest", region="us-west-2")) == ["p5en.48xlarge"]
    assert catalog.search("p5e cheapest") == []  # no known price: nothing to call cheapest


def test_spot_prefers_spot_prices() -> None:
    base = Catalog.load(SHIPPED_CATALOG)
    import dataclasses

    entries = [
        dataclasses.replace(e, spot_usd_per_hour=0.3) if e.instance_type == "g5.2xlarge" else e
        for e in base.entries
    ]
    catalog = Catalog(entries, "test")
    assert types(catalog.search("a10g cheapest", region="us-east-1")) == ["g5.xlarge"]
    assert types(catalog.search("a10g spot cheapest", region="us-east-1")) == ["g5.2xlarge"]
    assert types(catalog.search("a10g spot <=0.5", region="us-east-1")) == ["g5.2xlarge"]


@pytest.mark.parametrize(
    ("query", "suggestion"),
    [
        ("a10", "A10G"),
        ("h1000", "H100"),
        ("g5.xlarg", "g5.xlarge"),
        ("l40", "L40S"),
    ],
)
def test_unknown_names_suggest(catalog: Catalog, query: str, suggestion: str) -> None:
    with pytest.raises(CatalogQueryError) as caught:
        catalog.search(query)
    assert suggestion in caught.value.suggestions
    assert "did you mean" in str(caught.value) and repr(query) in str(caught.value)


def test_unknown_field_suggests(catalog: Catalog) -> None:
    with pytest.raises(CatalogQueryError, match="did you mean 'gpu_mem'"):
        catalog.search("gpumem>=40")
    with pytest.raises(CatalogQueryError, match="cannot read"):
        catalog.search("a100>>3")


def test_resolve_names_the_region(catalog: Catalog) -> None:
    assert catalog.resolve("A10G", "us-west-2").instance_type == "g5.xlarge"
    assert catalog.resolve("g6.xlarge", "us-east-1").on_demand_usd_per_hour == 0.8048
    with pytest.raises(CatalogQueryError, match="offered in us-east-1, us-west-2"):
        catalog.resolve("a10g", "eu-north-1")
    with pytest.raises(CatalogQueryError, match="listed in us-east-1, us-west-2"):
        catalog.entry("g5.xlarge", "eu-north-1")


def test_shipped_catalog_covers_the_families(catalog: Catalog) -> None:
    families = {e.family for e in catalog.entries}
    assert {"g4dn", "g5", "g6", "g6e", "p3", "p4d", "p4de", "p5"} <= families
    assert any(e.gpu_count == 0 for e in catalog.entries)
    priced = [e for e in catalog.entries if e.on_demand_usd_per_hour is not None]
    assert priced and all(e.price_date for e in priced)
    assert all((e.gpu_count == 0) == (e.gpu_name == "") for e in catalog.entries)
