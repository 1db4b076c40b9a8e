"""Stopping a real Jupyter server with kernels on an SSH host, as Ctrl-C does, is quiet
(no traceback and no asyncio warning in its output, at stop or at process exit), and
shuts its kernels down, also when no terminal is there to confirm a SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tornado.httpclient import AsyncHTTPClient

from ..kernelws import KernelChannels
from ..provisioner.conftest import HARDWARE, LOCAL_KERNEL, SSH_KERNEL, write_config
from ..serverprocess import start_server
from ..testhosts import SSHTestHost

#: What asyncio and Python print for errors nobody handled.
NOISE = (
    "Traceback",
    "Task was destroyed but it is pending",
    "Task exception was never retrieved",
    "Exception in callback",
    "Future exception was never retrieved",
    "coroutine was never awaited",
    "Unclosed",
)


@pytest.fixture
async def http_client() -> AsyncIterator[None]:
    yield
    AsyncHTTPClient().close()


@pytest.mark.parametrize("stop", ["ctrl-c twice", "sigterm", "sigint without terminal"])
async def test_server_stops_without_tracebacks(
    stop: str,
    ssh_host: SSHTestHost,
    short_tmp: Path,
    http_client: None,
) -> None:
    dirs = {name: short_tmp / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    remote_root = short_tmp / "r"
    write_config(
        dirs["config"] / "jupyter_server_config.json",
        ssh_host.ssh_config,
        remote_root,
        short_tmp / "l",
        [
            {
                "host": ssh_host.alias,
                "python": sys.executable,
                "hardware": HARDWARE,
                "root": str(remote_root),
            }
        ],
    )
    server = start_server(dirs, short_tmp / "server.log", terminal=stop == "ctrl-c twice")
    sockets: list[KernelChannels] = []
    pids: list[int] = []
    try:
        await server.ready()
        for name in (SSH_KERNEL, SSH_KERNEL, LOCAL_KERNEL):
            kernel_id = (await server.api("kernels", method="POST", body={"name": name}))["id"]
            kc = await server.channels(kernel_id)
            pids.append(int((await kc.execute("import os; os.getpid()")).result))
            sockets.append(kc)
        if stop == "ctrl-c twice":
            # The terminal sends SIGINT to the whole foreground process group;
            # the first asks for confirmation, the second stops the server.
            os.killpg(server.process.pid, signal.SIGINT)
            await asyncio.sleep(0.5)
            os.killpg(server.process.pid, signal.SIGINT)
        elif stop == "sigterm":
            server.process.send_signal(signal.SIGTERM)
        else:
            server.process.send_signal(signal.SIGINT)
        returncode = await asyncio.to_thread(server.process.wait, 60)
    finally:
        for kc in sockets:
            kc.ws.close()
            # Read to the end, so that the client's socket is really closed.
            async with asyncio.timeout(10):
                while await kc.ws.read_message() is not None:
                    pass
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(10)
        server.close_terminal()
    log = server.log.read_text()
    assert returncode == 0, log[-6000:]
    found = [noise for noise in NOISE if noise in log]
    assert not found, f"{found} in the server's output:\n{log[-6000:]}"
    # Every stop shuts the kernels down, on the host too: none is left running.
    assert len(pids) == 3
    for _ in range(100):
        running = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        if not running:
            break
        await asyncio.sleep(0.1)
    assert not running, f"kernels left running: {running}\n{log[-6000:]}"
