"""Fixtures: a real agent daemon per test in a short /tmp state dir, cleaned up after."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.agent.client import AgentUnavailable, request_sync

from .agentclient import Agent, AgentClient, kill_group, running, serve, wait_until


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short directory under /tmp (unix socket paths must stay under 108 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="rhw-", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def state_dir(workdir: Path) -> Path:
    return workdir / "state"


def stop_agent(agent: Agent) -> None:
    """Shut an agent down with its kernels, then kill whatever is left."""
    pids = agent.recorded_kernel_pids() | agent.kernel_pids | agent.extra_pids
    if running(agent.pid):
        with contextlib.suppress(AgentUnavailable, Exception):
            request_sync(agent.socket, "shutdown_agent", {"kill_kernels": True}, timeout=30)
        if not wait_until(lambda: not running(agent.pid), 20):
            kill_group(agent.pid)
    for pid in pids:
        if running(pid):
            kill_group(pid)


@pytest.fixture
def start_agent(state_dir: Path) -> Iterator[Callable[..., Agent]]:
    """Start (or reuse) the agent daemon on a state dir; every one is stopped after the test."""
    agents: list[Agent] = []

    def start(path: Path = state_dir, idle_exit: float | None = None, **kwargs: Any) -> Agent:
        extra = ("--idle-exit", str(idle_exit)) if idle_exit is not None else ()
        line = serve(path, *extra, **kwargs)
        assert "error" not in line, line
        agent = Agent(path, line["socket"], line["pid"], line["version"])
        agents.append(agent)
        return agent

    yield start
    for agent in reversed(agents):
        stop_agent(agent)


@pytest.fixture
def agent(start_agent: Callable[..., Agent]) -> Agent:
    return start_agent()


@pytest.fixture
async def client(agent: Agent) -> AsyncIterator[AgentClient]:
    conn = await agent.client()
    yield conn
    await conn.close()
