"""What the notebook of a hibernated kernel is told when it wakes: what its save left out
(in the cell that woke it), and, when its saved state was deleted meanwhile, that it
cannot wake and what to do, at once and every time. Real jupyter_server, real sshd test
host, real ipykernels."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .conftest import SSH_KERNEL, Fetch, OpenChannels, StartKernel
from .test_hibernate import hibernate, kernel_row, provisioner_of, store


async def test_the_cell_that_wakes_a_kernel_says_what_its_save_left_out(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, short_tmp: Path
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    setup = f"import threading\nx = 41\nhandle = open({str(short_tmp / 'o.txt')!r}, 'w')\n"
    assert (await kc.execute(setup + "lock = threading.Lock()")).status == "ok"
    left = {e["name"]: e["reason"] for e in (await hibernate(jp_fetch, kernel_id))["left_out"]}
    assert set(left) == {"handle", "lock"}, left

    woken = await kc.execute("print(x + 1)", timeout=60)
    assert woken.status == "ok" and woken.stdout.strip() == "42", woken
    assert "woke from hibernation" in woken.stderr, woken
    for name, reason in left.items():
        assert f"{name} (" in woken.stderr and reason in woken.stderr, woken.stderr
    assert "woke from hibernation" not in (await kc.execute("x")).stderr  # said once

    # Woken without a cell (the REST API, the panel's Wake): the next cell says it.
    assert (await kc.execute("lock = threading.Lock()")).status == "ok"
    await hibernate(jp_fetch, kernel_id)
    await jp_fetch("jupyter-remote-hw", "api", "wake", kernel_id, method="POST", body="{}")
    after = await kc.execute("print(x)", timeout=60)
    assert after.stdout.strip() == "41" and "lock (" in after.stderr, after


async def test_a_kernel_whose_saved_state_was_deleted_says_so_at_once_and_restarts(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    await hibernate(jp_fetch, kernel_id)
    assert store().delete(kernel_id)  # what `jupyter remote-hw hibernated --delete` does

    loop = asyncio.get_running_loop()
    for _ in range(2):  # every cell is told at once, and nothing is launched for it
        began = loop.time()
        failed = await kc.execute("x", timeout=30)
        assert loop.time() - began < 5
        assert failed.status == "error" and failed.ename == "KernelWakeError", failed
        text = next(m for m in failed.messages if m["header"]["msg_type"] == "error")
        evalue = text["content"]["evalue"]
        assert "saved state was deleted" in evalue and "restart the kernel" in evalue
        assert "kept" not in evalue and "run the cell again" not in evalue, evalue
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert provisioner.run.machine is None and provisioner.run.host_connection is None
    assert (
        "saved state was deleted"
        in (await kernel_row(jp_fetch, kernel_id))["hibernated"]["wake_error"]
    )

    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="{}")
    assert (await kc.execute("print(1 + 1)", timeout=60)).stdout.strip() == "2"
    assert (await kc.execute("x")).ename == "NameError"
