"""Stopping a real Jupyter server with kernels on an SSH host, as Ctrl-C does, is quiet
(no traceback and no asyncio warning in its output, at stop or at process exit), and
shuts its kernels down, also when no terminal is there to confirm a SIGINT."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from jupyter_remote_hw.server.extension import MACHINES_SETTING
from jupyter_remote_hw.server.json_errors import STOPPING

from ..kernelws import KernelChannels
from ..processes import processes_under
from ..provisioner.conftest import LOCAL_KERNEL, SSH_KERNEL
from ..serverprocess import Server, server_dirs, start_server, write_ssh_host_config
from ..testhosts import SSHTestHost, free_port

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


@pytest.mark.timeout(200)
@pytest.mark.parametrize("stop", ["ctrl-c twice", "sigterm", "sigint without terminal"])
async def test_server_stops_without_tracebacks(
    stop: str,
    ssh_host: SSHTestHost,
    short_tmp: Path,
    http_client: None,
) -> None:
    dirs = server_dirs(short_tmp)
    write_ssh_host_config(dirs["config"], ssh_host, short_tmp)
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
        try:
            # Its kernels' shutdowns take seconds; one CI run waited over 60 s (why was
            # not seen then: a timeout now shows the server's log).
            returncode: int | None = await asyncio.to_thread(server.process.wait, 120)
        except subprocess.TimeoutExpired:
            returncode = None  # the assertion below shows the server's log
    finally:
        for kc in sockets:
            kc.ws.close()
            # Read to the end, so that the client's socket is really closed.
            async with asyncio.timeout(10):
                while await kc.ws.read_message() is not None:
                    pass
        server.kill()
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


def poll_during_stop(server: Server, path: str, answers: list[tuple[int, str]]) -> None:
    """GET ``path`` over one kept-alive connection, as a browser tab does, until the
    server closes it; record each answer's status and body."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        while True:
            try:
                connection.request("GET", path, headers={"Authorization": f"token {server.token}"})
                response = connection.getresponse()
                answers.append((response.status, response.read().decode()))
            except (OSError, http.client.HTTPException):
                return
            time.sleep(0.02)
    finally:
        connection.close()


#: What is under way when SIGTERM comes (each found to hang the server, or worse).
UNDER_WAY = [
    # jupyter_client keeps a failed start's id among the kernels starting: the
    # server's shutdown_all raised "Kernel does not exist" and its loop never stopped.
    "a failed start",
    # A restart's kernel is between two states: shutdown_all raised "Exception is not
    # set", the restart failed on the closed connection, the agent stayed.
    "a restart",
    # A client's DELETE of one of the kernels the stop shuts down.
    "a client's shutdown",
    # A launch not finished yet.
    "a launch",
]


