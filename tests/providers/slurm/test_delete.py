"""Jupyter's own ``DELETE /api/kernels/<id>``, as every client stops a kernel, of a
kernel whose SLURM job still waits in the queue: the job is cancelled, 204."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.machines import MachineManager

from ...testhosts import SSHTestHost
from .conftest import dev_config, fill_t4, job_state, queued_launch


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    return dev_config(login_host, short_tmp)


async def start(jp_fetch: Any, kernel_name: str) -> tuple[int, str]:
    answer = await jp_fetch(
        "api", "kernels", method="POST", body=json.dumps({"name": kernel_name}), raise_error=False
    )
    return answer.code, json.loads(answer.body or b"{}").get("message", "")


async def test_deleting_a_kernel_whose_job_waits_in_the_queue_cancels_the_job(
    manager: MachineManager, jp_fetch: Any
) -> None:
    await fill_t4()
    events: list[dict[str, Any]] = []
    manager.launch_listeners.append(events.append)
    started = asyncio.ensure_future(start(jp_fetch, "remote-hw-slurm-dev-gpu-t4"))
    pending = await queued_launch(events)
    job_id = pending["detail"].split("job ")[1].split()[0]
    assert job_state(job_id) == "PENDING"
    # Jupyter's own route, as every client stops a kernel.
    deleted = await jp_fetch("api", "kernels", pending["kernel_id"], method="DELETE")
    assert deleted.code == 204
    assert job_state(job_id) in ("CANCELLED", "")
    code, message = await asyncio.wait_for(started, 30)
    assert code == 409 and "cancelled by the user" in message, message
    listed = json.loads((await jp_fetch("api", "kernels")).body)
    assert pending["kernel_id"] not in [k["id"] for k in listed]
    # A kernel that neither runs nor launches is still jupyter_server's 404.
    missing = await jp_fetch(
        "api", "kernels", pending["kernel_id"], method="DELETE", raise_error=False
    )
    assert missing.code == 404
