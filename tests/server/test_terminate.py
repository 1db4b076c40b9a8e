"""Terminate ends what it says it ends: against a real Jupyter server and a loopback SSH
host, terminating a host that holds only a kernel ``%%remote`` started from a notebook
shuts that kernel down on the host, stops the agent, and says so; the notebook's next
``%%remote`` cell says the earlier kernel and its variables are gone instead of running
on a new kernel without them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_remote_hw.processes import process_alive

from ..provisioner.conftest import SSH_TARGET
from ..serverprocess import Server, ssh_host_server
from ..testhosts import SSHTestHost


async def ours(server: Server, *path: str, method: str = "GET") -> dict[str, Any]:
    """A ``/jupyter-remote-hw/api/...`` request's JSON answer."""
    response = await AsyncHTTPClient().fetch(
        HTTPRequest(
            f"{server.url}/jupyter-remote-hw/api/{'/'.join(path)}",
            method=method,
            headers={"Authorization": f"token {server.token}"},
            body=b"" if method == "POST" else None,
            request_timeout=120,
        )
    )
    answer: dict[str, Any] = json.loads(response.body)
    return answer


@pytest.fixture
async def server(
    ssh_host: SSHTestHost, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Server]:
    async with ssh_host_server(ssh_host, short_tmp, monkeypatch) as server:
        yield server


@pytest.mark.parametrize(("action", "final"), [("terminate", "terminated"), ("stop", "stopped")])
async def test_terminating_a_host_that_holds_only_a_remote_kernel_ends_it_and_says_so(
    server: Server, action: str, final: str
) -> None:
    """Stopping an SSH host (the panel's button for hardware the user owns) does what
    terminating it does; the host itself runs on."""
    session = await server.api(
        "sessions",
        method="POST",
        body={"path": "work.ipynb", "type": "notebook", "kernel": {"name": "python3"}},
    )
    kc = await server.channels(session["kernel"]["id"])
    assert (await kc.execute("%load_ext jupyter_remote_hw")).status == "ok"
    ran = await kc.execute(
        f"%%remote {SSH_TARGET}\nimport os\nx = 7\nprint('pid', os.getpid())", timeout=120
    )
    assert ran.status == "ok", ran
    remote_pid = int(ran.stdout.split()[-1])
    listed = {m["name"]: m for m in (await ours(server, "machines"))["machines"]}
    [remote] = listed[SSH_TARGET]["kernels"]
    assert remote["owner"].startswith("magic:")
    assert remote["path"] == "work.ipynb"  # the notebook whose kernel started it

    assert listed[SSH_TARGET]["actions"] == ["start", "stop"]
    ended = (await ours(server, "machines", SSH_TARGET, action, method="POST"))["machine"]
    assert ended["kernels_shut_down"] == [remote["id"]], ended
    assert ended["kernels_kept"] == []
    assert ended["agent_stopped"] is True and ended["state"] == final
    assert not process_alive(remote_pid)  # the loopback host is this machine
    assert SSH_TARGET not in {m["name"] for m in (await ours(server, "machines"))["machines"]}

    # The notebook's next %%remote cell does not run on a new kernel without `x`: it
    # says what happened; run again, it starts a new kernel there.
    cell = f"%%remote {SSH_TARGET}\nprint('x' in globals())"
    ran = await kc.execute(cell, timeout=120)
    assert ran.status == "error" and ran.ename == "RemoteKernelLostError", ran
    said = "".join(m["content"].get("evalue", "") for m in ran.messages)
    assert f"the kernel on {SSH_TARGET} ended" in said and "terminated" in said
    assert "Its variables are gone; the next %%remote starts a new kernel there." in said
    ran = await kc.execute(cell, timeout=120)
    assert ran.status == "ok", ran
    assert ran.stdout.split()[-1] == "False"
    await kc.close()
