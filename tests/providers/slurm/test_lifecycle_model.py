"""The model-based lifecycle test (tests/lifecycle/test_model.py) with a SLURM cluster
among the targets: kernels on the dev cluster's A100 partition beside local and SSH
ones, switched between all three, hibernated, and their jobs ended from outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from ...lifecycle.test_model import (
    BUDGET,
    Cluster,
    World,
    lifecycle_host,  # noqa: F401 (fixture)
    lifecycle_root,  # noqa: F401 (fixture)
    run_lifecycles,
)
from ...testhosts import SSHTestHost
from .conftest import A100_NAME, CLUSTER, cluster_entry, our_jobs, slurm


def _end_job(job_id: str) -> None:
    done = slurm("scancel", job_id)
    assert done.returncode == 0, done.stderr


@pytest.mark.timeout(int(BUDGET) + 900)
def test_random_lifecycles_with_a_slurm_cluster_keep_every_promise(
    lifecycle_host: SSHTestHost,
    lifecycle_root: Path,
    login_host: SSHTestHost,
    clean_queue: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    cluster = Cluster(
        target=A100_NAME,
        settings={
            "clusters": {CLUSTER: cluster_entry(login_host.alias, lifecycle_root / "c")},
            "queue_poll": 0.5,
            "watch_interval": 1.0,
        },
        ssh_config=login_host.ssh_config,
        end_job=_end_job,
        jobs=our_jobs,
    )
    run_lifecycles(World(lifecycle_root, lifecycle_host, cluster))
