"""A variable transfer cut midway fails within the keepalive time, naming the variable,
the target and the cause, and leaves the receiving kernel as it was."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.transfer import TransferError
from jupyter_remote_hw.transfer.variables import copy_variables

from ..testhosts import NetnsTestHost
from .conftest import LOCAL_KERNEL, write_config
from .test_launch import OpenChannels, StartKernel


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


@pytest.mark.timeout(180)
async def test_a_transfer_cut_midway_names_what_failed_and_assigns_nothing(
    ns_host: NetnsTestHost,
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_serverapp: Any,
) -> None:
    assert ns_host.link is not None
    source_id = await start_kernel(LOCAL_KERNEL)
    destination_id = await start_kernel("remote-hw-ssh-" + ns_host.alias)
    source, destination = await channels(source_id), await channels(destination_id)
    assert (await source.execute("import numpy as np\nbig = np.ones(96_000_000)")).status == "ok"
    seen: list[int] = []
    copying = asyncio.create_task(
        copy_variables(
            jp_serverapp.kernel_manager,
            source_id,
            destination_id,
            ["big"],
            progress=lambda done, _total: seen.append(done),
        )
    )
    while not seen or seen[-1] < 64_000_000:  # the first 64 MB of 768 are across
        assert not copying.done(), copying
        await asyncio.sleep(0.01)
    ns_host.link.cut()
    cut_at = time.monotonic()
    try:
        with pytest.raises(TransferError) as failed:
            await copying
        # The test transport declares a link dead after 2 keepalives a second apart.
        assert time.monotonic() - cut_at < 15
    finally:
        ns_host.link.restore()
    message = str(failed.value)
    assert "'big'" in message and ns_host.alias in message, message
    assert "Nothing was assigned" in message, message
    assert "Traceback" not in message and len(message) < 600, message
    # Back on the link: the kernel has no half-received variable, and goes on.
    check = await destination.execute("print('big' in globals())", timeout=90)
    assert check.stdout.strip() == "False", check
