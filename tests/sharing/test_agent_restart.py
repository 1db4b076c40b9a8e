"""Shares outlive a restart of the host's agent: same ports, same key line."""

from __future__ import annotations

import asyncio
from pathlib import Path

from jupyter_remote_hw.sharing import COLLABORATOR
from jupyter_remote_hw.sharing.join import Attachment

from ..testhosts import SSHTestHost
from .conftest import OwnedKernel, run, started_client, stop_client


async def test_share_survives_an_agent_restart(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    share_id = granted.record.share_id
    await owned.agent.call("shutdown_agent", kill_kernels=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while not owned.agent.closed:
        assert loop.time() < deadline, "the agent did not stop"
        await asyncio.sleep(0.1)
    agent = await owned.machine.agent()  # a new agent, re-adopting the kernel and the share
    (kept,) = (await agent.call("list_shares"))["shares"]
    assert kept["share_id"] == share_id and kept["ports"] == granted.share_file.ports
    assert share_id in ssh_host.authorized_keys.read_text()
    async with Attachment(granted.share_file, teammate_key) as attachment:
        teammate = await started_client(attachment.connection_info())
        try:
            assert (await run(teammate, "after_restart = 1"))["status"] == "ok"
        finally:
            stop_client(teammate)
    assert (await run(owned.client, "assert after_restart == 1"))["status"] == "ok"
