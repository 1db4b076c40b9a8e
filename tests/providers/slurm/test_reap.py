"""``jupyter remote-hw reap`` on a setup of SLURM clusters only, after the Jupyter server
and the kernel in its job were killed: the cluster is asked whether the kernel lives,
and AWS, which is not set up, is skipped with a note."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.providers.launch_steps import LaunchSteps
from jupyter_remote_hw.providers.slurm.submission import submit

from ...cli.conftest import no_credentials  # noqa: F401 (fixture)
from ...serverprocess import Server, start_server
from ...testhosts import SSHTestHost
from .conftest import dev_config, job_state, run_on_a100


@pytest.fixture
def config_file(short_tmp: Path, login_host: SSHTestHost, clean_queue: None) -> Path:
    """A SLURM-only configuration, for the server and the CLI alike."""
    config = dev_config(
        login_host, short_tmp, MachineManager={"ledger_path": str(short_tmp / "ledger.sqlite3")}
    )
    (short_tmp / "config").mkdir()
    path = short_tmp / "config" / "jupyter_server_config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def server(config_file: Path, short_tmp: Path) -> Iterator[Server]:
    dirs = {"config": config_file.parent}
    for name in ("data", "runtime", "nb"):
        dirs[name] = short_tmp / name
        dirs[name].mkdir()
    started = start_server(dirs, short_tmp / "server.log")
    yield started
    with contextlib.suppress(ProcessLookupError):
        started.process.kill()
    started.process.wait(10)
    AsyncHTTPClient().close()


def reap(config_file: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(config_file), "reap", "--yes"], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("no_credentials")
async def test_reap_ends_the_job_whose_kernel_was_killed_with_its_server(
    server: Server, config_file: Path
) -> None:
    await server.ready()
    _, printed = await run_on_a100(
        server, "import os; print(os.getpid(), os.environ['SLURM_JOB_ID'])"
    )
    pid, job_id = printed.split()
    # While the kernel lives, reap leaves its job, also with its server gone.
    server.process.send_signal(signal.SIGKILL)
    await asyncio.to_thread(server.process.wait, 10)
    code, out, err = await asyncio.to_thread(reap, config_file)
    assert code == 0, err
    assert "nothing to reap on SLURM" in out and job_state(job_id) == "RUNNING"
    # The kernel process in the job is killed: its ledger row stays, the job goes.
    os.kill(int(pid), signal.SIGKILL)
    code, out, err = await asyncio.to_thread(reap, config_file)
    assert code == 0, err
    assert f"cancelled SLURM jobs {job_id}" in out.splitlines()
    assert job_state(job_id) in ("CANCELLED", "COMPLETING", "")
    # AWS has no credentials and nothing of this setup asks for it: a note, not an error.
    assert out.splitlines()[-1] == (
        "AWS: skipped, it is not set up here (no credentials — set AWS_PROFILE or run "
        "`aws configure`)"
    )
    assert "Looking for instances" not in err


@pytest.mark.usefixtures("no_credentials")
def test_reap_with_aws_not_set_up_and_no_cluster_job_exits_0(config_file: Path) -> None:
    code, out, err = reap(config_file)
    assert code == 0, err
    assert out.splitlines() == [
        "nothing to reap on SLURM: no job of this ledger is left without a live kernel",
        (
            "AWS: skipped, it is not set up here (no credentials — set AWS_PROFILE or run "
            "`aws configure`)"
        ),
    ]
    assert err == ""


async def test_reap_leaves_a_job_whose_agent_a_launch_is_starting(make: Any) -> None:
    provider = make()
    await provider.refresh()
    target = next(t for t in provider.targets() if t.name == "slurm-dev-gpu-a100")
    cluster, offer = provider.find_target(target.name) or ("", None)
    assert offer is not None and provider.transport is not None
    shell = provider.shell(cluster, await provider.connect_login(cluster))
    # The job runs, and its agent is not there yet: a launch of a kernel the ledger
    # knows is about to start it.
    allocation = await submit(
        provider, cluster, offer, target, shell, LaunchSteps("t", "k", provider.log)
    )
    assert await provider.reap({target.name}, dry_run=True) == ([], [])
    # No kernel of the ledger waits for it: it goes.
    assert (await provider.reap(set()))[0] == [allocation.job_id]
    assert job_state(allocation.job_id) in ("CANCELLED", "COMPLETING", "")
