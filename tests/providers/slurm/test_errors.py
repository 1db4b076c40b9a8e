"""What a launch says when SLURM or the login node refuses: one line that names the fix."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_remote_hw.providers.launch_steps import LaunchError, LaunchSteps
from jupyter_remote_hw.providers.slurm import SLURMProvider

from .conftest import our_jobs


async def launch_error(provider: SLURMProvider, target_name: str) -> LaunchError:
    await provider.refresh()
    target = next(t for t in provider.targets() if t.name == target_name)
    steps = LaunchSteps(target.name, "k", provider.log)
    with pytest.raises(LaunchError) as raised:
        await provider.open_machine(target, steps)
    assert our_jobs() == []  # nothing is left queued or running
    return raised.value


async def test_unknown_partition_is_named_with_those_there_are(make: Any) -> None:
    error = await launch_error(make(partitions=["gpu", "nope"]), "slurm-dev-nope-gpu")
    assert error.step == "submit job"
    assert (
        "SLURM cluster dev: sbatch refused the job: partition 'nope' does not exist "
        "(there are: debug, gpu)" in str(error)
    )


async def test_more_gpus_than_a_node_has_is_refused_at_submission(make: Any) -> None:
    error = await launch_error(make(gpus=3), "slurm-dev-gpu-a100")
    assert error.step == "submit job"
    assert "no node of partition 'gpu' can ever hold gpu:a100:3: ask for fewer GPUs" in str(error)


async def test_time_over_the_partition_limit_is_refused_before_submitting(make: Any) -> None:
    error = await launch_error(make(time="30"), "slurm-dev-debug-t4")
    assert error.step == "submit job"
    assert (
        "the time limit 30 is over partition 'debug''s maximum of 5:00: lower the "
        "cluster's 'time'" in str(error)
    )


async def test_an_unreachable_login_node_is_named(make: Any) -> None:
    reachable = make()
    await reachable.refresh()  # the partitions are known from before
    dead = make(login="dead-login")
    dead.ledger = reachable.ledger
    target = next(t for t in dead.targets() if t.name == "slurm-dev-gpu-a100")
    with pytest.raises(LaunchError) as raised:
        await dead.open_machine(target, LaunchSteps(target.name, "k", dead.log))
    error = raised.value
    assert error.step == "connect" and error.status == 502
    assert "SLURM cluster dev: the login node dead-login cannot be reached" in str(error)
    assert "Check that `ssh dead-login` works" in str(error)
    await dead.refresh()
    unusable = dead.usability()
    assert unusable is not None and unusable.reason == "SLURM cluster dev not reachable"
