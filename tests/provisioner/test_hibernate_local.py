"""A kernel on this machine (``local``) hibernates and wakes as one on a host does: it
writes its state to this machine's disk itself (the store keeps the manifest), its
process ends, and the next cell starts it again with its
variables, on the same ports; a kernel hibernated on a host can wake here too. Real
jupyter_server, real sshd test host, real ipykernels."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np

from ..kernelws import Execution
from ..serverprocess import Server
from .conftest import LOCAL_KERNEL, SSH_KERNEL, Fetch, OpenChannels, StartKernel
from .test_hibernate import (
    gone,
    hibernate,
    kernel_row,
    ours,
    provisioner_of,
    store,
    stored,
    wake,
)
from .test_reattach import dirs, http_client, start_server  # noqa: F401 (fixtures)


async def test_a_kernel_on_this_machine_hibernates_and_wakes(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(LOCAL_KERNEL)
    kc = await channels(kernel_id)
    setup = await kc.execute("import os\nx = 41\nprint(os.getpid())")
    assert setup.status == "ok", setup
    pid = int(setup.stdout)
    ports = jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info()

    summary = await hibernate(jp_fetch, kernel_id)
    assert summary["hibernated"] is True, summary
    assert await gone(pid)  # its process, and the memory it held, are released
    assert provisioner_of(jp_serverapp, kernel_id).hibernation.hibernated
    assert stored(kernel_id)
    # The kernel wrote its variables beside the local agent's state; the store holds
    # only the manifest.
    far = store().entry(kernel_id).far
    assert far is not None and far["label"] == "this machine's disk", far
    kept = Path(far["path"])
    local_state = Path(jp_serverapp.config.LocalProvider.state_dir).resolve()
    assert kept.parent == local_state / "hibernated" and list(kept.glob("var-*.bin"))
    assert (await kernel_row(jp_fetch, kernel_id))["state"] == "hibernated"

    woken = await kc.execute("x += 1\nprint(x, os.getpid())", timeout=60)
    assert woken.status == "ok", woken
    value, new_pid = woken.stdout.split()
    assert value == "42" and int(new_pid) != pid
    assert jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info() == ports
    assert not stored(kernel_id) and not kept.exists()
    # It hibernates again, and a restart or a shutdown still works on it.
    assert (await hibernate(jp_fetch, kernel_id))["hibernated"] is True
    assert (await kc.execute("x", timeout=60)).result == "42"


async def test_a_kernel_hibernated_on_a_host_wakes_on_this_machine(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    await hibernate(jp_fetch, kernel_id)
    assert (await wake(jp_fetch, kernel_id, "local"))["target"] == "local"
    assert provisioner_of(jp_serverapp, kernel_id).target == "local"
    assert (await kc.execute("x + 1", timeout=60)).result == "42"


async def test_a_second_hibernation_links_what_did_not_change(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    """Hibernated, woken and hibernated again: the unchanged array is linked from the
    first save, not written again; the store counts the entry whole; shutting the kernel
    down awake removes the base its wake kept."""
    kernel_id = await start_kernel(LOCAL_KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute("import numpy as np\nbig = np.arange(4_000_000.0)\nsmall = 1")
    assert ran.status == "ok", ran
    await hibernate(jp_fetch, kernel_id)
    entry = store().entry(kernel_id)
    assert entry.far is not None
    kept = Path(entry.far["path"])
    [big] = [v for v in entry.manifest["variables"] if v["name"] == "big"]
    inode = (kept / big["file"]).stat().st_ino

    assert (await kc.execute("small = 2", timeout=60)).status == "ok"  # wakes it
    base = kept.parent / f".base-{kept.name}"
    assert not kept.exists() and base.is_dir() and not stored(kernel_id)

    await hibernate(jp_fetch, kernel_id)
    again = store().entry(kernel_id)
    [big_again] = [v for v in again.manifest["variables"] if v["name"] == "big"]
    assert (kept / big_again["file"]).stat().st_ino == inode  # linked from the base
    assert again.manifest["total_bytes"] == entry.manifest["total_bytes"]
    assert not base.exists()
    assert (await kc.execute("print(big.sum(), small)", timeout=60)).stdout.split() == [
        str(np.arange(4_000_000.0).sum()),
        "2",
    ]
    assert base.is_dir()  # woken again: kept as the next base
    response = await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert response.code == 204
    assert not base.exists() and not kept.exists()


async def test_an_array_written_in_place_after_a_wake_is_saved_again_with_its_change(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch
) -> None:
    """The woken kernel's arrays are views of its saved files' pages; one element written
    in place makes that array's next save write it again (not link the base), and the
    change comes back with the next wake."""
    kernel_id = await start_kernel(LOCAL_KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute("import numpy as np\nbig = np.arange(4_000_000.0)\nkept = big * 2")
    assert ran.status == "ok", ran
    await hibernate(jp_fetch, kernel_id)
    entry = store().entry(kernel_id)
    assert entry.far is not None
    place = Path(entry.far["path"])
    inodes = {v["name"]: (place / v["file"]).stat().st_ino for v in entry.manifest["variables"]}

    assert (await kc.execute("big[123_456] = -1.0", timeout=60)).status == "ok"  # wakes it
    await hibernate(jp_fetch, kernel_id)
    again = store().entry(kernel_id).manifest["variables"]
    now = {v["name"]: (place / v["file"]).stat().st_ino for v in again}
    assert now["kept"] == inodes["kept"]  # untouched: linked from the base
    assert now["big"] != inodes["big"]  # written in place: saved again
    seen = await kc.execute("print(big[123_456], big.sum(), kept.sum())", timeout=60)
    total = np.arange(4_000_000.0).sum()
    assert seen.stdout.split() == ["-1.0", str(total - 123_456 - 1), str(2 * total)]


async def woken_then_server_killed(
    first: Server, cell: str, local_state: Path
) -> tuple[str, Execution]:
    """A local kernel on ``first`` (its state under ``local_state``) that hibernated and
    was woken by ``cell``, its base kept, then ``first`` killed; its id, and what
    ``cell`` did."""
    await first.ready()
    kernel_id = (await first.api("kernels", method="POST", body={"name": LOCAL_KERNEL}))["id"]
    kc = await first.channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    assert (await ours(first, "POST", f"hibernate/{kernel_id}", {}))["hibernated"]
    woken = await kc.execute(cell, timeout=60)
    assert woken.status == "ok", woken
    await kc.close()
    assert (local_state / "hibernated" / f".base-{kernel_id}").is_dir()
    first.process.kill()
    first.process.wait(30)
    return kernel_id, woken


async def test_the_next_server_removes_the_base_of_a_kernel_it_shuts_down(
    start_server: Any, http_client: None, short_tmp: Path
) -> None:
    """Found by the lifecycle soak: a kernel woken under one server, which was then
    killed, left the base of its next save behind when the next server shut it down
    (the base was known only in the first server's memory; the ledger keeps it now)."""
    kernel_id, _ = await woken_then_server_killed(start_server(), "x += 1", short_tmp / "l")
    base = short_tmp / "l" / "hibernated" / f".base-{kernel_id}"

    second: Server = start_server()
    await second.ready()
    for _ in range(100):
        if kernel_id in [k["id"] for k in await second.api("kernels")]:
            break
        await asyncio.sleep(0.2)
    kc = await second.channels(kernel_id)
    assert (await kc.execute("x", timeout=60)).result == "42"
    await kc.close()
    await second.api("kernels", kernel_id, method="DELETE")
    assert not base.exists(), second.log.read_text()[-3000:]


async def test_a_kernel_that_ended_while_no_server_watched_leaves_no_base(
    start_server: Any, http_client: None, short_tmp: Path
) -> None:
    """Found by the lifecycle soak: woken (its base kept), then its server killed and its
    process killed; the next server finds it gone, forgets it and removes its base."""
    kernel_id, woken = await woken_then_server_killed(
        start_server(), "import os\nx += 1\nprint(os.getpid())", short_tmp / "l"
    )
    base = short_tmp / "l" / "hibernated" / f".base-{kernel_id}"
    os.kill(int(woken.stdout), signal.SIGKILL)

    second: Server = start_server()
    await second.ready()
    for _ in range(150):
        if not base.exists():
            break
        await asyncio.sleep(0.2)
    assert not base.exists(), second.log.read_text()[-3000:]
    assert kernel_id not in [k["id"] for k in await second.api("kernels")]
