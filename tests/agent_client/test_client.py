"""The agent client against real local agents: long answers, replacing an older agent."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jupyter_remote_hw
from jupyter_remote_hw.agent import AGENT_VERSION
from jupyter_remote_hw.agent_client import AgentClient, start_local_agent


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


async def test_an_agent_of_another_version_is_replaced_and_its_kernels_kept(
    tmp_path: Path,
) -> None:
    # A real older build: the agent package copied with another version number.
    old = tmp_path / "old" / "jupyter_remote_hw"
    shutil.copytree(
        Path(jupyter_remote_hw.__file__).parent / "agent",
        old / "agent",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (old / "__init__.py").write_text("")
    init = old / "agent" / "__init__.py"
    init.write_text(
        re.sub(r'AGENT_VERSION = "[^"]+"', 'AGENT_VERSION = "0.0.1-old"', init.read_text())
    )
    state = Path(tempfile.mkdtemp(prefix="jrhw-", dir="/tmp")) / "agent"
    env = {**os.environ, "PYTHONPATH": str(old.parent)}
    started = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "jupyter_remote_hw.agent",
            "serve",
            "--state-dir",
            str(state),
            "--daemon",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    ready = json.loads(started.stdout)
    assert ready["version"] == "0.0.1-old"
    old_client = await AgentClient.connect_unix(ready["socket"])
    kernel = await old_client.call("start_kernel", kernel_id="survivor")
    await old_client.close()

    steps: list[str] = []
    client = await start_local_agent(state, progress=steps.append)
    try:
        hello = await client.call("hello")
        assert hello["version"] == AGENT_VERSION and hello["pid"] != ready["pid"]
        assert steps.count("prepare host: starting the agent") == 2
        kept = await client.call("kernel_status", kernel_id="survivor")
        assert kept["alive"] and kept["pid"] == kernel["pid"]
    finally:
        await client.call("shutdown_agent", kill_kernels=True)
        await client.close()
        shutil.rmtree(state.parent, ignore_errors=True)
