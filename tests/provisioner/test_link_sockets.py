"""Repeated cuts of a kernel's link leave no socket behind in the Jupyter server."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ..testhosts import NetnsTestHost
from .conftest import write_config
from .test_launch import OpenChannels, StartKernel

#: Seconds a forward's new client waits for the lost link: short, so that the
#: kernel's reconnecting ZMQ clients are dropped within each cut.
FORWARD_WAIT = 2.0


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
        short_tmp / "config.json",
        ns_host.ssh_config,
        remote_root,
        short_tmp / "l",
        hosts,
        TransportManager={"forward_wait_timeout": FORWARD_WAIT},
    )


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.timeout(180)
async def test_cuts_longer_than_the_forward_wait_leave_no_socket_behind(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
) -> None:
    assert ns_host.link is not None
    kernel_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 1")).status == "ok"
    counts = [_open_fds()]
    for cut in range(3):
        ns_host.link.cut()
        try:
            # Keepalives declare the link dead after about 2 s; the kernel's
            # clients then reconnect through the forwards and are dropped.
            await asyncio.sleep(3 + 2 * FORWARD_WAIT)
        finally:
            ns_host.link.restore()
        assert (await kc.execute("x += 1; x", timeout=60)).result == str(cut + 2)
        await asyncio.sleep(1)
        counts.append(_open_fds())
    # The first cut may open what a server keeps for good; later ones add nothing.
    assert counts[-1] <= counts[1] + 3, f"open file descriptors after each cut: {counts}"
    assert counts[-1] <= counts[0] + 6, f"open file descriptors after each cut: {counts}"
