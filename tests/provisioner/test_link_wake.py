"""A wake whose link is cut while it restores (issue 30, point 18): the waiting cell is
told, and the kernel it started on the host, which could not be told to stop, does not
outlive the kernel's shutdown."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.machines.manager import MachineManager

from ..processes import processes_under
from ..testhosts import NetnsTestHost
from .conftest import write_config
from .test_launch import OpenChannels, StartKernel, provisioner_of

#: A state that takes a moment to restore (160 MB).
BIG = "import numpy as np\nbig = np.ones(20_000_000)\nx = 42"


@pytest.fixture
def jp_server_config(ns_host: NetnsTestHost, short_tmp: Path, remote_root: Path) -> dict[str, Any]:
    hosts = [
        {
            "host": ns_host.alias,
            "python": sys.executable,
            "hardware": "Far GPU",
            "root": str(remote_root),
        }
    ]
    # A wake cut off where it waits for the link (the kernel reading its state on the
    # host) is told when the launch's time is up: 40 s here, not the 90 s of other tests,
    # so that the test's own 120 s hold the save, that wait and the shutdown.
    return write_config(
        short_tmp / "config.json",
        ns_host.ssh_config,
        remote_root,
        short_tmp / "l",
        hosts,
        RemoteHWProvisioner={"launch_timeout": 40.0, "poll_timeout": 3.0},
    )


async def test_a_shutdown_after_a_wake_cut_off_by_the_link_leaves_nothing_running(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_serverapp: Any,
    jp_fetch: Any,
) -> None:
    assert ns_host.link is not None
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    assert (await kc.execute(BIG)).status == "ok"
    body = json.dumps({})
    saved = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body=body
    )
    assert json.loads(saved.body)["hibernated"] is True

    events: list[dict[str, Any]] = []
    manager = MachineManager.instance()
    manager.launch_listeners.append(events.append)
    try:
        cell = asyncio.ensure_future(kc.execute("x", timeout=120))
        while not any(e["step"] == "restore state" and e["state"] == "started" for e in events):
            await asyncio.sleep(0.005)
        ns_host.link.cut()
        try:
            failed = await cell  # told, not left waiting
        finally:
            ns_host.link.restore()
    finally:
        manager.launch_listeners.remove(events.append)
    assert failed.status == "error", failed
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert provisioner.hibernation.hibernated

    deleted = await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert deleted.code == 204
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while processes_under(kernel_id) and loop.time() < deadline:
        await asyncio.sleep(0.2)
    assert processes_under(kernel_id) == []


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "beside a running kernel"])
async def test_a_cell_that_wakes_a_kernel_while_its_host_is_cut_off_waits_for_the_link(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Any,
    beside: bool,
) -> None:
    # Found by the lifecycle soak: the wake failed at once on a link cut for 8 s, though
    # a running kernel's cells wait out such a cut: at "connect" when the kernel was
    # alone on the host, at "start kernel" (the agent's connection lost) when another
    # kernel kept the connection open.
    assert ns_host.link is not None
    if beside:
        other = await channels(await start_kernel("remote-hw-ssh-" + ns_host.alias))
        assert (await other.execute("1")).status == "ok"
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 42")).status == "ok"
    saved = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body=json.dumps({})
    )
    assert json.loads(saved.body)["hibernated"] is True

    events: list[dict[str, Any]] = []
    manager = MachineManager.instance()
    manager.launch_listeners.append(events.append)
    ns_host.link.cut()
    try:
        cell = asyncio.ensure_future(kc.execute("print(x)", timeout=120))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while not any("cannot be reached; trying again" in (e.get("detail") or "") for e in events):
            assert loop.time() < deadline, events
            assert not cell.done(), cell.result()
            await asyncio.sleep(0.05)
        await asyncio.sleep(2)
        assert not cell.done(), cell.result()
    finally:
        ns_host.link.restore()
        manager.launch_listeners.remove(events.append)
    ran = await cell
    assert ran.status == "ok", ran
    assert ran.stdout.strip() == "42"
