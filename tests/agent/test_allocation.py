"""What the agent says of the SLURM job it runs in, from SLURM's own words."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.agent.allocation import (
    allocation_label,
    gpu_indexes,
    parse_job_gres,
    slurm_allocation,
)

SHOW_JOB = """JobId=200 JobName=jupyter-remote-hw
   NodeList=gpu1
   TRES=cpu=1,mem=1G,node=1,billing=1
   JOB_GRES=gpu:a100:1
     Nodes=gpu1 CPU_IDs=0 Mem=1024 GRES=gpu:a100:1(IDX:0)
   TresPerNode=gres:gpu:a100:1
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SHOW_JOB, {"a100": 1}),
        ("JOB_GRES=gpu:a100:2,gpu:t4:1", {"a100": 2, "t4": 1}),
        ("JOB_GRES=gpu:3", {"gpu": 3}),
        ("JOB_GRES=(null)", {}),
        ("JobId=1 NodeList=gpu2", {}),
    ],
)
def test_gpu_types_and_counts_come_from_the_jobs_gres(text: str, expected: dict[str, int]) -> None:
    assert parse_job_gres(text) == expected


def test_the_steps_gpus_are_those_slurm_made_visible() -> None:
    assert gpu_indexes({"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "5"}) == ["0", "1"]
    assert gpu_indexes({"SLURM_STEP_GPUS": "1"}) == ["1"]
    assert gpu_indexes({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}) == []


async def test_outside_a_job_there_is_no_allocation() -> None:
    assert await slurm_allocation({"HOME": "/root"}) is None


async def test_a_job_without_scontrol_still_names_its_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no scontrol to ask
    found = await slurm_allocation(
        {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "gpu2", "CUDA_VISIBLE_DEVICES": "0"}
    )
    assert found is not None
    assert (found["job_id"], found["node"], found["gpu_indexes"]) == ("7", "gpu2", ["0"])
    assert allocation_label(found) == "1 × GPU (SLURM job 7)"
    assert allocation_label({**found, "gpus": {"t4": 1}}) == "1 × t4 (SLURM job 7)"
