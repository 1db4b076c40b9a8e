"""What the picker is offered: a job that ended while no server watched it is not offered
to share, and a cluster that cannot be reached marks only its own targets unusable."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.slurm import SLURMProvider
from jupyter_remote_hw.transport import TransportManager

from ...conftest import TEST_TRANSPORT
from ...testhosts import SSHTestHost, free_port
from .conftest import cluster_entry, job_state, open_target, slurm


async def test_a_job_that_ended_unwatched_is_not_offered_to_share(make: Any) -> None:
    provider = make()
    machine = await open_target(provider)
    job_id = machine.allocation.job_id
    await machine.close()  # as when its server stops: the job runs on, unwatched
    await provider.refresh()
    shared = [t for t in provider.targets() if t.name == "slurm-dev-gpu-a100.1"]
    assert shared and f"share job {job_id} (0 kernels" in shared[0].where
    slurm("scancel", job_id)
    for _ in range(100):
        if job_state(job_id) not in ("RUNNING", "COMPLETING"):
            break
        await asyncio.sleep(0.2)
    await provider.refresh()
    assert "slurm-dev-gpu-a100.1" not in [t.name for t in provider.targets()]
    assert provider.ledger is not None
    record = provider.ledger.find_machine(job_id)
    assert record is not None and record.state == "terminated"
    assert provider.ledger.machine_events(record.machine_id)[-1].detail == (
        f"SLURM job {job_id} ended: SLURM no longer lists it"
    )


async def test_an_unreachable_cluster_marks_only_its_own_targets(
    login_host: SSHTestHost, short_tmp: Path, clean_queue: None
) -> None:
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(
        login_host.ssh_config.read_text() + login_host.config_block("dead-login", Port=free_port())
    )
    ledger = Ledger(short_tmp / "ledger.sqlite3")
    transport = TransportManager(ssh_config_files=[str(ssh_config)], **TEST_TRANSPORT)
    clusters = {
        "dev": cluster_entry(login_host.alias, short_tmp / "c"),
        "away": cluster_entry("dead-login", short_tmp / "c"),
    }
    provider = SLURMProvider(transport=transport, ledger=ledger, clusters=clusters)
    try:
        await provider.refresh("dev")
        # "away" answered once, from another process on this ledger: its partitions
        # are known, but its login node does not answer now.
        cache = short_tmp / "slurm"
        shutil.copy(cache / "dev.sinfo", cache / "away.sinfo")
        await provider.refresh()
        names = [t.name for t in provider.targets()]
        assert "slurm-dev-gpu-a100" in names and "slurm-away-gpu-a100" in names
        assert provider.target_usability("slurm-dev-gpu-a100") is None
        away = provider.target_usability("slurm-away-gpu-a100")
        assert away is not None and away.reason == "SLURM cluster away not reachable"
        assert away.hint.startswith("check that `ssh dead-login` works")
        # The provider can start machines: one of its clusters answers.
        assert provider.usability() is None
        # Once no cluster answers, the provider says so, naming each.
        provider.clusters = {**clusters, "dev": cluster_entry("dead-login", short_tmp / "c")}
        await provider.refresh()
        both = provider.usability()
        assert both is not None and both.reason == "SLURM clusters dev, away not reachable"
    finally:
        await transport.close_all()
        ledger.close()
