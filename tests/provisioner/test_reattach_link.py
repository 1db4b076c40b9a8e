"""A server killed and restarted while its host is unreachable waits for the host, then
reattaches its kernel, which kept running meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..serverprocess import Server
from ..serverprocess import start_server as start_server_process
from ..testhosts import NetnsTestHost
from .conftest import write_config


@pytest.fixture
def start_server(ns_host: NetnsTestHost, remote_root: Path, short_tmp: Path) -> Iterator[Any]:
    """Start servers sharing one config, data and runtime dir; all are killed afterwards."""
    dirs = {name: short_tmp / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    write_config(
        dirs["config"] / "jupyter_server_config.json",
        ns_host.ssh_config,
        remote_root,
        short_tmp / "l",
        [
            {
                "host": ns_host.alias,
                "python": sys.executable,
                "hardware": "Far GPU",
                "root": str(remote_root),
            }
        ],
        RemoteHWExtension={"reattach_retry_max": 2.0},
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


@pytest.mark.timeout(240)
async def test_server_restarted_during_a_cut_reattaches_when_the_host_returns(
    ns_host: NetnsTestHost,
    start_server: Any,
    http_client: None,
) -> None:
    assert ns_host.link is not None
    first: Server = start_server()
    await first.ready()
    kernel_id = (
        await first.api("kernels", method="POST", body={"name": "remote-hw-ssh-" + ns_host.alias})
    )["id"]
    kc = await first.channels(kernel_id)
    assert (await kc.execute("x = 42")).status == "ok"
    await kc.send(
        "execute_request",
        {
            "code": "import time\nfor i in range(20):\n    print(f'tick {i}', flush=True)\n"
            "    time.sleep(1)\n",
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    )
    await asyncio.sleep(3)
    await kc.close()

    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    ns_host.link.cut()
    try:
        second: Server = start_server()
        await second.ready()
        await asyncio.sleep(8)
        # The kernel is not Jupyter's yet; the panel says what it waits for.
        assert await second.api("kernels") == []
        reply = await AsyncHTTPClient().fetch(
            HTTPRequest(
                f"{second.url}/jupyter-remote-hw/api/machines",
                headers={"Authorization": f"token {second.token}"},
            )
        )
        machines = json.loads(reply.body)
        rows = {k["id"]: k for m in machines["machines"] for k in m["kernels"]}
        assert rows[kernel_id]["state"] == f"waiting for {ns_host.alias}", rows
    finally:
        ns_host.link.restore()

    for _ in range(150):
        if kernel_id in [k["id"] for k in await second.api("kernels")]:
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError(second.log.read_text()[-4000:])
    kc = await second.channels(kernel_id)
    # The cell that ran through it all finished; the kernel's state is as it was.
    assert (await kc.execute("i, x")).result == "(19, 42)"
    await kc.close()
