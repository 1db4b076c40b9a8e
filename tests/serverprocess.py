"""A jupyter_server run as its own process on 127.0.0.1, driven over HTTP and websockets.

Used where a server must really be killed (tests) or timed from outside (benchmarks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from .kernelws import KernelChannels
from .testhosts import SSHTestHost, free_port

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Server:
    """A jupyter_server process on 127.0.0.1 with a token."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    log: Path
    terminal: int | None = None
    """The controlling side of the server's terminal, when it was given one."""

    def close_terminal(self) -> None:
        """Close the server's terminal, if it has one."""
        if self.terminal is not None:
            os.close(self.terminal)
            self.terminal = None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server as a service manager does (SIGTERM), and kill it if it has
        not exited within ``timeout`` seconds."""
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """Kill the server if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def api(self, *path: str, method: str = "GET", body: Any = None) -> Any:
        request = HTTPRequest(
            f"{self.url}/api/{'/'.join(path)}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
            body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
            request_timeout=120,
        )
        response = await AsyncHTTPClient().fetch(request)
        return json.loads(response.body) if response.body else None

    async def channels(self, kernel_id: str) -> KernelChannels:
        ws_url = f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"
        ws = await websocket_connect(
            HTTPRequest(ws_url, headers={"Authorization": f"token {self.token}"})
        )
        kc = KernelChannels(ws)
        await kc.wait_ready()
        return kc

    async def ready(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-3000:]}")
            try:
                await self.api("status")
                return
            except (OSError, HTTPClientError):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)


def server_dirs(root: Path) -> dict[str, Path]:
    """A server's ``config``, ``data``, ``runtime`` and ``nb`` (root) directories, made
    under ``root``."""
    dirs = {name: root / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    return dirs


def write_ssh_host_config(
    config_dir: Path,
    ssh_host: SSHTestHost,
    state: Path,
    *,
    ssh_config: Path | None = None,
    more_hosts: Sequence[dict[str, Any]] = (),
) -> None:
    """A ``jupyter_server_config.json`` in ``config_dir`` offering the SSH test host,
    its remote root ``state/r`` and local root ``state/l``, then ``more_hosts``; the
    test host's SSH config unless ``ssh_config`` is given."""
    from .provisioner.conftest import HARDWARE, write_config

    remote_root = state / "r"
    write_config(
        config_dir / "jupyter_server_config.json",
        ssh_config or ssh_host.ssh_config,
        remote_root,
        state / "l",
        [
            {
                "host": ssh_host.alias,
                "python": sys.executable,
                "hardware": HARDWARE,
                "root": str(remote_root),
            },
            *more_hosts,
        ],
    )


def start_server(
    dirs: dict[str, Path], log: Path, *, terminal: bool = False, args: Sequence[str] = ()
) -> Server:
    """Start ``python -m jupyter_server`` with its config, data, runtime and root dirs.

    Args:
        dirs: ``config``, ``data``, ``runtime`` and ``nb`` (the root dir).
        log: Where its output goes.
        terminal: Give it a terminal on stdin and its own process group, as a
            shell does, so that Ctrl-C (SIGINT to the group) works as for a user.
        args: More command-line options, such as ``--ServerApp.name=value``.
    """
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(dirs["config"]),
        "JUPYTER_DATA_DIR": str(dirs["data"]),
        "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
        # This checkout first, then what the caller had (wheels carried to a bare
        # machine, say).
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    controller, stdin = pty.openpty() if terminal else (None, subprocess.DEVNULL)
    try:
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jupyter_server",
                    "--ServerApp.ip=127.0.0.1",
                    f"--ServerApp.port={port}",
                    "--ServerApp.port_retries=0",
                    "--ServerApp.open_browser=False",
                    f"--IdentityProvider.token={token}",
                    f"--ServerApp.root_dir={dirs['nb']}",
                    "--allow-root",
                    *args,
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=stdin,
                start_new_session=terminal,
            )
    finally:
        if controller is not None:
            os.close(stdin)
    return Server(process, port, token, log, controller)


@contextlib.asynccontextmanager
async def ssh_host_server(
    ssh_host: SSHTestHost, state: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Server]:
    """A Jupyter server process offering the SSH test host, its notebooks in
    ``state/nb``; this process shares its Jupyter config, data and runtime directories
    (so that the CLI finds it). Stopped afterwards."""
    dirs = server_dirs(state)
    write_ssh_host_config(dirs["config"], ssh_host, state)
    for name, key in (("config", "CONFIG"), ("data", "DATA"), ("runtime", "RUNTIME")):
        monkeypatch.setenv(f"JUPYTER_{key}_DIR", str(dirs[name]))
    server = start_server(dirs, state / "server.log")
    try:
        await server.ready()
        yield server
    finally:
        if server.process.poll() is None:
            server.process.terminate()
            await asyncio.to_thread(server.process.wait, 30)
        AsyncHTTPClient().close()
