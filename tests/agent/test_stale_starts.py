"""What a start cut off before it was confirmed leaves on the host does not stay there:
the next start of that id replaces it when its caller says no such kernel runs (a
wake), a kernel whose starter went away before it was told is ended at once, and a
start that names an existing kernel does not keep it alive (issue 30, points 17, 18)."""

from __future__ import annotations

import asyncio
import json

import pytest

from jupyter_remote_hw.agent_client import AgentError

from .agentclient import Agent, AgentClient, running, wait_until

#: An owner this agent cannot check (another machine): only connections hold the kernel.
ELSEWHERE = {"machine": "another-machine", "host": "elsewhere", "pid": 4242, "start_time": 1}


async def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` seconds."""
    return await asyncio.to_thread(wait_until, lambda: not running(pid), timeout)


async def listed(client: AgentClient) -> set[str]:
    """The ids of the kernels the agent lists."""
    kernels = (await client.call("list_kernels"))["kernels"]
    return {str(k["kernel_id"]) for k in kernels}


async def test_a_start_that_replaces_ends_the_kernel_left_under_its_id(
    agent: Agent, client: AgentClient
) -> None:
    stale = await client.call("start_kernel", kernel_id="k-left", owner=ELSEWHERE, timeout=60)
    agent.kernel_pids.add(stale["pid"])
    with pytest.raises(AgentError) as exists:
        await client.call("start_kernel", kernel_id="k-left", timeout=60)
    assert exists.value.kind == "kernel_exists"

    fresh = await client.call("start_kernel", kernel_id="k-left", replace=True, timeout=60)
    agent.kernel_pids.add(fresh["pid"])
    assert fresh["pid"] != stale["pid"]
    assert await gone(stale["pid"])
    assert running(fresh["pid"]) and await listed(client) == {"k-left"}
    await client.call("shutdown_kernel", kernel_id="k-left", now=True)


async def test_a_kernel_whose_starter_went_away_before_the_answer_is_ended(
    agent: Agent, client: AgentClient
) -> None:
    starter = await agent.client()
    request = {
        "id": 1,
        "op": "start_kernel",
        "args": {"kernel_id": "k-unconfirmed", "owner": ELSEWHERE, "orphan_grace": 600},
    }
    pid_file = agent.kernels_dir / "k-unconfirmed.pid"
    await starter.send_raw(json.dumps(request).encode() + b"\n")
    # The agent has spawned the kernel (its pid file is written then) and waits for it
    # to answer (about 0.2 s here): a killed server goes now, and the answer never
    # reaches anyone. (A fixed sleep raced with that wait.)
    loop = asyncio.get_running_loop()
    began = loop.time()
    while not pid_file.exists():
        assert loop.time() - began < 30, "the agent never began the start"
        await asyncio.sleep(0.002)
    await starter.close()
    deadline, pid = loop.time() + 60, None
    # Once started, it is ended at once: not after its orphan grace of 600 s.
    while pid is None or running(pid) or "k-unconfirmed" in await listed(client):
        assert loop.time() < deadline, (pid, await listed(client))
        if pid is None and pid_file.exists():
            pid = int(pid_file.read_text().strip() or 0) or None
            agent.kernel_pids.add(pid or 0)
        await asyncio.sleep(0.05)
    assert not list(agent.kernels_dir.glob("k-unconfirmed*"))


async def test_a_start_naming_a_left_kernel_does_not_keep_it_alive(
    agent: Agent, client: AgentClient
) -> None:
    starter = await agent.client()
    left = await starter.call(
        "start_kernel", kernel_id="k-orphan", owner=ELSEWHERE, orphan_grace=2.0, timeout=60
    )
    agent.kernel_pids.add(left["pid"])
    await starter.close()  # its starter is gone: an orphan after 2 s
    with pytest.raises(AgentError) as exists:  # a new server's retry, on its own connection
        await client.call("start_kernel", kernel_id="k-orphan", timeout=60)
    assert exists.value.kind == "kernel_exists"
    # The retry's connection stays open; the orphan still ends after its grace.
    assert await gone(left["pid"], timeout=20)
