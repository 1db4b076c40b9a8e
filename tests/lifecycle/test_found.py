"""Sequences the model-based test (test_model.py) found, kept as plain regression tests."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient

from ..testhosts import SSHTestHost
from .test_model import ANSWER_BOUND, World, _probe, lifecycle_root  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
async def world(
    ssh_host: SSHTestHost, lifecycle_root: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    made = World(lifecycle_root, ssh_host)
    await made.start()
    try:
        yield made
    finally:
        await made.stop()
        AsyncHTTPClient().close()
        if os.environ.get("JRHW_DEBUG"):
            import shutil

            shutil.copy(made.server.log, "/tmp/debug-server.log")


async def _notebook(world: World, kernel: str) -> tuple[str, str]:
    answer = await world.call(
        "POST", "api/sessions", {"path": "nb.ipynb", "type": "notebook", "kernel": {"name": kernel}}
    )
    return answer.body["id"], answer.body["kernel"]["id"]


@pytest.mark.parametrize("kernel", ["remote-hw-ssh-testhost", "remote-hw-local"])
async def test_a_cell_after_the_kernel_process_was_killed_is_answered(
    world: World, kernel: str
) -> None:
    """kill_kernel_process → assign: the kernel's process is killed from outside; the next
    cell is answered, by a kernel started anew or with an error that says so."""
    _, kernel_id = await _notebook(world, kernel)
    ran = await world.execute(kernel_id, "x = 1\n" + _probe())
    pid = int(json.loads(ran.stdout.strip().splitlines()[-1])["pid"])
    os.kill(pid, signal.SIGKILL)
    ran = await asyncio.wait_for(world.execute(kernel_id, "y = 2"), ANSWER_BOUND)
    assert ran.status in ("ok", "error"), ran
    assert not world.tracebacks()


async def test_a_hibernation_right_after_the_kernel_process_was_killed(world: World) -> None:
    """kill_kernel_process → hibernate → assign, on an SSH host: the hibernation meets
    jupyter_client's restarter starting the kernel anew; whatever it answers, the next
    cell is answered."""
    _, kernel_id = await _notebook(world, "remote-hw-ssh-testhost")
    ran = await world.execute(kernel_id, "x = 1\n" + _probe())
    pid = int(json.loads(ran.stdout.strip().splitlines()[-1])["pid"])
    os.kill(pid, signal.SIGKILL)
    answer = await world.call("POST", f"jupyter-remote-hw/api/hibernate/{kernel_id}", {})
    assert answer.code in (200, 409), answer
    ran = await asyncio.wait_for(world.execute(kernel_id, "y = 2"), ANSWER_BOUND)
    assert ran.status in ("ok", "error"), ran
    assert not world.tracebacks()


@pytest.mark.parametrize("wait", [2.9, 3.2])
async def test_a_client_connecting_while_the_restarter_restarts_the_kernel_is_answered(
    world: World, wait: float
) -> None:
    """kill_kernel_process → (3 s: jupyter_client's restarter restarts the kernel) →
    assign: a websocket opened while the kernel is being started anew reaches the new
    kernel. Before, the restarter zeroed the kernel manager's ports for a kernel that
    died in its first seconds, and a client connecting then waited for ever."""
    _, kernel_id = await _notebook(world, "remote-hw-ssh-testhost")
    ran = await world.execute(kernel_id, "x = 1\n" + _probe())
    pid = int(json.loads(ran.stdout.strip().splitlines()[-1])["pid"])
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(wait)
    ran = await asyncio.wait_for(world.execute(kernel_id, "y = 2"), ANSWER_BOUND)
    assert ran.status in ("ok", "error"), ran


async def test_a_kernel_that_died_while_no_server_watched_is_dropped_in_one_line(
    world: World,
) -> None:
    """kill_kernel_process → kill_server: the next server finds the kernel gone from its
    host, drops it and says so in one line; before, jupyter_client logged the failed
    takeover with two tracebacks at ERROR."""
    _, kernel_id = await _notebook(world, "remote-hw-ssh-testhost")
    ran = await world.execute(kernel_id, _probe())
    pid = int(json.loads(ran.stdout.strip().splitlines()[-1])["pid"])
    await world.kill()  # first the server, so that no restarter starts the kernel anew
    os.kill(pid, signal.SIGKILL)
    await world.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while f"kernel {kernel_id} on ssh-testhost is gone" not in world.log_tail(20000):
        assert loop.time() < deadline, world.log_tail()
        await asyncio.sleep(0.5)
    assert (await world.call("GET", "api/kernels")).body == []
    assert not world.tracebacks()


async def test_listing_kernels_while_the_server_takes_them_over_never_fails(world: World) -> None:
    """kill_server → kill_server, with a client listing kernels all the while: each
    listing answers; before, one that came as a kernel was being taken over (listed
    before jupyter_server had set its activity) was a 500."""
    _, local = await _notebook(world, "remote-hw-local")
    for _ in range(2):
        await world.kill()
        await world.start()
        listed: set[str] = set()
        for _ in range(2000):
            listed = {k["id"] for k in (await world.call("GET", "api/kernels")).body}
            if local in listed:
                break
            await asyncio.sleep(0.005)
        assert local in listed, world.log_tail()
    assert not world.tracebacks()
