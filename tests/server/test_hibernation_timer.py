"""Kernels left idle hibernate by themselves: on the SSH test host through the real
jupyter_server, with a hibernate time of a second or two, a kernel idle past it
hibernates, and the next cell wakes it with its variables; one that holds what cannot
be saved, under the 'refuse' policy, stays awake, says why once, and is not tried again
until it was used. A notebook's own time (``PUT .../hibernate-after/<kernel id>``) wins
over its target's, both ways, and holds across a wake."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.provisioner import RemoteHWProvisioner

from ..provisioner.conftest import (  # noqa: F401 (fixtures)
    SSH_KERNEL,
    Fetch,
    OpenChannels,
    StartKernel,
    channels,
    hosts,
    remote_root,
    start_kernel,
    write_config,
)
from ..testhosts import SSHTestHost

API = ("jupyter-remote-hw", "api")


@pytest.fixture
def policy() -> str:
    return "partial"


@pytest.fixture
def target_after() -> float:
    """The SSH target's ``hibernate_after``."""
    return 1.5


@pytest.fixture
def jp_server_config(
    ssh_host: SSHTestHost,
    short_tmp: Path,
    remote_root: Path,
    hosts: list[dict[str, Any]],
    policy: str,
    target_after: float,
) -> dict[str, Any]:
    return write_config(
        short_tmp / "config.json",
        ssh_host.ssh_config,
        remote_root,
        short_tmp / "l",
        hosts,
        SSHProvider={"hibernate_after": target_after},
        RemoteHWExtension={"hibernate_check_interval": 0.3, "hibernate_policy": policy},
    )


@contextlib.asynccontextmanager
async def timers_running(serverapp: Any) -> AsyncIterator[Any]:
    """The extension started as the server starts it (its timers), and stopped as the
    server's stop stops them; the extension."""
    pkg = serverapp.extension_manager.extensions["jupyter_remote_hw"]
    app = pkg.extension_points["jupyter_remote_hw"].app
    await app._start_jupyter_server_extension(serverapp)
    try:
        yield app
    finally:
        await app._stop_background()


@pytest.fixture(autouse=True)
async def timer(jp_serverapp: Any) -> AsyncIterator[None]:
    """The extension's timers running for the whole test."""
    async with timers_running(jp_serverapp) as app:
        assert app.hibernation_timer.is_running() and app.hibernation_timer.callback_time == 300
        yield


def hibernated(serverapp: Any, kernel_id: str) -> bool:
    provisioner = serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert isinstance(provisioner, RemoteHWProvisioner)
    return provisioner.hibernation.hibernated


async def until_hibernated(serverapp: Any, kernel_id: str, why_not: str) -> float:
    """Wait up to 30 s for the kernel to hibernate (failing with ``why_not``); the
    seconds it took."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while not hibernated(serverapp, kernel_id):
        assert loop.time() - began < 30, why_not
        await asyncio.sleep(0.1)
    return loop.time() - began


async def test_an_idle_kernel_hibernates_by_itself_and_wakes_on_the_next_cell(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    # A cell that runs longer than the hibernate time is activity: no hibernation.
    ran = await kc.execute("import time, numpy as np\nx = np.arange(10.0)\ntime.sleep(2.5)")
    assert ran.status == "ok" and not hibernated(jp_serverapp, kernel_id)
    waited = await until_hibernated(jp_serverapp, kernel_id, "the idle kernel did not hibernate")
    assert waited >= 1.0, waited  # not before its time
    machines = json.loads((await jp_fetch(*API, "machines")).body)["machines"]
    [row] = [k for m in machines for k in m["kernels"] if k["id"] == kernel_id]
    assert row["state"] == "hibernated" and row["hibernated"]["bytes"] > 0
    ran = await kc.execute("print(float(x.sum()))", timeout=120)
    assert ran.status == "ok" and ran.stdout.strip() == "45.0", ran
    assert not hibernated(jp_serverapp, kernel_id)


@pytest.mark.parametrize("policy", ["refuse"])
async def test_under_refuse_a_kernel_holding_an_open_file_stays_awake_and_says_why_once(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_serverapp: Any,
    short_tmp: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute(f"handle = open({str(short_tmp / 'f.txt')!r}, 'w')")
    assert ran.status == "ok"
    await asyncio.sleep(5)  # past the hibernate time, many checks
    assert not hibernated(jp_serverapp, kernel_id)
    refusals = [r for r in caplog.records if "stays awake" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in refusals]
    assert "handle" in refusals[0].getMessage()
    # Used again, it is tried again (and refused again, once).
    assert (await kc.execute("y = 1")).status == "ok"
    await asyncio.sleep(4)
    refusals = [r for r in caplog.records if "stays awake" in r.getMessage()]
    assert len(refusals) == 2
    assert (await kc.execute("print(y)")).stdout.strip() == "1"


async def set_after(jp_fetch: Fetch, kernel_id: str, seconds: float | None) -> dict[str, Any]:
    answer = await jp_fetch(
        *API, "hibernate-after", kernel_id, method="PUT", body=json.dumps({"seconds": seconds})
    )
    return dict(json.loads(answer.body))


async def listed_after(jp_fetch: Fetch, kernel_id: str) -> dict[str, Any]:
    machines = json.loads((await jp_fetch(*API, "machines")).body)["machines"]
    [row] = [k for m in machines for k in m["kernels"] if k["id"] == kernel_id]
    return dict(row["hibernate_after"])


@pytest.mark.parametrize("target_after", [3600.0])
async def test_a_notebook_time_shorter_than_its_targets_hibernates_it_and_outlives_the_wake(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert await listed_after(jp_fetch, kernel_id) == {"seconds": 3600.0, "source": "target"}
    assert (await kc.execute("x = 41")).status == "ok"
    answer = await set_after(jp_fetch, kernel_id, 1)
    assert answer == {
        "kernel_id": kernel_id,
        "hibernate_after": {"seconds": 1.0, "source": "notebook"},
        "target_seconds": 3600.0,
    }
    assert await listed_after(jp_fetch, kernel_id) == {"seconds": 1.0, "source": "notebook"}
    await until_hibernated(
        jp_serverapp, kernel_id, "the kernel did not hibernate after its notebook's time"
    )
    ran = await kc.execute("print(x + 1)", timeout=120)
    assert ran.status == "ok" and ran.stdout.strip() == "42", ran
    # Woken, it keeps its notebook's time, and so does its ledger row (for a later server).
    assert await listed_after(jp_fetch, kernel_id) == {"seconds": 1.0, "source": "notebook"}
    app = jp_serverapp.extension_manager.extensions["jupyter_remote_hw"]
    ledger = app.extension_points["jupyter_remote_hw"].app.machines.ledger
    assert ledger.get_kernel(kernel_id).info["hibernate_after"] == 1.0


async def test_a_notebook_time_of_0_keeps_it_awake_past_its_targets_until_given_back(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    assert (await set_after(jp_fetch, kernel_id, 0))["hibernate_after"]["source"] == "notebook"
    kc = await channels(kernel_id)
    assert (await kc.execute("y = 1")).status == "ok"
    await asyncio.sleep(4)  # past the target's 1.5 s, many checks
    assert not hibernated(jp_serverapp, kernel_id)
    # null: the target's time again, and it hibernates.
    answer = await set_after(jp_fetch, kernel_id, None)
    assert answer["hibernate_after"] == {"seconds": 1.5, "source": "target"}
    await until_hibernated(
        jp_serverapp, kernel_id, "back on its target's time, it did not hibernate"
    )
