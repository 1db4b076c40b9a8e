"""A real SLURM cluster (``../shared/slurm/up.sh`` beside the checkout) behind a loopback
login node: an sshd test host on this machine, where SLURM's commands work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ...conftest import TEST_TRANSPORT
from ...testhosts import SSHTestHost, is_root, loopback_host

#: The dev cluster's scripts, beside the checkout.
SLURM_DEV = Path(__file__).resolve().parents[4].parent / "shared" / "slurm"
STATE = Path(os.environ.get("SLURM_DEV_DIR", "/tmp/slurm-dev"))
SLURM_CONF = str(STATE / "etc" / "slurm.conf")
CLUSTER = "dev"
#: Names of the jobs tests submit themselves (to fill a node).
FILLER = "jrhw-test-filler"


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The dev cluster, up (once per session); its SLURM_CONF."""
    script = SLURM_DEV / "up.sh"
    if not script.exists():
        pytest.skip(f"SLURM cannot be installed here: {script} is missing")
    if not is_root():
        pytest.skip("SLURM cannot be installed here: ../shared/slurm/up.sh needs root")
    done = subprocess.run([str(script)], check=False, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0 or shutil.which("sbatch") is None:
        pytest.skip(f"SLURM cannot be installed here: up.sh failed: {done.stderr[-500:]}")
    return SLURM_CONF


def slurm(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run a SLURM command here (the login node is this machine)."""
    return subprocess.run(list(argv), check=False, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "SLURM_CONF": SLURM_CONF})


def our_jobs() -> list[str]:
    """Ids of every job the tests (or the provider they drive) submitted, live or not."""
    out = slurm("squeue", "-h", "-o", "%i|%j").stdout
    return [line.split("|")[0] for line in out.splitlines()
            if line.split("|")[-1] in ("jupyter-remote-hw", "jupyter-remote-hw-agent", FILLER)]


def cancel_ours() -> None:
    """Cancel every job :func:`our_jobs` lists."""
    jobs = our_jobs()
    if jobs:
        slurm("scancel", *jobs)


@pytest.fixture
def clean_queue(slurm_cluster: str) -> Iterator[None]:
    """No job of ours before or after the test."""
    cancel_ours()
    yield
    cancel_ours()


@pytest.fixture(scope="session")
def login_host(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: str
               ) -> Iterator[SSHTestHost]:
    """The cluster's login node: a loopback sshd."""
    with loopback_host(tmp_path_factory.mktemp("login") / "host", alias="slurm-login") as host:
        yield host


def cluster_entry(login: str, root: Path, **extra: Any) -> dict[str, Any]:
    """One cluster's entry for ``c.SLURMProvider.clusters``."""
    return {"login": login, "env": {"SLURM_CONF": SLURM_CONF}, "python": sys.executable,
            "root": str(root), "time": "10", **extra}


def server_config(ssh_config: Path, state: Path, clusters: dict[str, Any],
                  **extra: Any) -> dict[str, Any]:
    """A Jupyter server's config offering ``clusters``."""
    config: dict[str, Any] = {
        "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
        "TransportManager": {"ssh_config_files": [str(ssh_config)], **TEST_TRANSPORT},
        "SSHProvider": {"include_ssh_config": False},
        "LocalProvider": {"state_dir": str(state / "local")},
        "SLURMProvider": {"clusters": clusters, "queue_poll": 0.5, "watch_interval": 1.0},
        "RemoteHWProvisioner": {"launch_timeout": 90.0, "poll_timeout": 3.0},
    }
    for section, values in extra.items():
        config.setdefault(section, {}).update(values)
    return config


__all__ = ["CLUSTER", "FILLER", "cluster_entry", "json", "our_jobs", "server_config", "slurm"]
