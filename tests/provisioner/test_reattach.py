"""A killed Jupyter server's successor, on the same data dir, reattaches to running kernels.

These tests run jupyter_server as a separate process, so that it can really be
killed (SIGKILL: no shutdown code runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from ..kernelws import KernelChannels
from ..testhosts import SSHTestHost, free_port
from .conftest import HARDWARE, LOCAL_KERNEL, SSH_KERNEL, processes_under, write_config

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Server:
    """A jupyter_server process on 127.0.0.1 with a token."""

    process: subprocess.Popen[bytes]
    port: int
    token: str
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def api(self, *path: str, method: str = "GET", body: Any = None) -> Any:
        request = HTTPRequest(
            f"{self.url}/api/{'/'.join(path)}", method=method,
            headers={"Authorization": f"token {self.token}"},
            body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
            request_timeout=120,
        )
        response = await AsyncHTTPClient().fetch(request)
        return json.loads(response.body) if response.body else None

    async def channels(self, kernel_id: str) -> KernelChannels:
        ws_url = f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"
        ws = await websocket_connect(HTTPRequest(
            ws_url, headers={"Authorization": f"token {self.token}"}
        ))
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


@pytest.fixture
def dirs(short_tmp: Path) -> dict[str, Path]:
    made = {name: short_tmp / name for name in ("config", "data", "runtime", "nb")}
    for path in made.values():
        path.mkdir()
    return made


@pytest.fixture
def start_server(
    dirs: dict[str, Path], ssh_host: SSHTestHost, remote_root: Path, short_tmp: Path
) -> Iterator[Any]:
    """Start servers sharing one config, data and runtime dir; all are killed afterwards."""
    write_config(
        dirs["config"] / "jupyter_server_config.json", ssh_host.ssh_config, remote_root,
        short_tmp / "l", [{"host": ssh_host.alias, "hardware": HARDWARE,
                           "root": str(remote_root)}],
    )
    servers: list[Server] = []

    def start() -> Server:
        port, token = free_port(), secrets.token_hex(16)
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(dirs["config"]),
            "JUPYTER_DATA_DIR": str(dirs["data"]),
            "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
            "PYTHONPATH": str(REPO),
        }
        log = short_tmp / f"server-{len(servers)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "jupyter_server", "--ServerApp.ip=127.0.0.1",
                 f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
                 "--ServerApp.open_browser=False", f"--IdentityProvider.token={token}",
                 f"--ServerApp.root_dir={dirs['nb']}", "--allow-root"],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        server = Server(process, port, token, log)
        servers.append(server)
        return server

    yield start
    for server in servers:
        with contextlib.suppress(ProcessLookupError):
            server.process.kill()
        server.process.wait(10)


@pytest.fixture
async def http_client() -> AsyncIterator[None]:
    yield
    AsyncHTTPClient().close()


@pytest.mark.parametrize("kernel_name", [SSH_KERNEL, LOCAL_KERNEL])
async def test_new_server_reattaches_to_the_kernel_with_its_state(
    kernel_name: str, start_server: Any, http_client: None, remote_root: Path, short_tmp: Path,
) -> None:
    first: Server = start_server()
    await first.ready()
    kernel_id = (await first.api("kernels", method="POST", body={"name": kernel_name}))["id"]
    kc = await first.channels(kernel_id)
    assert (await kc.execute("import os; x = 42; pid = os.getpid()")).status == "ok"
    pid = (await kc.execute("pid")).result
    kc.ws.close()

    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    marker = str(remote_root) if kernel_name == SSH_KERNEL else str(short_tmp / "l")
    assert any("ipykernel" in p for p in processes_under(marker))  # still running

    second: Server = start_server()
    await second.ready()
    for _ in range(100):
        listed = [k["id"] for k in await second.api("kernels")]
        if kernel_id in listed:
            break
        await asyncio.sleep(0.2)
    assert listed == [kernel_id], second.log.read_text()[-4000:]
    kc = await second.channels(kernel_id)
    assert (await kc.execute("x")).result == "42"
    assert (await kc.execute("pid")).result == pid
    kc.ws.close()

    await second.api("kernels", kernel_id, method="DELETE")
    for _ in range(100):
        if not processes_under(marker):
            break
        await asyncio.sleep(0.1)
    assert processes_under(marker) == []
