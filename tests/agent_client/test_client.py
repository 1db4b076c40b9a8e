"""The agent client against a real local agent: long answers and unmatched lines."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from jupyter_remote_hw.agent_client import start_local_agent


async def test_answers_longer_than_a_stream_buffer_arrive() -> None:
    state = Path(tempfile.mkdtemp(prefix="jrhw-", dir="/tmp"))
    client = await start_local_agent(state / "agent")
    try:
        op = "x" * 200_000  # the agent names the unknown op in its answer
        answer = await client.response(op)
        assert answer["kind"] == "bad_request" and op in answer["error"]
        assert not client.closed
        assert (await client.call("list_kernels"))["kernels"] == []
    finally:
        await client.call("shutdown_agent", kill_kernels=True)
        await client.close()
        shutil.rmtree(state, ignore_errors=True)
