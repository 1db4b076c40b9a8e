"""A kernel's relay on its host ends with the kernel: the stream our side had to it is
closed when the kernel is shut down, so nothing it kept for that kernel (its unacknowledged
messages, its sockets) stays in a long-lived agent (issue 30, point 10)."""

from __future__ import annotations

import asyncio
import json

from .agentclient import Agent, AgentClient


async def test_a_kernels_relay_stream_ends_when_the_kernel_is_shut_down(
    agent: Agent, client: AgentClient
) -> None:
    started = await client.call("start_kernel", kernel_id="k-relayed", timeout=60)
    agent.kernel_pids.add(started["pid"])
    reader, writer = await asyncio.open_unix_connection(agent.socket)
    try:
        args = {"kernel_id": "k-relayed", "near": "test", "epoch": None, "received": 0}
        writer.write(json.dumps({"id": 1, "op": "relay", "args": args}).encode() + b"\n")
        answer = json.loads(await reader.readline())
        assert answer["ok"], answer
        await client.call("shutdown_kernel", kernel_id="k-relayed", now=True)
        async with asyncio.timeout(10):
            await reader.read()  # to the end: the agent closed the stream
    finally:
        writer.close()
