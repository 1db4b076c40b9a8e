"""How SLURM allocations end: the time limit, reaping, and a server restart in between."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient

from jupyter_remote_hw.providers.slurm.submission import HOLDER_SCRIPT

from ...serverprocess import Server
from ...serverprocess import start_server as start_server_process
from ...testhosts import SSHTestHost
from .conftest import (
    A100_NAME,
    CLUSTER,
    FILLER,
    SLURM_CONF,
    cluster_entry,
    dead_answers,
    dev_config,
    fill_t4,
    job_state,
    open_target,
    run_on_a100,
    server_config,
    slurm,
)


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    # One-minute jobs, warned 50 s before their end.
    return server_config(
        login_host.ssh_config,
        short_tmp,
        {
            CLUSTER: cluster_entry(
                login_host.alias, short_tmp / "c", time="1", warn=50, partitions=["debug"]
            )
        },
    )


@pytest.mark.timeout(200)
async def test_time_limit_kills_the_kernel_with_slurms_reason(
    jp_server_config: dict[str, Any],
    kernels: Any,
    manager: Any,
) -> None:
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    kernel_id = await kernels.start("remote-hw-slurm-dev-debug-a100")
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")
    job_id = ran.stdout.strip()
    began = time.monotonic()
    died: list[dict[str, Any]] = []
    while not died and time.monotonic() - began < 150:
        await asyncio.sleep(1)
        died = [e for e in events if e["step"] == "kernel died"]
    (death,) = died
    assert death["kernel_id"] == kernel_id and death["state"] == "failed"
    assert death["detail"] == (f"SLURM job {job_id} ended: TIMEOUT (it reached its time limit)")
    assert job_state(job_id) == "TIMEOUT"
    # The user was told before the end: when SLURM's early warning reached the holder
    # job, or when the queue said the time left was under `warn`, whichever came first
    # (SLURM's signal may come a minute late, or not before the end on a loaded machine).
    notices = [e for e in events if e["step"] == "time limit"]
    assert len(notices) == 1 and events.index(notices[0]) < events.index(death)
    # The notice names the kernel, so that its notebook shows it.
    assert notices[0]["target"] == "slurm-dev-debug-a100"
    assert notices[0]["kernel_id"] == kernel_id
    assert notices[0]["detail"].startswith(f"SLURM job {job_id} ends in ")
    assert notices[0]["detail"].endswith(
        " s (its time limit): save your work; the kernel ends with it"
    )
    # The kernel is dead in every client's eyes: its websocket said so, a cell gets an
    # error with the reason at once, Jupyter lists it dead with the reason, and
    # jupyter_client's restarter does not restart it (into a new allocation or not).
    sent = time.monotonic()
    msg_id = await kc.send("execute_request", {"code": "x = 1", "silent": False})
    dead, replies, statuses = await dead_answers(kc, [msg_id], timeout=5)
    assert dead and "restarting" not in statuses and time.monotonic() - sent < 5
    assert replies[msg_id]["ename"] == "KernelDead"
    assert death["detail"] in replies[msg_id]["evalue"]
    model = await kernels.model(kernel_id)
    assert model["execution_state"] == "dead" and model["reason"] == death["detail"]
    await asyncio.sleep(7)  # two of the restarter's checks
    assert not [e for e in events if e["step"] == "restart kernel"]
    assert (await kernels.model(kernel_id))["execution_state"] == "dead"
    submitted = [e for e in events if e["step"] == "submit job" and e["state"] == "done"]
    assert len(submitted) == 1  # no second job was submitted
    record = manager.ledger.find_machine(job_id)
    assert (
        record.state == "terminated"
        and "TIMEOUT" in manager.ledger.machine_events(record.machine_id)[-1].detail
    )


async def test_reap_asks_the_agent_in_the_job_whether_its_kernel_lives(make: Any) -> None:
    provider = make()
    machine = await open_target(provider)
    held = machine.allocation.job_id
    try:
        client = await machine.agent()
        kernel = await client.call("start_kernel")
        # A job with our tag that this ledger did not start (another server's)...
        root = str(provider.clusters["dev"]["root"])
        stray = slurm(
            "sbatch", "--parsable", "-J", "jupyter-remote-hw", "-p", "gpu", "-t", "5",
            "-w", "gpu1", "--comment=jupyter-remote-hw:s-000000000000", "-o", "/dev/null",
            "-D", root, "--wrap", "sleep 300",
        ).stdout.strip()  # fmt: skip
        # ... and a job that is not ours at all: neither is touched.
        other = slurm(
            "sbatch", "--parsable", "-J", FILLER, "-p", "gpu", "-t", "5", "-w", "gpu1",
            "-o", "/dev/null", "--wrap", "sleep 300",
        ).stdout.strip()  # fmt: skip
        cancelled, unknown = await provider.reap({A100_NAME})
        assert cancelled == [] and stray in unknown
        assert job_state(held) == "RUNNING" and job_state(other) in ("RUNNING", "PENDING")
        assert job_state(stray) in ("RUNNING", "PENDING")
        # The cluster, not the ledger, says whether the kernel lives: a ledger that knows
        # no kernel on the target (its rows lost) does not end a job whose kernel runs.
        assert await provider.reap(set(), dry_run=True) == ([], unknown)
        # The kernel process in the job is killed while the ledger still lists it (its
        # server was killed too): the job has nothing left in it, and goes.
        pid = int(kernel.get("pid") or 0) or next(
            int(k["pid"]) for k in (await client.call("list_kernels"))["kernels"]
        )
        os.kill(pid, signal.SIGKILL)
        assert await provider.reap({A100_NAME}, dry_run=True) == ([held], unknown)
        assert job_state(held) == "RUNNING"
        assert (await provider.reap({A100_NAME}))[0] == [held]
        assert job_state(held) in ("CANCELLED", "COMPLETING")
        assert provider.ledger is not None
        record = provider.ledger.find_machine(held)
        assert record is not None and record.state == "terminated"
        events = provider.ledger.machine_events(record.machine_id)
        assert events[-1].detail == (
            f"SLURM job {held} was cancelled: reaped (no kernel lives in it)"
        )
    finally:
        await machine.close()


@pytest.fixture
def server_dirs(short_tmp: Path, login_host: SSHTestHost) -> dict[str, Path]:
    made = {name: short_tmp / name for name in ("config", "data", "runtime", "nb")}
    for path in made.values():
        path.mkdir()
    config = dev_config(login_host, short_tmp)
    (made["config"] / "jupyter_server_config.json").write_text(json.dumps(config))
    return made


@pytest.fixture
async def servers(
    server_dirs: dict[str, Path], short_tmp: Path, clean_queue: None
) -> AsyncIterator[Any]:
    started: list[Server] = []

    def start() -> Server:
        server = start_server_process(server_dirs, short_tmp / f"server-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        with contextlib.suppress(ProcessLookupError):
            server.process.kill()
        server.process.wait(10)
    AsyncHTTPClient().close()


@pytest.mark.timeout(180)
async def test_a_restarted_server_reattaches_the_kernel_in_its_running_job(servers: Any) -> None:
    first: Server = servers()
    await first.ready()
    kernel_id, printed = await run_on_a100(
        first, "import os; x = 42; print(os.environ['SLURM_JOB_ID'])"
    )
    job_id = printed.strip()
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    assert job_state(job_id) == "RUNNING"

    second: Server = servers()
    await second.ready()
    for _ in range(150):
        listed = [k["id"] for k in await second.api("kernels")]
        if kernel_id in listed:
            break
        await asyncio.sleep(0.2)
    assert listed == [kernel_id], second.log.read_text()[-4000:]
    kc = await second.channels(kernel_id)
    ran = await kc.execute("print(x, os.environ['SLURM_JOB_ID'])")
    assert ran.stdout.split() == ["42", job_id]
    await kc.close()
    assert job_state(job_id) == "RUNNING"
    await second.api("kernels", kernel_id, method="DELETE")
    assert job_state(job_id) in ("CANCELLED", "COMPLETING")


async def test_idle_stop_of_a_cluster_cancels_its_job_and_says_so(make: Any) -> None:
    provider = make(idle_stop=2)
    machine = await open_target(provider, "slurm-dev-gpu-t4")
    try:
        job_id = machine.allocation.job_id
        client = await machine.agent()
        assert (await client.call("lifetime"))["idle_stop"] == 2
        for _ in range(150):  # the agent checks its timers every few seconds
            if machine.end_reason() is not None:
                break
            await asyncio.sleep(0.2)
        assert machine.end_reason() == (
            f"SLURM job {job_id} was cancelled by its idle stop: no kernel activity for 2 s"
        )
        assert job_state(job_id) in ("CANCELLED", "COMPLETING")
    finally:
        await machine.close()


async def test_terminate_cancels_the_allocation(make: Any) -> None:
    provider = make()
    machine = await open_target(provider)
    assert provider.ledger is not None
    try:
        job_id = machine.allocation.job_id
        record = provider.ledger.get_machine(machine.allocation.machine_id)
        assert record is not None and record.state == "running"
        ended = await provider.terminate(record)
        assert ended.state == "terminated"
        assert job_state(job_id) in ("CANCELLED", "COMPLETING")
        await machine.refresh()
        assert machine.end_reason() == (
            f"SLURM job {job_id} ended: CANCELLED (it was "
            "cancelled (scancel, by you or an administrator))"
        )
    finally:
        await machine.close()


async def test_a_holder_job_whose_agent_never_comes_ends_itself(
    short_tmp: Path,
    clean_queue: None,
) -> None:
    # As when the server that submitted it stopped while the job waited in the queue:
    # nobody starts its agent, and the job must not hold the GPU until its time limit.
    base = short_tmp / "holder"
    base.mkdir()
    script = HOLDER_SCRIPT.replace("{base}", str(base)).replace("{agent_wait}", "5")
    submitted = await asyncio.to_thread(
        subprocess.run,
        [
            "sbatch",
            "--parsable",
            "-J",
            FILLER,
            "-p",
            "gpu",
            "--gres=gpu:t4:1",
            "-t",
            "2",
            "-D",
            str(base),
            "-o",
            f"{base}/%j.out",
        ],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": SLURM_CONF},
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    began = time.monotonic()
    while job_state(job_id) in ("PENDING", "RUNNING", "COMPLETING"):
        assert time.monotonic() - began < 60, f"job {job_id} still {job_state(job_id)}"
        await asyncio.sleep(0.5)
    assert job_state(job_id) in ("COMPLETED", "")
    assert "no agent came within 5 s" in (base / f"{job_id}.out").read_text()


@pytest.mark.timeout(180)
async def test_a_server_that_stops_during_a_queued_launch_cancels_its_job(
    servers: Any,
    short_tmp: Path,
) -> None:
    server: Server = servers()
    await server.ready()
    await fill_t4()
    start = asyncio.ensure_future(
        server.api("kernels", method="POST", body={"name": "remote-hw-slurm-dev-gpu-t4"})
    )
    root = f"{short_tmp / 'c'}/"
    queued = ""
    for _ in range(200):
        rows = slurm("squeue", "-h", "-o", "%i|%T|%Z").stdout.split()
        queued = next(
            (
                r.split("|")[0]
                for r in rows
                if r.split("|")[2].startswith(root) and r.split("|")[1] == "PENDING"
            ),
            "",
        )
        if queued:
            break
        await asyncio.sleep(0.2)
    assert queued, server.log.read_text()[-3000:]
    began = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(server.process.wait, 60)
    stopped = time.monotonic() - began
    await asyncio.gather(start, return_exceptions=True)
    # It did not wait for the job to start, and the job is not left to run for nobody.
    assert stopped < 30, server.log.read_text()[-3000:]
    assert job_state(queued) in ("CANCELLED", ""), server.log.read_text()[-3000:]
    assert "cancelled 1 launch(es) under way" in server.log.read_text()
