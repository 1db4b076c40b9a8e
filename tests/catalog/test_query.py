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
    # Listed where no price is known: it resolves, and says its price is unknown.
    assert catalog.resolve("a10g", "eu-north-1").on_demand_usd_per_hour is None
    with pytest.raises(CatalogQueryError, match="offered in ap-south-2, us-east-2"):
        catalog.resolve("trainium2:16", "eu-west-1")
    with pytest.raises(CatalogQueryError, match="listed in ap-south-2, us-east-2"):
        catalog.entry("trn2.48xlarge", "eu-west-1")


#: The commercial AWS regions the shipped catalog covers.
REGIONS = {
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "ca-west-1",
    "sa-east-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-central-2",
    "eu-north-1", "eu-south-1", "eu-south-2", "ap-south-1", "ap-south-2", "ap-northeast-1",
    "ap-northeast-2", "ap-northeast-3", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3",
    "ap-southeast-4", "ap-southeast-5", "ap-east-1", "me-south-1", "me-central-1",
    "af-south-1", "il-central-1",
}  # fmt: skip


def test_shipped_catalog_covers_the_families_and_regions(catalog: Catalog) -> None:
    families = {e.family for e in catalog.entries}
    assert {"g4dn", "g5", "g6", "g6e", "p3", "p4d", "p4de", "p5"} <= families
    assert {"trn1", "trn1n", "trn2", "inf2", "dl1"} <= families
    assert set(catalog.regions) == REGIONS
    assert any(e.gpu_count == 0 for e in catalog.entries)
    assert all((e.gpu_count == 0) == (e.gpu_name == "") for e in catalog.entries)
    assert all((e.accelerator_count == 0) == (e.accelerator_name == "") for e in catalog.entries)
    assert not any(e.gpu_count and e.accelerator_count for e in catalog.entries)
    # Every family runs in more than the two regions the catalog once had.
    assert len({e.region for e in catalog.entries if e.family == "g5"}) > 10
    assert len({e.region for e in catalog.entries if e.family == "inf2"}) > 10


def test_every_price_has_the_date_it_was_read_and_none_is_made_up(catalog: Catalog) -> None:
    for entry in catalog.entries:
        assert bool(entry.price_date) == (entry.on_demand_usd_per_hour is not None), entry
        assert bool(entry.spot_price_date) == (entry.spot_usd_per_hour is not None), entry
    priced_regions = {e.region for e in catalog.entries if e.on_demand_usd_per_hour is not None}
    assert priced_regions == {"us-east-1", "us-west-2"}
    # No list price of the accelerator families was read from the Pricing API yet.
    assert not [e for e in catalog.entries if e.accelerator_count and e.price() is not None]


@pytest.mark.parametrize(
    ("instance_type", "name", "count", "each_gib"),
    [
        ("trn1.2xlarge", "Trainium", 1, 32.0),
        ("trn1.32xlarge", "Trainium", 16, 32.0),
        ("trn1n.32xlarge", "Trainium", 16, 32.0),
        ("trn2.48xlarge", "Trainium2", 16, 96.0),
        ("inf2.xlarge", "Inferentia2", 1, 32.0),
        ("inf2.8xlarge", "Inferentia2", 1, 32.0),
        ("inf2.24xlarge", "Inferentia2", 6, 32.0),
        ("inf2.48xlarge", "Inferentia2", 12, 32.0),
        ("dl1.24xlarge", "Gaudi", 8, 32.0),
    ],
)
def test_accelerators_beyond_gpus(
    catalog: Catalog, instance_type: str, name: str, count: int, each_gib: float
) -> None:
    rows = [e for e in catalog.entries if e.instance_type == instance_type]
    assert rows
    for entry in rows:
        assert (entry.accelerator_name, entry.accelerator_count) == (name, count)
        assert entry.accelerator_memory_gib == each_gib
        assert entry.accelerator_memory_total_gib == count * each_gib
        assert entry.gpu_count == 0 and entry.gpu_name == ""
    one = f"{name} {each_gib:g} GiB"
    assert rows[0].hardware == (one if count == 1 else f"{count} × {one}")


def test_accelerator_queries(catalog: Catalog) -> None:
    trainium = catalog.search("trainium")
    assert {e.family for e in trainium} == {"trn1", "trn1n", "trn2"}  # every generation
    assert {e.family for e in catalog.search("trainium2")} == {"trn2"}
    assert {e.family for e in catalog.search("Inferentia")} == {"inf2"}
    assert {e.instance_type for e in catalog.search("inf2")} == {
        "inf2.xlarge",
        "inf2.8xlarge",
        "inf2.24xlarge",
        "inf2.48xlarge",
    }
    assert types(catalog.search("inferentia2:6 region=us-east-1")) == ["inf2.24xlarge"]
    assert set(types(catalog.search("trainium:16 region=us-east-1"))) == {
        "trn1.32xlarge",
        "trn1n.32xlarge",
    }
    assert {e.family for e in catalog.search("gaudi")} == {"dl1"}
    assert {e.family for e in catalog.search("neuron")} == {"trn1", "trn1n", "trn2", "inf2"}
    assert {e.family for e in catalog.search("accelerator")} == {
        "trn1",
        "trn1n",
        "trn2",
        "inf2",
        "dl1",
    }
    # Neither `gpu` nor `cpu` is an accelerator that is not a GPU.
    assert not [e for e in catalog.search("gpu") if e.accelerator_count]
    assert not [e for e in catalog.search("cpu") if e.accelerator_count or e.gpu_count]


def test_accelerator_memory_is_of_one_accelerator_like_gpu_memory(catalog: Catalog) -> None:
    at_least_32 = catalog.search("accelerator_mem>=32")
    assert {e.family for e in at_least_32} == {"trn1", "trn1n", "trn2", "inf2", "dl1"}
    # trn2's chips have 96 GiB each; inf2.48xlarge's 384 GiB are twelve chips of 32.
    assert {e.family for e in catalog.search("accelerator_mem>=64")} == {"trn2"}
    total = {e.instance_type for e in catalog.search("accelerator_mem_total>=300")}
    assert "inf2.48xlarge" in total and "inf2.24xlarge" not in total
    assert {e.instance_type for e in catalog.search("accelerators>=12 accel_mem<64")} == {
        "trn1.32xlarge",
        "trn1n.32xlarge",
        "inf2.48xlarge",
    }
    # GPUs have gpu_mem; accelerator_mem is only of the accelerators that are not GPUs.
    assert not [e for e in at_least_32 if e.gpu_count]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("trainum", "unknown hardware 'trainum'.*did you mean 'Trainium'"),
        ("accelerater_mem>=32", "unknown field 'accelerater_mem'.*did you mean 'accelerator_mem'"),
        ("region=eu-wset-1", "unknown region 'eu-wset-1'.*did you mean 'eu-west-1'"),
    ],
)
def test_bad_terms_are_named(catalog: Catalog, query: str, message: str) -> None:
    with pytest.raises(CatalogQueryError, match=message) as caught:
        catalog.search(query)
    assert "\n" not in str(caught.value)
