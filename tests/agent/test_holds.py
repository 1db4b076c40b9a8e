"""Kernels whose client is gone: orphans are shut down after their grace, dead kernels are
forgotten, and re-adopted kernels report their real execution state."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jupyter_remote_hw.agent.holds import process_identity
from jupyter_remote_hw.agent.kernels import FORGET_DEAD_AFTER

from .agentclient import Agent, AgentClient, agent_env, kill_group, running, wait_until
from .kernelclient import kernel_client, shell_reply

GRACE = 3.0

# A client process: starts a kernel, prints the result, then (optionally) closes its
# connection, and waits to be killed.
STARTER = textwrap.dedent("""
    import asyncio, json, sys
    from jupyter_remote_hw.agent_client import AgentClient
    from jupyter_remote_hw.agent.holds import process_identity

    async def main():
        client = await AgentClient.connect_unix(sys.argv[1])
        owner = json.loads(sys.argv[3]) or process_identity()
        started = await client.call("start_kernel", owner=owner, orphan_grace=float(sys.argv[2]))
        if sys.argv[4] == "close":
            await client.close()
        print(json.dumps(started), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


@pytest.fixture
def starters() -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], dict[str, Any]]]]:
    """Start client processes that start one kernel each; all are killed afterwards."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        agent: Agent, grace: float, owner: dict[str, Any] | None = None, close: bool = False
    ) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                STARTER,
                agent.socket,
                str(grace),
                json.dumps(owner),
                "close" if close else "keep",
            ],
            stdout=subprocess.PIPE,
            env=agent_env(),
        )
        procs.append(proc)
        assert proc.stdout is not None
        started: dict[str, Any] = json.loads(proc.stdout.readline())
        agent.kernel_pids.add(started["pid"])
        return proc, started

    yield start
    for proc in procs:
        kill_group(proc.pid)
        proc.wait(10)
        assert proc.stdout is not None
        proc.stdout.close()


def seconds_until_gone(pid: int, limit: float) -> float:
    began = time.monotonic()
    assert wait_until(lambda: not running(pid), limit), f"kernel {pid} still runs"
    return time.monotonic() - began


async def test_kernel_of_a_killed_client_is_shut_down_after_the_grace(
    agent: Agent, client: AgentClient, starters: Any
) -> None:
    owner, started = starters(agent, GRACE)
    look = await agent.client()  # (a request naming the kernel holds it while connected)
    status = await look.call("kernel_status", kernel_id=started["kernel_id"])
    await look.close()
    assert (status["orphan_grace"], status["held"], status["orphan_in"]) == (GRACE, True, None)

    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    waited = seconds_until_gone(started["pid"], GRACE + 10)
    assert GRACE - 0.5 <= waited <= GRACE + 3, waited
    assert wait_until(lambda: not list(agent.kernels_dir.glob(started["kernel_id"] + ".*")), 5)
    assert (await client.call("list_kernels"))["kernels"] == []


async def test_a_live_owner_on_this_machine_holds_its_kernel_without_a_connection(
    agent: Agent, client: AgentClient, starters: Any
) -> None:
    owner, started = starters(agent, 1.0, close=True)
    await asyncio.sleep(1.0 + 2.0)
    assert running(started["pid"])  # its starter closed the connection but lives
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    waited = seconds_until_gone(started["pid"], 10)
    assert 0.5 <= waited <= 1.0 + 3, waited


async def test_a_client_elsewhere_holds_its_kernel_while_connected_and_a_reattaching_one_keeps_it(
    agent: Agent, client: AgentClient, starters: Any
) -> None:
    elsewhere = {"machine": "another-boot/pid:[1]", "host": "laptop", "pid": os.getpid()}
    owner, started = starters(agent, GRACE, owner=elsewhere)
    kernel_id = started["kernel_id"]
    await asyncio.sleep(GRACE + 1.5)
    assert running(started["pid"])  # its connection is open
    owner.send_signal(signal.SIGKILL)  # the SSH link to the laptop closes
    owner.wait(10)

    await asyncio.sleep(GRACE / 2)
    status = await client.call("kernel_status", kernel_id=kernel_id)  # a server reattaches
    assert status["held"] is True and status["alive"] is True
    await asyncio.sleep(GRACE + 1.5)
    assert running(started["pid"])

    await client.close()  # and goes away too
    waited = seconds_until_gone(started["pid"], GRACE + 10)
    assert GRACE - 0.5 <= waited <= GRACE + 3, waited


async def test_no_grace_keeps_kernels_of_killed_clients(
    agent: Agent, client: AgentClient, starters: Any
) -> None:
    owner, started = starters(agent, 0)
    owner.send_signal(signal.SIGKILL)
    owner.wait(10)
    await asyncio.sleep(2.0)
    status = await client.call("kernel_status", kernel_id=started["kernel_id"])
    assert (status["alive"], status["orphan_grace"], status["orphan_in"]) == (True, 0, None)


async def test_a_kernel_killed_outside_the_agent_is_forgotten_and_the_idle_agent_exits(
    start_agent: Callable[..., Agent],
) -> None:
    agent = start_agent(idle_exit=1.0)
    client = await agent.client()
    started = await client.call("start_kernel", owner=process_identity(), orphan_grace=600)
    agent.kernel_pids.add(started["pid"])
    os.killpg(started["pid"], signal.SIGKILL)
    assert wait_until(lambda: not running(started["pid"]), 10)
    await asyncio.sleep(1.0)
    status = await client.call("kernel_status", kernel_id=started["kernel_id"])
    assert (status["alive"], status["execution_state"]) == (False, "dead")
    await client.close()

    began = time.monotonic()
    assert wait_until(lambda: not running(agent.pid), FORGET_DEAD_AFTER + 10)
    assert time.monotonic() - began >= FORGET_DEAD_AFTER - 2
    assert list(agent.kernels_dir.iterdir()) == []


async def test_readopted_kernels_report_idle_and_busy_at_once(
    agent: Agent, client: AgentClient, start_agent: Callable[..., Agent]
) -> None:
    idle = await client.call("start_kernel", kernel_id="idle")
    busy = await client.call("start_kernel", kernel_id="busy")
    agent.kernel_pids |= {idle["pid"], busy["pid"]}
    with kernel_client(busy["connection"]) as kc:
        msg_id = kc.execute("import time; time.sleep(8)")
        await asyncio.sleep(0.5)
        await client.call("shutdown_agent", kill_kernels=False)
        assert wait_until(lambda: not running(agent.pid), 20)

        second = start_agent()
        conn = await second.client()
        try:
            states = {
                k["kernel_id"]: k["execution_state"]
                for k in (await conn.call("list_kernels"))["kernels"]
            }
            assert states == {"idle": "idle", "busy": "busy"}
            shell_reply(kc, msg_id, timeout=30)
            await asyncio.sleep(0.5)
            status = await conn.call("kernel_status", kernel_id="busy")
            assert status["execution_state"] == "idle"
        finally:
            await conn.close()
