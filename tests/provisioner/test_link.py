"""A kernel on a host whose link is cut and restored carries on without user action."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ..testhosts import NetnsTestHost
from .conftest import write_config
from .test_launch import OpenChannels, StartKernel, provisioner_of


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
    return write_config(
        short_tmp / "config.json", ns_host.ssh_config, remote_root, short_tmp / "l", hosts
    )


async def test_idle_kernel_survives_a_ten_second_cut(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_serverapp: Any,
    jp_fetch: Any,
) -> None:
    assert ns_host.link is not None
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    assert (await kc.execute("import os; x = 7; pid = os.getpid()")).status == "ok"
    pid = (await kc.execute("pid")).result
    machine = provisioner_of(jp_serverapp, kernel_id).run.machine
    assert machine is not None and machine.link_up

    ns_host.link.cut()
    cut_at = time.time()
    try:
        await asyncio.sleep(10)
        assert not machine.link_up  # the cut was noticed
        # The panel and status bar say since when (they count the seconds).
        reply = await jp_fetch("jupyter-remote-hw", "api", "machines")
        (model,) = [
            m for m in json.loads(reply.body)["machines"] if m["name"] == "ssh-" + ns_host.alias
        ]
        assert model["state"] == "reconnecting"
        assert cut_at < model["link_down_since"] < cut_at + 8
        # Jupyter still counts the kernel as alive: no restart is attempted.
        assert await jp_serverapp.kernel_manager.get_kernel(kernel_id).is_alive()
    finally:
        ns_host.link.restore()

    after = await kc.execute("x * 6", timeout=60)
    assert after.result == "42"
    assert (await kc.execute("pid")).result == pid
    assert jp_serverapp.kernel_manager.list_kernel_ids() == [kernel_id]
