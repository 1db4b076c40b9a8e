"""The host's agent tells the owner's side whether someone else can run code in a kernel:
from the moment a collaborator share is added until the kernel ends, revocation included;
a viewer share does not count; a joined kernel always counts."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jupyter_remote_hw.sharing import COLLABORATOR, VIEWER
from jupyter_remote_hw.sharing.provisioner import SharedKernelProvisioner

from .conftest import OwnedKernel


async def runs_code(owned: OwnedKernel, kernel_id: str | None = None) -> bool:
    status = await owned.agent.call("kernel_status", kernel_id=kernel_id or owned.kernel_id)
    return bool(status["others_can_run_code"])


async def test_a_collaborator_share_marks_the_kernel_until_it_ends(
    owned: OwnedKernel, teammate_key: Path
) -> None:
    assert not await runs_code(owned)
    viewer = await owned.share(teammate_key, VIEWER, expires_in=3600)
    assert not await runs_code(owned)  # a viewer only watches
    await owned.sharer.revoke(owned.machine, viewer.record.share_id)
    collaborator = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    assert await runs_code(owned)
    # Revoking does not clean what was run meanwhile; a restarted agent still knows.
    await owned.sharer.revoke(owned.machine, collaborator.record.share_id)
    assert await runs_code(owned)
    await owned.agent.call("shutdown_agent", kill_kernels=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not owned.agent.closed:
        assert loop.time() < deadline, "the agent did not stop"
        await asyncio.sleep(0.1)
    owned.agent = await owned.machine.agent()  # a new agent, re-adopting the kernel
    assert await runs_code(owned)
    # Another kernel of the same host was never shared.
    other = await owned.agent.call("start_kernel", wait=90, timeout=60)
    try:
        assert not await runs_code(owned, str(other["kernel_id"]))
    finally:
        await owned.agent.call("shutdown_kernel", kernel_id=other["kernel_id"], now=True)


async def test_a_joined_kernel_always_counts() -> None:
    assert await SharedKernelProvisioner().others_can_run_code()
