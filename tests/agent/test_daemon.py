"""The agent daemon: readiness line, detachment, reuse, socket protocol, shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from jupyter_remote_hw.agent import AGENT_VERSION
from jupyter_remote_hw.agent.client import request_sync

from .agentclient import (
    Agent,
    AgentClient,
    agent_env,
    running,
    serve,
    serve_argv,
    wait_until,
)


async def test_hello_reports_version_and_host(agent: Agent, client: AgentClient) -> None:
    assert agent.version == AGENT_VERSION == "0.8.0"
    hello = await client.call("hello")
    assert hello["version"] == AGENT_VERSION
    assert hello["pid"] == agent.pid
    assert hello["python"] == sys.executable
    assert hello["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert hello["hostname"] == os.uname().nodename
    assert hello["user"]
    assert hello["state_dir"] == str(agent.state_dir)


def test_state_dir_socket_and_pid_files(agent: Agent) -> None:
    assert stat.S_IMODE(agent.state_dir.stat().st_mode) == 0o700
    sock = Path(agent.socket)
    assert sock == agent.state_dir / "agent.sock"
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert int((agent.state_dir / "agent.pid").read_text()) == agent.pid


def test_daemon_is_detached_and_outlives_its_session(
    state_dir: Path, start_agent: Callable[..., Agent]
) -> None:
    # The launcher runs in a session of its own, like a command run by sshd. Once it
    # has answered, that whole session is killed, as when the SSH connection drops.
    launcher = subprocess.Popen(
        serve_argv(state_dir),
        stdout=subprocess.PIPE,
        env=agent_env(),
        start_new_session=True,
    )
    out, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 0
    pid = json.loads(out)["pid"]
    agent = start_agent()  # registers the agent for clean-up (and checks reuse)
    assert agent.pid == pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(launcher.pid, signal.SIGKILL)
    stat_fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ppid, pgid, sid = int(stat_fields[1]), int(stat_fields[2]), int(stat_fields[3])
    assert ppid != launcher.pid
    assert sid not in (launcher.pid, os.getsid(0))
    assert pgid != launcher.pid
    assert sid != pid  # not a session leader, so it can never acquire a terminal
    assert running(pid)
    assert request_sync(agent.socket, "hello")["pid"] == pid
    assert (state_dir / "agent.log").exists()


def test_second_serve_reuses_the_running_agent(
    agent: Agent, start_agent: Callable[..., Agent]
) -> None:
    again = start_agent()
    assert (again.pid, again.socket, again.version) == (agent.pid, agent.socket, agent.version)


def test_foreground_serve_refuses_a_served_state_dir(agent: Agent) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_remote_hw.agent",
            "serve",
            "--state-dir",
            str(agent.state_dir),
        ],
        capture_output=True,
        env=agent_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    line = json.loads(proc.stdout)
    assert f"pid {agent.pid}" in line["error"]
    assert "already serves" in line["error"]


def test_foreground_serve_prints_ready_and_stops_on_sigterm(state_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter_remote_hw.agent", "serve", "--state-dir", str(state_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=agent_env(),
    )
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
        assert line == {
            "socket": str(state_dir / "agent.sock"),
            "pid": proc.pid,
            "version": AGENT_VERSION,
        }
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert not (state_dir / "agent.sock").exists()
    assert not (state_dir / "agent.pid").exists()


def test_too_long_state_dir_is_a_clear_error(workdir: Path) -> None:
    deep = workdir / ("x" * 100)
    line = serve(deep)
    assert "too long for a unix socket" in line["error"]
    assert "shorter --state-dir" in line["error"]


async def test_concurrent_requests_and_clients(agent: Agent, client: AgentClient) -> None:
    other = await agent.client()
    try:
        results = await asyncio.gather(
            client.call("hello"),
            client.call("list_kernels"),
            other.call("hello"),
            client.call("hardware"),
        )
    finally:
        await other.close()
    assert results[0]["pid"] == results[2]["pid"] == agent.pid
    assert results[1] == {"kernels": []}
    assert "summary" in results[3]
    assert client.unmatched == []


async def test_malformed_requests_get_bad_request(client: AgentClient) -> None:
    await client.send_raw(b"this is not json\n")
    await client.send_raw(b'{"op": "hello"}\n')
    await client.send_raw(b'{"id": 7, "op": "hello", "args": [1]}\n')
    unknown = await client.response("frobnicate")
    assert unknown["ok"] is False
    assert unknown["kind"] == "bad_request"
    assert "frobnicate" in unknown["error"]
    assert "start_kernel" in unknown["error"]  # lists what it knows
    missing = await client.response("kernel_status")
    assert missing["kind"] == "bad_request"
    assert "kernel_id" in missing["error"]
    wrong = await client.response("start_kernel", argv="python")
    assert wrong["kind"] == "bad_request"
    assert "argv" in wrong["error"]
    await asyncio.sleep(0.1)
    kinds = {(r["id"], r["kind"]) for r in client.unmatched}
    assert kinds == {(None, "bad_request"), (7, "bad_request")}
    assert len(client.unmatched) == 3


async def test_shutdown_agent_removes_its_files_and_exits(
    agent: Agent, client: AgentClient
) -> None:
    assert await client.call("shutdown_agent") == {"stopping": True}
    assert wait_until(lambda: not running(agent.pid), 20)
    assert not Path(agent.socket).exists()
    assert not (agent.state_dir / "agent.pid").exists()


async def test_shutdown_if_idle_keeps_an_agent_with_kernels(
    agent: Agent, client: AgentClient
) -> None:
    started = await client.call("start_kernel")
    agent.kernel_pids.add(started["pid"])
    assert await client.call("shutdown_agent", if_idle=True) == {"stopping": False}
    assert (await client.call("hello"))["pid"] == agent.pid
    await client.call("shutdown_kernel", kernel_id=started["kernel_id"])
    assert await client.call("shutdown_agent", if_idle=True) == {"stopping": True}
    assert wait_until(lambda: not running(agent.pid), 20)


async def test_agent_restarts_after_shutdown(
    agent: Agent, client: AgentClient, start_agent: Callable[..., Agent]
) -> None:
    await client.call("shutdown_agent")
    assert wait_until(lambda: not running(agent.pid), 20)
    second = start_agent()
    assert second.pid != agent.pid
    assert running(second.pid)


async def test_idle_exit_waits_for_kernels_and_clients(
    start_agent: Callable[..., Agent], state_dir: Path
) -> None:
    agent = start_agent(state_dir, idle_exit=1.0)
    client = await agent.client()
    started = await client.call("start_kernel")
    agent.kernel_pids.add(started["pid"])
    await asyncio.sleep(3)
    assert running(agent.pid)  # a kernel and a client
    await client.call("shutdown_kernel", kernel_id=started["kernel_id"])
    await asyncio.sleep(3)
    assert running(agent.pid)  # a client is still connected
    await client.close()
    assert wait_until(lambda: not running(agent.pid), 20)
    assert not Path(agent.socket).exists()
