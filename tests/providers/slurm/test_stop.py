"""SIGTERM to a server whose SLURM kernel is being restarted, or shut down by a client
at that moment: the server exits, quietly, and the kernel's job does not run on."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from ...serverprocess import Server
from .conftest import job_state
from .test_lifetime import server_dirs, servers  # noqa: F401 (fixtures)

#: Job states of a job that no longer holds its allocation.
ENDED = ("CANCELLED", "COMPLETING", "COMPLETED", "")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("under_way", ["a restart", "a client's shutdown"])
async def test_sigterm_during_a_restart_or_a_shutdown_ends_the_server_and_the_job(
    servers: Any,
    under_way: str,
) -> None:
    server: Server = servers()
    await server.ready()
    kernel_id = (
        await server.api("kernels", method="POST", body={"name": "remote-hw-slurm-dev-gpu-a100"})
    )["id"]
    kc = await server.channels(kernel_id)
    job_id = (await kc.execute("import os; print(os.environ['SLURM_JOB_ID'])")).stdout.strip()
    await kc.close()
    request: asyncio.Future[Any] | None = None
    if under_way == "a restart":
        request = asyncio.ensure_future(server.api("kernels", kernel_id, "restart", method="POST"))
        await asyncio.sleep(0.3)
    server.process.send_signal(signal.SIGTERM)
    if under_way == "a client's shutdown":
        request = asyncio.ensure_future(server.api("kernels", kernel_id, method="DELETE"))
    returncode = await asyncio.to_thread(server.process.wait, 60)
    await asyncio.gather(request, return_exceptions=True)
    log = server.log.read_text()
    assert returncode == 0, log[-4000:]
    assert "Traceback" not in log and "[E " not in log, log[-4000:]
    for _ in range(50):
        if job_state(job_id) in ENDED:
            break
        await asyncio.sleep(0.2)
    assert job_state(job_id) in ENDED, log[-4000:]
