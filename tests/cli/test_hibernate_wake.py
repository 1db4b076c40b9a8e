"""``jupyter remote-hw hibernate`` and ``wake`` against a real Jupyter server (its own
process) with a kernel on the loopback SSH host: the CLI finds the server from its
runtime file and the kernel by the start of its id, shows the steps while the server
works, and says what was saved and restored; the kernel keeps its id and variables.
Without a server, for a kernel no server has, or a target that cannot take the kernel,
it says why in one line and exits 1, the kernel left as it was."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.cli.hibernating import NO_SERVER

from ..provisioner.conftest import SSH_KERNEL, SSH_TARGET
from ..serverprocess import Server, ssh_host_server
from ..testhosts import SSHTestHost
from .conftest import no_credentials  # noqa: F401 (fixture)


async def cli(*argv: str) -> tuple[int, str, str]:
    """``jupyter remote-hw ARGV`` in this process (the Jupyter paths from the environment)."""
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


async def kernel_row(server: Server, kernel_id: str) -> tuple[str, dict[str, Any]]:
    """The machine a kernel is listed under by ``GET /jupyter-remote-hw/api/machines``, and
    its row there."""
    response = await AsyncHTTPClient().fetch(
        HTTPRequest(
            f"{server.url}/jupyter-remote-hw/api/machines",
            headers={"Authorization": f"token {server.token}"},
        )
    )
    rows = [
        (m["name"], k)
        for m in json.loads(response.body)["machines"]
        for k in m["kernels"]
        if k["id"] == kernel_id
    ]
    assert len(rows) == 1, rows
    return rows[0]


@pytest.fixture
async def server(
    ssh_host: SSHTestHost, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Server]:
    """A Jupyter server offering the SSH test host, whose Jupyter paths the CLI shares."""
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    async with ssh_host_server(ssh_host, short_tmp, monkeypatch) as server:
        yield server


@pytest.mark.timeout(240)
async def test_hibernate_and_wake_from_the_command_line(server: Server, short_tmp: Path) -> None:
    kernel_id = (await server.api("kernels", method="POST", body={"name": SSH_KERNEL}))["id"]
    kc = await server.channels(kernel_id)
    opened = f"x = 6 * 7; f = open({str(short_tmp / 'f.txt')!r}, 'w')"
    assert (await kc.execute(opened)).status == "ok"

    # refuse: the open file keeps it awake, said in the server's words; exit 1.
    code, out, err = await cli("hibernate", kernel_id[:8], "--policy", "refuse")
    assert code == 1, (out, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith("jupyter remote-hw hibernate: ") and "'f'" in last, err
    assert (await kernel_row(server, kernel_id))[1]["state"] == "idle"

    # partial (the default): the rest is saved, the open file named; steps while it runs.
    code, out, err = await cli("hibernate", kernel_id[:8])
    assert code == 0, (out, err)
    assert err.startswith(f"Hibernating kernel {kernel_id} on the Jupyter server at {server.url}")
    # The kernel writes its state on its host's disk itself.
    assert "writing on the disk of testhost" in err and "saved: " in err, err
    assert out.startswith(f"kernel {kernel_id} hibernated: "), out
    assert " saved in " in out and "(1 variable, 0 modules)" in out, out
    assert "left out: f (_io.TextIOWrapper): it is an open file" in out, out
    assert server.token not in out + err
    machine, row = await kernel_row(server, kernel_id)
    assert (machine, row["state"]) == (SSH_TARGET, "hibernated")

    # The saved state is listed as held by the running server.
    code, out, err = await cli("hibernated")
    assert code == 0, err
    header, _, line, *_ = out.splitlines()
    assert header.split()[-1] == "server"
    assert line.split()[0] == kernel_id[:8] and line.split()[-1] == server.url + "/", out

    # A target it cannot wake on: nothing changes, the kernel still hibernates there.
    code, out, err = await cli("wake", kernel_id, "--on", "nowhere")
    assert code == 1 and out == "", (out, err)
    assert "nowhere" in err.splitlines()[-1], err
    assert err.splitlines()[-1].startswith("jupyter remote-hw wake: "), err
    machine, row = await kernel_row(server, kernel_id)
    assert (machine, row["state"]) == (SSH_TARGET, "hibernated")

    # Wake (at the server named, its token from its runtime file): the launch steps,
    # then what was restored; same id, the variable back.
    code, out, err = await cli("wake", kernel_id[:8], "--server", server.url)
    assert code == 0, (out, err)
    assert err.startswith(f"Waking kernel {kernel_id} (Jupyter server at {server.url}/)"), err
    assert "✓ start kernel" in err and "✓ restore state" in err, err
    assert out.startswith(f"kernel {kernel_id} woke on {SSH_TARGET}: "), out
    assert "(1 variable, 0 modules)" in out, out
    assert (await kc.execute("x")).result == "42"
    assert [k["id"] for k in await server.api("kernels")] == [kernel_id]
    code, out, _ = await cli("wake", kernel_id)
    assert code == 0
    assert (
        out == f"kernel {kernel_id} is not hibernated (it runs on {SSH_TARGET}): nothing to wake\n"
    )
    await kc.close()

    # A kernel no running server has; a server that is not at an HTTP URL.
    code, out, err = await cli("hibernate", "0000dead")
    assert code == 1
    assert f"no kernel 0000dead on the Jupyter server at {server.url}" in err, err
    code, out, err = await cli("hibernate", kernel_id, "--server", "ftp://127.0.0.1/")
    assert code == 1 and "give the server's URL" in err, err


def test_without_a_server_it_says_to_start_one(no_credentials: None) -> None:
    for argv in (["hibernate", "abc123"], ["wake", "abc123", "--on", "ssh-x"]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out, err) == 1
        assert err.getvalue() == f"jupyter remote-hw {argv[0]}: {NO_SERVER}\n"
        assert out.getvalue() == ""
