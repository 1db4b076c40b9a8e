"""A killed Jupyter server's successor, on the same data dir, reattaches to running kernels.

These tests run jupyter_server as a separate process, so that it can really be
killed (SIGKILL: no shutdown code runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient

from ..serverprocess import Server
from ..serverprocess import start_server as start_server_process
from ..testhosts import SSHTestHost
from .conftest import HARDWARE, LOCAL_KERNEL, SSH_KERNEL, processes_under, write_config


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
    servers: list[Server] = []

    def start() -> Server:
        server = start_server_process(dirs, short_tmp / f"server-{len(servers)}.log")
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
    kernel_name: str,
    start_server: Any,
    http_client: None,
    remote_root: Path,
    short_tmp: Path,
) -> None:
    first: Server = start_server()
    await first.ready()
    kernel_id = (await first.api("kernels", method="POST", body={"name": kernel_name}))["id"]
    kc = await first.channels(kernel_id)
    assert (await kc.execute("import os; x = 42; pid = os.getpid()")).status == "ok"
    pid = (await kc.execute("pid")).result
    await kc.close()

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
    # Before any message to it, the taken-over kernel reads as what it is: idle.
    for _ in range(50):
        (model,) = await second.api("kernels")
        if model["execution_state"] != "starting":
            break
        await asyncio.sleep(0.1)
    assert model["execution_state"] == "idle"
    kc = await second.channels(kernel_id)
    assert (await kc.execute("x")).result == "42"
    assert (await kc.execute("pid")).result == pid
    await kc.close()

    # Stopping the server (as Ctrl-C does) shuts the kernel down; its agent,
    # left without kernels, stops too.
    second.process.send_signal(signal.SIGTERM)
    second.process.wait(60)
    for _ in range(100):
        if not processes_under(marker):
            break
        await asyncio.sleep(0.1)
    assert processes_under(marker) == []
