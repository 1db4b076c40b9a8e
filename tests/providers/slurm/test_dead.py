"""A kernel whose SLURM job ended under it is dead in every client's eyes, at once."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.machines import MachineManager
from jupyter_remote_hw.transfer.variables import ANSWER_WAIT

from ...testhosts import SSHTestHost
from .conftest import A100, dead_answers, dev_config, job_state, slurm


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    return dev_config(login_host, short_tmp)


def cell(code: str) -> dict[str, Any]:
    return {
        "code": code,
        "silent": False,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": False,
    }


async def test_a_job_cancelled_from_outside_leaves_a_dead_kernel_that_answers_every_cell(
    kernels: Any, manager: MachineManager, jp_fetch: Any, caplog: pytest.LogCaptureFixture
) -> None:
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")
    job_id = ran.stdout.strip()
    # One cell runs, one waits behind it; then the job is cancelled, not through us.
    running = await kc.send(
        "execute_request", cell("print('on', flush=True); import time; time.sleep(600)")
    )
    queued = await kc.send("execute_request", cell("x = 1"))
    await kc.wait_printed(running, "on")
    assert slurm("scancel", job_id).returncode == 0
    began = time.monotonic()
    dead, replies, statuses = await dead_answers(kc, [running, queued], timeout=30)
    assert dead and "restarting" not in statuses
    for msg_id in (running, queued):
        reply = replies[msg_id]
        assert reply["status"] == "error" and reply["ename"] == "KernelDead", reply
        assert f"SLURM job {job_id} ended: CANCELLED" in reply["evalue"]
        assert "start a new kernel" in reply["evalue"]
    # A cell sent now is answered at once.
    sent = time.monotonic()
    after = await kc.send("execute_request", cell("x = 2"))
    _, replies, _ = await dead_answers(kc, [after], timeout=5)
    assert replies[after]["ename"] == "KernelDead" and time.monotonic() - sent < 5
    # Jupyter's listing says dead, with the reason.
    model = await kernels.model(kernel_id)
    assert model["execution_state"] == "dead", model
    assert model["reason"].startswith(f"SLURM job {job_id} ended: CANCELLED"), model
    # The restarter does not restart it into a new job: it stays dead.
    await asyncio.sleep(max(0.0, 8 - (time.monotonic() - began)))
    assert not [e for e in events if e["step"] == "restart kernel"]
    assert len([e for e in events if e["step"] == "submit job" and e["state"] == "done"]) == 1
    assert (await kernels.model(kernel_id))["execution_state"] == "dead"
    assert job_state(job_id) in ("CANCELLED", "")
    # A restart asked for by the user is refused at once: a 409 that says why and what
    # to do, in one line, logged without a traceback; the kernel stays dead.
    asked = time.monotonic()
    caplog.clear()
    with pytest.raises(HTTPClientError) as refusal:
        await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="{}")
    assert refusal.value.code == 409
    assert refusal.value.response is not None
    message = json.loads(refusal.value.response.body)["message"]
    assert message.startswith(f"SLURM job {job_id} ended: CANCELLED") and "\n" not in message
    # The machine is named as the picker names it, not by its target's name.
    assert re.search(r"start a new kernel to run on A100 .* · SLURM dev · gpu again$", message)
    assert time.monotonic() - asked < 10
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    refused = [e for e in events if e["step"] == "restart kernel" and e["state"] == "failed"]
    assert refused and "start a new kernel" in refused[0]["detail"]
    assert (await kernels.model(kernel_id))["execution_state"] == "dead"
    await kc.close()
    await kernels.stop(kernel_id)


@pytest.mark.parametrize("after", [0.0, 4.0])
async def test_a_hibernation_that_meets_the_end_of_the_job_is_refused_saying_why(
    kernels: Any, jp_fetch: Any, caplog: pytest.LogCaptureFixture, after: float
) -> None:
    """The job ends from outside and a hibernation is asked for at once (before the
    server has noticed: the save meets the end) or seconds later: a 409 that names the
    end as soon as the server knows it, never a 500; the kernel stays dead, each cell
    answered."""
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; x = 1; print(os.environ['SLURM_JOB_ID'])")
    job_id = ran.stdout.strip()
    assert slurm("scancel", job_id).returncode == 0
    await asyncio.sleep(after)
    caplog.clear()
    asked = time.monotonic()
    with pytest.raises(HTTPClientError) as refusal:
        await jp_fetch("jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body="{}")
    assert refusal.value.code == 409, refusal.value
    # The save learns of the death as the server does (before, it waited out the
    # kernel's silence: 10 s, beyond a slow machine's request timeout).
    assert time.monotonic() - asked < ANSWER_WAIT
    assert refusal.value.response is not None
    message = json.loads(refusal.value.response.body)["message"]
    assert f"SLURM job {job_id} ended: CANCELLED" in message and "\n" not in message
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    sent = await kc.send("execute_request", cell("x"))
    _, replies, _ = await dead_answers(kc, [sent], timeout=15)
    assert replies[sent]["ename"] == "KernelDead"
    await kc.close()
    await kernels.stop(kernel_id)


@pytest.mark.parametrize("after", [0.0, 0.3, 0.6])
async def test_a_shutdown_that_meets_the_end_of_the_job_succeeds(
    kernels: Any, jp_fetch: Any, caplog: pytest.LogCaptureFixture, after: float
) -> None:
    """The job ends from outside and the kernel is shut down at once, before or while
    the server notices: 204, nothing left queued or running, no error logged (before,
    the kill met the agent gone with its job: a 500)."""
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    ran = await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")
    job_id = ran.stdout.strip()
    await kc.close()
    assert slurm("scancel", job_id).returncode == 0
    await asyncio.sleep(after)
    caplog.clear()
    deleted = await jp_fetch("api", "kernels", kernel_id, method="DELETE", raise_error=False)
    assert deleted.code == 204, deleted.body
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert job_state(job_id) in ("CANCELLED", "COMPLETING", "")


async def test_a_machine_asked_right_after_its_job_ended_says_so_at_once(
    kernels: Any, jp_serverapp: Any
) -> None:
    """When a kernel's agent goes away, whether its job ended decides the answer (a
    shutdown that meets the end succeeds): SLURM is asked at once, not at its next look,
    and asked again while the job is still completing."""
    kernel_id = await kernels.start(A100)
    kc = await kernels.channels(kernel_id)
    job_id = (await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")).stdout.strip()
    await kc.close()
    machine = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.run.machine
    assert await machine.confirm_end() is None  # it runs
    assert slurm("scancel", job_id).returncode == 0
    asked = time.monotonic()
    reason = await machine.confirm_end()
    assert reason is not None and reason.startswith(f"SLURM job {job_id} "), reason
    assert "CANCELLED" in reason and time.monotonic() - asked < 8
    assert machine.end_reason() == reason
    await kernels.stop(kernel_id)
