"""Test helpers: start a real agent daemon, talk to it over its unix socket, watch processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_remote_hw.agent_client import AgentClient as ProductClient

REPO = Path(__file__).resolve().parents[2]


class AgentClient(ProductClient):
    """Our own agent client, also sending raw lines and keeping unmatched answers.

    The agent answers a line it cannot read with an id of null; tests of the
    protocol look at those in :attr:`unmatched`.
    """

    def __init__(self, reader: Any, writer: Any, **kwargs: Any) -> None:
        self.unmatched: list[Any] = []
        super().__init__(reader, writer, **kwargs)

    @classmethod
    async def connect(cls, socket_path: str | Path) -> AgentClient:
        return await cls.connect_unix(str(socket_path))

    def _unmatched(self, message: object) -> None:
        self.unmatched.append(message)

    async def send_raw(self, line: bytes) -> None:
        self._writer.write(line)
        await self._writer.drain()


def agent_env() -> dict[str, str]:
    """Environment that imports this checkout's package (not an installed copy)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def serve_argv(state_dir: Path, *extra: str, python: str = sys.executable) -> list[str]:
    """The ``serve --daemon`` command line the local side runs."""
    return [
        python,
        "-m",
        "jupyter_remote_hw.agent",
        "serve",
        "--state-dir",
        str(state_dir),
        "--daemon",
        *extra,
    ]


def serve(
    state_dir: Path, *extra: str, python: str = sys.executable, timeout: float = 60.0, **kwargs: Any
) -> dict[str, Any]:
    """Run ``serve --daemon`` like the local side does; return its one JSON line."""
    proc = subprocess.run(
        serve_argv(state_dir, *extra, python=python),
        capture_output=True,
        env=agent_env(),
        timeout=timeout,
        check=False,
        **kwargs,
    )
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    line: dict[str, Any] = json.loads(lines[0])
    assert proc.returncode == (1 if "error" in line else 0), (proc.returncode, line, proc.stderr)
    return line


def process_state(pid: int) -> str | None:
    """The state letter of a process (R, S, Z, ...), or None when there is none."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()[0]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (zombies count as gone)."""
    return process_state(pid) not in (None, "Z", "X")


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


async def eventually(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Await until ``await predicate()`` is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(interval)


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(OSError):
            kill(pid, signal.SIGKILL)


@dataclass
class Agent:
    """A running agent daemon started for one test."""

    state_dir: Path
    socket: str
    pid: int
    version: str
    kernel_pids: set[int] = field(default_factory=set)
    extra_pids: set[int] = field(default_factory=set)

    @property
    def kernels_dir(self) -> Path:
        return self.state_dir / "kernels"

    async def client(self) -> AgentClient:
        return await AgentClient.connect(self.socket)

    def recorded_kernel_pids(self) -> set[int]:
        pids = set()
        for path in self.kernels_dir.glob("*.pid"):
            with contextlib.suppress(ValueError, OSError):
                pids.add(int(path.read_text().strip()))
        return pids
