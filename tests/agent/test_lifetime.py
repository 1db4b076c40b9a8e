"""Idle stop and the dead-man switch, enforced by the agent on the loopback sshd host.

The stop command appends the reason to a file; the tests check that file.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking import BlockingKernelClient

from jupyter_remote_hw.agent_client import (
    AgentClient,
    AgentError,
    AgentUnavailableError,
    start_ssh_agent,
)
from jupyter_remote_hw.transport import SSHConnection

from ..conftest import settings_for
from ..testhosts import SSHTestHost, forward_kernel


@pytest.fixture
async def agent(
    ssh_host: SSHTestHost, short_tmp: Path
) -> AsyncIterator[tuple[AgentClient, SSHConnection]]:
    """The agent on the test host, started over SSH; stopped with its kernels afterwards."""
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        client = await start_ssh_agent(conn, python=sys.executable, root=str(short_tmp))
        try:
            yield client, conn
        finally:
            try:  # (a test may have stopped this agent and closed the client)
                await client.call("shutdown_agent", kill_kernels=True)
            except AgentUnavailableError:
                pass
            finally:
                await client.close()


def stop_command(marker: Path) -> list[str]:
    return ["sh", "-c", f'echo "$JRHW_STOP_REASON" >> {marker}']


async def wait_for(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.1)
    return bool(check())


async def forwarded(conn: SSHConnection, remote: dict[str, Any]) -> dict[str, Any]:
    return await forward_kernel(conn, remote)


def run_cell(connection: dict[str, Any], code: str, timeout: float) -> str:
    kc = BlockingKernelClient()
    kc.load_connection_info(connection)
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        reply = kc.execute_interactive(code, timeout=timeout, output_hook=lambda _m: None)
        return str(reply["content"]["status"])
    finally:
        kc.stop_channels()


async def test_idle_stop_fires_once_the_kernel_is_idle(
    agent: tuple[AgentClient, SSHConnection], short_tmp: Path
) -> None:
    client, _ = agent
    marker = short_tmp / "stopped"
    await client.call("start_kernel")
    policy = await client.call("set_lifetime", idle_stop=2, stop_command=stop_command(marker))
    assert policy["idle_stop"] == 2 and policy["deadman"] == 0
    assert not marker.exists()

    # The client keeps talking (heartbeats), so only idleness can fire.
    async def heartbeats() -> None:
        while True:
            await client.call("heartbeat")
            await asyncio.sleep(0.3)

    beat = asyncio.create_task(heartbeats())
    try:
        assert await wait_for(marker.exists, 15), "idle stop did not run the stop command"
    finally:
        beat.cancel()
    assert marker.read_text().split() == ["idle"]
    # The agent records the stop command once it has exited (just after it wrote the file).
    fired: list[dict[str, Any]] = []
    for _ in range(50):
        fired = (await client.call("lifetime"))["fired"]
        if fired:
            break
        await asyncio.sleep(0.1)
    assert fired[0]["reason"] == "idle" and fired[0]["exit_code"] == 0


async def test_long_running_cell_is_activity(
    agent: tuple[AgentClient, SSHConnection], short_tmp: Path
) -> None:
    client, conn = agent
    marker = short_tmp / "stopped"
    started = await client.call("start_kernel")
    local = await forwarded(conn, started["connection"])
    await client.call("set_lifetime", idle_stop=2, stop_command=stop_command(marker))
    began = time.monotonic()
    status = await asyncio.to_thread(run_cell, local, "import time; time.sleep(6)", 30)
    assert status == "ok" and time.monotonic() - began >= 6
    assert not marker.exists(), "idle stop fired while a cell was running"
    # Once the cell is over, the kernel is idle and the timer runs out.
    assert await wait_for(marker.exists, 15)
    assert marker.read_text().split() == ["idle"]


async def test_deadman_fires_with_kernels_running(
    agent: tuple[AgentClient, SSHConnection], short_tmp: Path
) -> None:
    client, conn = agent
    marker = short_tmp / "stopped"
    started = await client.call("start_kernel")
    local = await forwarded(conn, started["connection"])
    await client.call("set_lifetime", deadman=2, stop_command=stop_command(marker))
    # Heartbeats keep it from firing ...
    for _ in range(10):
        await client.call("heartbeat")
        await asyncio.sleep(0.4)
    assert not marker.exists()
    # ... and a busy kernel does not: the client is what has gone quiet.
    cell = asyncio.create_task(asyncio.to_thread(run_cell, local, "import time; time.sleep(5)", 30))
    assert await wait_for(marker.exists, 15), "the dead-man switch did not fire"
    assert marker.read_text().split()[0] == "deadman"
    assert await cell == "ok"
    kernels = await client.call("list_kernels")
    assert [k["alive"] for k in kernels["kernels"]] == [True]  # the stop command decides, not us


async def test_policy_survives_an_agent_restart_and_keeps_the_agent(
    agent: tuple[AgentClient, SSHConnection], ssh_host: SSHTestHost, short_tmp: Path
) -> None:
    client, conn = agent
    marker = short_tmp / "stopped"
    await client.call(
        "set_lifetime", idle_stop=3600, deadman=7200, stop_command=stop_command(marker)
    )
    state = short_tmp / ".local/state/jupyter-remote-hw/agent/lifetime.json"
    assert state.stat().st_mode & 0o077 == 0
    await client.call("shutdown_agent", kill_kernels=False)
    await client.close()
    again = await start_ssh_agent(conn, python=sys.executable, root=str(short_tmp), idle_exit=1)
    try:
        status = await again.call("lifetime")
        assert (status["idle_stop"], status["deadman"]) == (3600, 7200)
        assert status["stop_command"] == stop_command(marker)
        assert 3500 < status["idle_stop_in"] <= 3600
    finally:
        await again.call("shutdown_agent", kill_kernels=True)
        await again.close()


async def test_bad_policy_is_refused(agent: tuple[AgentClient, SSHConnection]) -> None:
    client, _ = agent
    with pytest.raises(AgentError, match="idle_stop.*0 or more"):
        await client.call("set_lifetime", idle_stop=-1)
    with pytest.raises(AgentError, match="stop_command.*list of strings"):
        await client.call("set_lifetime", idle_stop=5, stop_command="shutdown now")
    status = await client.call("lifetime")
    assert status["idle_stop"] == 0 and status["idle_stop_in"] is None
