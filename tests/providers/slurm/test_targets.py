"""Targets from sinfo: partition × GPU type, with what the nodes have and what is free."""

from __future__ import annotations

from pathlib import Path

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.slurm import SLURMProvider
from jupyter_remote_hw.providers.slurm.targets import (
    DEFAULTS_COMMAND,
    MemoryDefault,
    Offer,
    parse_memory_default,
)
from jupyter_remote_hw.transport import TransportManager

from ...conftest import TEST_TRANSPORT
from ...testhosts import SSHTestHost
from .conftest import cluster_entry, fill_t4


def provider(login: SSHTestHost, tmp_path: Path, **entry: object) -> SLURMProvider:
    transport = TransportManager(ssh_config_files=[str(login.ssh_config)], **TEST_TRANSPORT)
    return SLURMProvider(
        transport=transport,
        ledger=Ledger(tmp_path / "ledger.sqlite3"),
        clusters={"dev": cluster_entry(login.alias, tmp_path, **entry)},
    )


async def test_targets_are_partitions_by_gpu_type_with_availability(
    login_host: SSHTestHost,
    tmp_path: Path,
    clean_queue: None,
) -> None:
    slurm_provider = provider(login_host, tmp_path)
    try:
        # The first listing reads sinfo at once (a kernelspec lookup cannot wait).
        targets = {t.name: t for t in slurm_provider.targets()}
        assert sorted(targets) == [
            "slurm-dev-debug-a100",
            "slurm-dev-debug-t4",
            "slurm-dev-gpu-a100",
            "slurm-dev-gpu-t4",
        ]
        a100 = targets["slurm-dev-gpu-a100"]
        assert a100.provider == "slurm" and a100.host == login_host.alias
        # What one kernel's job gets, and after "of" what its node has: one CPU (the
        # entry asks for none) and the cluster's DefMemPerCPU of 1024 MB for it.
        assert a100.hardware == "A100 ×1 of 2 · 1 of 2 CPUs · 1 of 4 GiB"
        assert a100.where == "SLURM dev · gpu"
        assert targets["slurm-dev-gpu-t4"].hardware == "T4 ×1 of 1 · 1 CPU · 1 of 2 GiB"
        assert slurm_provider.availability("slurm-dev-gpu-t4") == "1 of 1 GPUs free on 1 node"

        # A job on the T4 shows in the availability once sinfo is read again.
        await fill_t4()
        for _ in range(50):
            await slurm_provider.refresh()
            if slurm_provider.availability("slurm-dev-gpu-t4") != "1 of 1 GPUs free on 1 node":
                break
        assert slurm_provider.availability("slurm-dev-gpu-t4") == "0 of 1 GPUs free on 1 node"
        assert slurm_provider.availability("slurm-dev-gpu-a100") == "2 of 2 GPUs free on 1 node"
        assert slurm_provider.usability() is None
    finally:
        await slurm_provider.transport.close_all()
        slurm_provider.ledger.close()


async def test_partitions_filter_and_a_restart_keeps_the_last_reading(
    login_host: SSHTestHost,
    tmp_path: Path,
) -> None:
    first = provider(login_host, tmp_path, partitions=["debug", "nope"])
    try:
        await first.refresh()
        assert [t.name for t in first.targets()] == [
            "slurm-dev-debug-a100",
            "slurm-dev-debug-t4",
            "slurm-dev-nope-gpu",
        ]
    finally:
        await first.transport.close_all()
        first.ledger.close()
    # Another process lists the same targets at once, before it asks sinfo itself.
    second = provider(login_host, tmp_path, partitions=["debug"])
    try:
        assert [t.name for t in second.targets()] == ["slurm-dev-debug-a100", "slurm-dev-debug-t4"]
    finally:
        await second.transport.close_all()
        second.ledger.close()


def test_memory_of_an_allocation_in_gib() -> None:
    from jupyter_remote_hw.providers.slurm.targets import memory_gib

    assert [memory_gib(t) for t in ("16G", "512M", "2048", "1T", "16g", "lots")] == [
        16.0,
        0.5,
        2.0,
        1024.0,
        16.0,
        None,
    ]


def test_the_memory_a_job_gets_is_what_it_asks_for_else_the_clusters_default() -> None:
    config = "DefMemPerCPU            = 1024\nDefMemPerNode           = UNLIMITED\n"
    assert parse_memory_default(config) == MemoryDefault(per_cpu_mb=1024)
    assert parse_memory_default("DefMemPerNode = 3072\n") == MemoryDefault(per_node_mb=3072)
    assert parse_memory_default("a|b|c\n") == MemoryDefault()  # sinfo's lines alone
    assert "|| true" in DEFAULTS_COMMAND  # a cluster without a default fails no reading

    node = {"partition": "gpu", "gpu_type": "a100", "cpus": 8, "memory_mb": 65536}
    per_cpu = Offer(**node, gpus_per_node=4, default_memory=MemoryDefault(per_cpu_mb=4096))
    assert per_cpu.memory_gib(2, None) == 8.0
    assert per_cpu.memory_gib(2, "24G") == 24.0  # the entry's --mem wins
    assert per_cpu.memory_gib(32, None) == 64.0  # never more than the node has
    per_node = Offer(**node, gpus_per_node=4, default_memory=MemoryDefault(per_node_mb=16384))
    assert per_node.memory_gib(2, None) == 16.0
    unlimited = Offer(**node, gpus_per_node=4)
    assert unlimited.memory_gib(2, None) == 64.0  # not limited: the node's
    assert Offer("gpu", None).memory_gib(1, None) is None  # nothing known of the node
    assert per_cpu.label(1, 2, 8.0) == "A100 ×1 of 4 · 2 of 8 CPUs · 8 of 64 GiB"
    assert unlimited.label(4, 8, 64.0) == "A100 ×4 of 4 · 8 CPUs · 64 GiB"


async def test_node_counts_offer_allocations_of_several_nodes(
    login_host: SSHTestHost, tmp_path: Path, clean_queue: None
) -> None:
    slurm_provider = provider(login_host, tmp_path, nodes=[2, 3], partitions=["gpu"])
    try:
        await slurm_provider.refresh()
        targets = {t.name: t for t in slurm_provider.targets()}
        # Each GPU type has one node: two nodes come only from both types together;
        # three, nowhere.
        assert sorted(targets) == [
            "slurm-dev-gpu-a100",
            "slurm-dev-gpu-gpu-2x1",
            "slurm-dev-gpu-t4",
        ]
        both = targets["slurm-dev-gpu-gpu-2x1"]
        assert both.hardware == "2 nodes × A100/T4 ×1 of 1 · 1 CPU · 1 of 2 GiB"
        assert slurm_provider.availability(both.name) == (
            "2 of 2 nodes free now; an allocation takes 2"
        )
        specs = slurm_provider.specs(both.name)
        assert specs is not None
        assert (specs["gpu"], specs["gpu_count"], specs["vcpus"]) == ("A100/T4", 2, 2)
    finally:
        await slurm_provider.transport.close_all()
        slurm_provider.ledger.close()
