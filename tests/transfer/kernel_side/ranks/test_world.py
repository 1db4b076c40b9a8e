"""The ranks of an allocation, read from ``scontrol show job -d``."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.transfer.kernel_side.ranks.world import (
    Rank,
    World,
    WorldError,
    parse_nodes,
    ranks_of,
    read_world,
)

#: ``scontrol show job -d`` of a job of two nodes with two and one GPUs.
SHOWN = """JobId=12 JobName=hold
   NumNodes=2 NumCPUs=2 NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:*
   JOB_GRES=gpu:2
     Nodes=gpu1 CPU_IDs=0 Mem=1024 GRES=gpu:a100:2(IDX:0-1)
     Nodes=gpu[2-3] CPU_IDs=0 Mem=1024 GRES=gpu:t4:1(IDX:0)
   NodeList=gpu[1-3]
"""


def test_nodes_and_their_gpus_are_read_from_the_job() -> None:
    assert parse_nodes(SHOWN) == [("gpu1", 2), ("gpu[2-3]", 1)]
    assert parse_nodes("     Nodes=cpu1 CPU_IDs=0-3 Mem=2048 GRES=\n") == [("cpu1", 0)]


def test_one_rank_per_gpu_or_per_node_without_gpus() -> None:
    ranks = ranks_of([("gpu1", 2), ("gpu2", 1), ("cpu1", 0)])
    assert ranks == [
        Rank(0, "gpu1", 0, 0, 2),
        Rank(1, "gpu1", 0, 1, 2),
        Rank(2, "gpu2", 1, 0, 1),
        Rank(3, "cpu1", 2, 0, 1),
    ]
    world = World("12", ranks, "10.0.0.5")
    assert world.nodes == ["gpu1", "gpu2", "cpu1"]
    assert world.environment(ranks[1], 29600) == {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "0",
        "NODE_RANK": "0",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29600",
    }


def test_a_kernel_outside_an_allocation_is_told_what_to_pick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(WorldError, match="does not run in a SLURM allocation"):
        read_world()
