"""A kernel's relay on its host ends with the kernel: the stream our side had to it is
closed when the kernel is shut down, so nothing it kept for that kernel (its unacknowledged
messages, its sockets) stays in a long-lived agent (issue 30, point 10)."""

from __future__ import annotations

import asyncio
import json
import os
import signal

from jupyter_client.session import Session

from jupyter_remote_hw.agent.relay_frames import CHANNELS, encode_data

from .agentclient import Agent, AgentClient, running


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


async def test_a_restart_does_not_hand_the_new_process_what_was_sent_to_the_dead_one(
    agent: Agent, client: AgentClient
) -> None:
    """A restart's own ``shutdown_request`` reaches the relay while the old process is
    dead (killed, out of memory) and before its IOPub ever reached the relay; the relay
    held it for the kernel's ports and handed it to the new process, which ended at once
    (exit code 0: the lifecycle model's restart after a kill answered 500)."""
    started = await client.call("start_kernel", kernel_id="k-restarted", timeout=60)
    agent.kernel_pids.add(started["pid"])
    connection = started["connection"]
    reader, writer = await asyncio.open_unix_connection(agent.socket)
    try:
        args = {"kernel_id": "k-restarted", "near": "test", "epoch": None, "received": 0}
        writer.write(json.dumps({"id": 1, "op": "relay", "args": args}).encode() + b"\n")
        assert json.loads(await reader.readline())["ok"]
        os.kill(started["pid"], signal.SIGKILL)
        while running(started["pid"]):
            await asyncio.sleep(0.05)
        session = Session(key=str(connection["key"]).encode(), signature_scheme="hmac-sha256")
        request = session.msg("shutdown_request", {"restart": True})
        writer.write(encode_data(CHANNELS.index("control"), 1, session.serialize(request)))
        await writer.drain()
        await asyncio.sleep(0.5)  # the relay has it, for a process that is gone
        again = await client.call("restart_kernel", kernel_id="k-restarted", now=True, timeout=60)
        agent.kernel_pids.add(again["pid"])
        await asyncio.sleep(3)
        log = (agent.kernels_dir / "k-restarted.log").read_text()
        assert running(again["pid"]), f"the new process ended; its log ends: {log[-300:]}"
        assert (await client.call("kernel_status", kernel_id="k-restarted"))["alive"] is True
    finally:
        writer.close()
