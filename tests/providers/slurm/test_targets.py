"""Targets from sinfo: partition × GPU type, with what the nodes have and what is free."""

from __future__ import annotations

from pathlib import Path

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.slurm import SLURMProvider
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
        assert a100.hardware == "A100 ×1 (of 2 per node) · 2 CPUs · 4 GiB"
        assert a100.where == "SLURM dev · gpu"
        assert targets["slurm-dev-gpu-t4"].hardware == "T4 ×1 (of 1 per node) · 1 CPU · 2 GiB"
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
