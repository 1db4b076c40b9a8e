"""Two notebooks on one host: a kernel hibernated while another runs there (whose agent
lives on) wakes, also under a server started after a crash (issue 30, point 10). Real
jupyter_server, real sshd test host, real ipykernels."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from ..serverprocess import Server
from .conftest import SSH_KERNEL, Fetch, OpenChannels, StartKernel
from .test_hibernate import hibernate, ours, provisioner_of, stored
from .test_reattach import dirs, http_client, start_server  # noqa: F401 (fixtures)


async def test_a_kernel_hibernated_beside_a_running_one_wakes(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    # Two notebooks on one host: the other kernel keeps the host's agent (and its
    # machine here) running while the first hibernates and wakes, twice.
    sleeper = await start_kernel(SSH_KERNEL)
    other = await start_kernel(SSH_KERNEL)
    kc, other_kc = await channels(sleeper), await channels(other)
    assert (await kc.execute("x = 41")).status == "ok"
    assert (await other_kc.execute("y = 1")).status == "ok"
    for times in range(2):
        summary = await hibernate(jp_fetch, sleeper)
        assert summary["hibernated"] is True, summary
        assert (await other_kc.execute("y += 1")).status == "ok"
        woken = await kc.execute("x += 1\nprint(x)", timeout=60)
        assert woken.status == "ok" and woken.stdout.strip() == str(42 + times), woken
        assert not provisioner_of(jp_serverapp, sleeper).hibernation.hibernated
        assert not stored(sleeper)
    assert (await other_kc.execute("y")).result == "3"


async def test_a_kernel_hibernated_beside_a_running_one_wakes_under_the_next_server(
    start_server: Any, http_client: None
) -> None:
    first: Server = start_server()
    await first.ready()
    sleeper = (await first.api("kernels", method="POST", body={"name": SSH_KERNEL}))["id"]
    other = (await first.api("kernels", method="POST", body={"name": SSH_KERNEL}))["id"]
    for kernel_id, code in ((sleeper, "x = 41"), (other, "y = 1")):
        kc = await first.channels(kernel_id)
        assert (await kc.execute(code)).status == "ok"
        await kc.close()
    assert (await ours(first, "POST", f"hibernate/{sleeper}", {}))["hibernated"]
    first.process.send_signal(signal.SIGKILL)  # the other kernel, and its agent, run on
    first.process.wait(60)

    second: Server = start_server()
    await second.ready()
    for _ in range(100):
        if {k["id"] for k in await second.api("kernels")} == {sleeper, other}:
            break
        await asyncio.sleep(0.2)
    kc = await second.channels(sleeper)
    woken = await kc.execute("x + 1", timeout=60)
    assert woken.result == "42", (woken, second.log.read_text()[-3000:])
    await kc.close()