@pytest.mark.parametrize("under_way", UNDER_WAY)
async def test_sigterm_with_work_under_way_stops_and_answers_503(
    under_way: str, ssh_host: SSHTestHost, short_tmp: Path, http_client: None
) -> None:
    """SIGTERM while something happens to a kernel: the server exits within the minute
    with status 0, nothing is left running, no traceback is logged, and a browser tab
    polling the machines over its kept-alive connection gets its machines (200) or
    "the server is stopping" (503, one line), never a 500."""
    dirs = server_dirs(short_tmp)
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(
        ssh_host.ssh_config.read_text() + ssh_host.config_block("deadhost", Port=free_port())
    )
    write_ssh_host_config(
        dirs["config"],
        ssh_host,
        short_tmp,
        ssh_config=ssh_config,
        more_hosts=[{"host": "deadhost", "hardware": "Gone GPU"}],
    )
    server = start_server(dirs, short_tmp / "server.log")
    answers: list[tuple[int, str]] = []
    poller: asyncio.Future[None] | None = None
    request: asyncio.Future[Any] | None = None
    try:
        await server.ready()
        kernels = [
            (await server.api("kernels", method="POST", body={"name": name}))["id"]
            for name in (SSH_KERNEL, SSH_KERNEL, "python3")
        ]
        # Jupyter's own kernel is shut down after ours: the window in which requests
        # meet our closed ledger.
        poller = asyncio.ensure_future(
            asyncio.to_thread(poll_during_stop, server, "/jupyter-remote-hw/api/machines", answers)
        )
        if under_way == "a failed start":
            with pytest.raises(HTTPClientError):
                await server.api("kernels", method="POST", body={"name": "remote-hw-ssh-deadhost"})
        elif under_way == "a restart":
            request = asyncio.ensure_future(
                server.api("kernels", kernels[0], "restart", method="POST")
            )
        elif under_way == "a launch":
            request = asyncio.ensure_future(
                server.api("kernels", method="POST", body={"name": SSH_KERNEL})
            )
        await asyncio.sleep(0.3)
        server.process.send_signal(signal.SIGTERM)
        if under_way == "a client's shutdown":
            request = asyncio.ensure_future(server.api("kernels", kernels[0], method="DELETE"))
        try:
            # Its kernels' shutdowns take seconds; one CI run waited over 60 s (why was
            # not seen then: a timeout now shows the server's log).
            returncode: int | None = await asyncio.to_thread(server.process.wait, 120)
        except subprocess.TimeoutExpired:
            returncode = None  # the assertion below shows the server's log
    finally:
        server.kill()
        if poller is not None:
            await poller
        if request is not None:
            await asyncio.gather(request, return_exceptions=True)
    log = server.log.read_text()
    assert returncode == 0, log[-6000:]
    found = [noise for noise in NOISE if noise in log]
    assert not found, f"{found} in the server's output:\n{log[-6000:]}"
    assert "[E " not in log, log[-6000:]
    assert {status for status, _ in answers} <= {200, 503}, f"{answers[-5:]}\n{log[-6000:]}"
    refused = [json.loads(body) for status, body in answers if status == 503]
    assert refused, f"no request met the stopping server: {answers[-5:]}"
    assert {r["message"] for r in refused} == {"the server is stopping: start it again, then retry"}
    for _ in range(100):
        left = processes_under(str(short_tmp))
        if not left:
            break
        await asyncio.sleep(0.1)
    assert not left, f"left running: {left}\n{log[-6000:]}"


#: Every route of the hardware API, with a body it would take.
ROUTES: list[tuple[str, tuple[str, ...], dict[str, Any] | None]] = [
    ("GET", ("hardware",), None),
    ("GET", ("machines",), None),
    ("POST", ("machines", "ssh-testhost", "stop"), {}),
    ("POST", ("launch",), {"hardware": "local"}),
    ("DELETE", ("launch", str(uuid.uuid4())), None),
    ("GET", ("variables", str(uuid.uuid4())), None),
    ("POST", ("switch", str(uuid.uuid4())), {"hardware": "local"}),
    ("GET", ("usage", str(uuid.uuid4())), None),
    ("POST", ("hibernate", str(uuid.uuid4())), {}),
    ("POST", ("wake", str(uuid.uuid4())), {}),
    ("PUT", ("hibernate-after", str(uuid.uuid4())), {"seconds": 0}),
    ("GET", ("shares",), None),
    ("DELETE", ("shares", "s1"), None),
    ("POST", ("join",), {"share_file": "{}"}),
    ("POST", ("hosts", "testhost", "trust"), {"fingerprint": "SHA256:x"}),
]


async def test_every_route_answers_503_once_the_ledger_is_closed(
    jp_fetch: Any, jp_serverapp: Any
) -> None:
    """What the stop leaves behind: a request that comes on a kept-alive connection
    after the ledger closed answers 503 with one line, never 500 'closed database';
    and the server's own stop copes with the ledger closed before it."""
    machines = jp_serverapp.web_app.settings[MACHINES_SETTING]
    assert json.loads((await jp_fetch("jupyter-remote-hw", "api", "machines")).body)
    machines.ledger.close()
    for method, path, body in ROUTES:
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch(
                "jupyter-remote-hw",
                "api",
                *path,
                method=method,
                body=None if body is None else json.dumps(body),
                allow_nonstandard_methods=True,
            )
        response = refused.value.response
        assert response is not None
        assert (response.code, json.loads(response.body)["message"]) == (503, STOPPING), path
