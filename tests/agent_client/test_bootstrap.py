"""The agent started over real SSH and locally, and a kernel reached through forwards."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking import BlockingKernelClient

from jupyter_remote_hw.agent import AGENT_VERSION
from jupyter_remote_hw.agent_client import (
    AgentClient,
    AgentError,
    AgentUnavailableError,
    agent_zipapp,
    start_local_agent,
    start_ssh_agent,
)
from jupyter_remote_hw.transport import SSHConnection

from ..conftest import settings_for
from ..testhosts import SSHTestHost, forward_kernel


@pytest.fixture
async def ssh_conn(ssh_host: SSHTestHost) -> AsyncIterator[SSHConnection]:
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        yield conn


async def _stop(client: AgentClient) -> None:
    try:
        await client.call("shutdown_agent", kill_kernels=True)
    finally:
        await client.close()


def _execute(connection: dict[str, Any], code: str) -> dict[str, Any]:
    """Run ``code`` in the kernel at ``connection``; return the user expression ``result``."""
    kc = BlockingKernelClient()
    kc.load_connection_info(connection)
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=30)
        reply = kc.execute_interactive(
            code, timeout=30, user_expressions={"result": "result"}, output_hook=lambda _msg: None
        )
        assert reply["content"]["status"] == "ok", reply["content"]
        return dict(reply["content"]["user_expressions"]["result"])
    finally:
        kc.stop_channels()


async def test_agent_over_ssh_runs_a_kernel_reached_through_forwards(
    ssh_conn: SSHConnection, ssh_host: SSHTestHost, short_tmp: Path
) -> None:
    steps: list[str] = []
    client = await start_ssh_agent(
        ssh_conn, python=sys.executable, root=str(short_tmp), progress=steps.append
    )
    try:
        assert any("uploading the agent" in step for step in steps)
        hello = await client.call("hello")
        assert hello["version"] == AGENT_VERSION
        assert (
            short_tmp / ".cache/jupyter-remote-hw" / agent_zipapp()[0]
        ).stat().st_mode & 0o077 == 0
        started = await client.call("start_kernel")
        remote = started["connection"]
        # The kernel's channels are UNIX sockets in the state directory, reached
        # through forwards to their paths.
        assert remote["transport"] == "ipc"
        assert remote["ip"].startswith(str(short_tmp / ".local/state/jupyter-remote-hw"))
        local = await forward_kernel(ssh_conn, remote)
        result = await asyncio.to_thread(
            _execute, local, "import os, getpass; result = (os.getpid(), getpass.getuser())"
        )
        pid, user = ast.literal_eval(result["data"]["text/plain"])
        assert pid == started["pid"] and pid != os.getpid()
        assert user == ssh_host.user
    finally:
        await _stop(client)


async def test_second_start_reuses_upload_and_agent(
    ssh_conn: SSHConnection, short_tmp: Path
) -> None:
    first = await start_ssh_agent(ssh_conn, python=sys.executable, root=str(short_tmp))
    pid = (await first.call("hello"))["pid"]
    await first.close()
    steps: list[str] = []
    second = await start_ssh_agent(
        ssh_conn, python=sys.executable, root=str(short_tmp), progress=steps.append
    )
    try:
        assert not any("uploading" in step for step in steps)
        assert (await second.call("hello"))["pid"] == pid
    finally:
        await _stop(second)


async def test_an_altered_or_linked_bundle_is_replaced_before_it_runs(
    ssh_conn: SSHConnection, short_tmp: Path
) -> None:
    name, data = agent_zipapp()
    cache = short_tmp / ".cache/jupyter-remote-hw"
    cache.mkdir(parents=True)
    decoy = short_tmp / "decoy.pyz"
    decoy.write_bytes(b"import sys; sys.exit(7)")
    (cache / name).symlink_to(decoy)
    steps: list[str] = []
    client = await start_ssh_agent(
        ssh_conn, python=sys.executable, root=str(short_tmp), progress=steps.append
    )
    try:
        assert any("uploading the agent" in step for step in steps)
        assert (await client.call("hello"))["version"] == AGENT_VERSION
        assert decoy.read_bytes() == b"import sys; sys.exit(7)"  # the link was not followed
        assert not (cache / name).is_symlink() and (cache / name).read_bytes() == data
    finally:
        await _stop(client)
    (cache / name).write_bytes(data[:-1] + b"x")  # altered in place: same name, other bytes
    steps.clear()
    client = await start_ssh_agent(
        ssh_conn, python=sys.executable, root=str(short_tmp), progress=steps.append
    )
    try:
        assert any("uploading the agent" in step for step in steps)
        assert (cache / name).read_bytes() == data
    finally:
        await _stop(client)


async def test_missing_python_names_the_step(ssh_conn: SSHConnection, short_tmp: Path) -> None:
    with pytest.raises(AgentUnavailableError, match=r"prepare host testhost: `python-nowhere`"):
        await start_ssh_agent(ssh_conn, python="python-nowhere", root=str(short_tmp))


async def test_host_without_ipykernel_is_a_clear_error(
    ssh_conn: SSHConnection, short_tmp: Path
) -> None:
    venv = short_tmp / "bare"
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    bare_python = str(venv / "bin" / "python")
    client = await start_ssh_agent(ssh_conn, python=bare_python, root=str(short_tmp))
    try:
        with pytest.raises(AgentError) as err:
            await client.call("start_kernel")
        assert err.value.kind == "no_ipykernel"
        assert f"{bare_python} -m pip install ipykernel" in str(err.value)
        assert (await client.call("list_kernels"))["kernels"] == []
    finally:
        await _stop(client)


async def test_local_agent(short_tmp: Path) -> None:
    client = await start_local_agent(short_tmp / "agent")
    try:
        hello = await client.call("hello")
        assert hello["version"] == AGENT_VERSION and hello["python"] == sys.executable
        assert (short_tmp / "agent").stat().st_mode & 0o777 == 0o700
    finally:
        await _stop(client)
