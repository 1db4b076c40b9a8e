"""``%%ranks`` on one node with two GPUs: one rank per GPU, each seeing its own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.machines import MachineManager

from ...testhosts import SSHTestHost
from .conftest import A100, CLUSTER, cluster_entry, server_config


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    entry = cluster_entry(login_host.alias, short_tmp / "c", gpus=2)
    return server_config(login_host.ssh_config, short_tmp, {CLUSTER: entry})


async def test_each_rank_of_a_node_sees_its_own_gpu(kernels: Any, manager: MachineManager) -> None:
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])")
    assert ran.stdout.strip() == "0,1"  # the notebook's kernel sees the job's two
    ran = await kc.execute(
        "%%ranks\nimport os\nprint(os.environ['LOCAL_RANK'], os.environ['LOCAL_WORLD_SIZE'], "
        "os.environ['CUDA_VISIBLE_DEVICES'], os.environ['SLURMD_NODENAME'])"
    )
    assert ran.status == "ok", ran.stderr
    assert "starting 2 ranks on gpu1" in ran.stdout
    assert sorted(re.findall(r"^\[rank (\d)\] (.*)$", ran.stdout, re.MULTILINE)) == [
        ("0", "0 2 0 gpu1"),
        ("1", "1 2 1 gpu1"),
    ]
