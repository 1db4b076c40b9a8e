"""Paths on the cluster that we run from or write to must be ours: a symbolic link or
another user's directory on the way to the agent's bundle or the job's directory
refuses the launch, naming the path; and a cluster's ``env`` names only shell
variables."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_remote_hw.agent_client import agent_zipapp
from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.launch_steps import LaunchError, LaunchSteps
from jupyter_remote_hw.providers.slurm import SLURMProvider
from jupyter_remote_hw.providers.slurm.queue import SlurmShell

from .conftest import our_jobs

#: Someone else on the cluster.
NOBODY = 65534


async def launch_error(provider: SLURMProvider) -> LaunchError:
    await provider.refresh()
    target = next(t for t in provider.targets() if t.name == "slurm-dev-gpu-a100")
    with pytest.raises(LaunchError) as raised:
        await provider.open_machine(target, LaunchSteps(target.name, "k", provider.log))
    for _ in range(100):  # the job is cancelled (scancel takes a moment to end it)
        if our_jobs() == []:
            break
        await asyncio.sleep(0.1)
    assert our_jobs() == []  # nothing is left queued or running
    return raised.value


def root_of(provider: SLURMProvider) -> Path:
    root = Path(str(provider.clusters["dev"]["root"]))
    root.mkdir(parents=True, exist_ok=True)
    return root


async def test_a_linked_agent_cache_is_refused(make: Any) -> None:
    provider = make()
    root = root_of(provider)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (root / ".cache").mkdir(mode=0o700)
    (root / ".cache" / "jupyter-remote-hw").symlink_to(elsewhere)
    error = await launch_error(provider)
    assert error.step == "prepare host" and error.status == 422
    assert (
        f"refused {root}/.cache/jupyter-remote-hw: it is a symbolic link or belongs to "
        "another user" in str(error)
    )
    assert list(elsewhere.iterdir()) == []  # nothing was written through the link


async def test_a_linked_agent_bundle_is_refused_though_its_hash_matches(make: Any) -> None:
    provider = make()
    root = root_of(provider)
    name, data = agent_zipapp()
    cache = root / ".cache" / "jupyter-remote-hw"
    cache.mkdir(parents=True, mode=0o700)
    (root / "copy.pyz").write_bytes(data)
    (cache / name).symlink_to(root / "copy.pyz")
    error = await launch_error(provider)
    assert error.step == "prepare host" and error.status == 422
    assert f"refused {cache / name}: it is a symbolic link" in str(error)


async def test_a_job_directory_under_another_users_directory_is_refused(make: Any) -> None:
    provider = make()
    root = root_of(provider)
    foreign = root / ".local" / "state"
    foreign.mkdir(parents=True)
    os.chown(foreign, NOBODY, NOBODY)
    error = await launch_error(provider)
    assert error.step == "submit job" and error.status == 422
    assert f"refused {foreign}: it is a symbolic link or belongs to another user" in str(error)
    assert not (foreign / "jupyter-remote-hw").exists()
    shutil.rmtree(foreign)


def test_env_keys_must_be_shell_variable_names(short_tmp: Path) -> None:
    entry = {"login": "dev-login", "env": {"SLURM_CONF": "/x", "A;touch /tmp/owned": "1"}}
    with pytest.raises(TraitError) as raised:
        SLURMProvider(ledger=Ledger(short_tmp / "ledger.sqlite3"), clusters={"dev": entry})
    assert str(raised.value) == (
        "SLURMProvider.clusters: 'dev' has 'env' key 'A;touch /tmp/owned', which is not a "
        "shell variable name: use letters, digits and '_', not starting with a digit"
    )
    with pytest.raises(TraitError, match="'env' key '1X'"):
        SLURMProvider(clusters={"dev": {"login": "l", "env": {"1X": "1"}}})
    # A shell made some other way refuses it too, before any command is written.
    with pytest.raises(ValueError, match="'env' key 'A B'"):
        SlurmShell("dev", None, {"A B": "1"})  # type: ignore[arg-type]
    assert SLURMProvider(clusters={"dev": {"login": "l", "env": {"_A1": "x y"}}}).clusters
