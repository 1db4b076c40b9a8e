"""Hibernation where a kernel meets others: two notebooks on one host, a kernel on this
machine, saved state deleted from a terminal, and what a save left out shown when the
kernel wakes. Real jupyter_server, real sshd test host, real ipykernels."""

from __future__ import annotations

from typing import Any

from .conftest import SSH_KERNEL, Fetch, OpenChannels, StartKernel
from .test_hibernate import hibernate, provisioner_of, stored


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
