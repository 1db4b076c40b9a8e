"""``jupyter remote-hw`` and the "Remote hardware" panel agree: against a real Jupyter
server with a kernel on this machine and one on a loopback SSH host, ``list`` shows
each machine and kernel (by its notebook) in the state the REST model gives, and each
command on hardware the user already has does what it says or says why not."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.cli.machines import kernel_title

from ..provisioner.conftest import LOCAL_KERNEL, SSH_KERNEL, SSH_TARGET
from ..serverprocess import Server, ssh_host_server
from ..testhosts import SSHTestHost


async def machines(server: Server) -> dict[str, dict[str, Any]]:
    """``GET /jupyter-remote-hw/api/machines``, by machine name."""
    response = await AsyncHTTPClient().fetch(
        HTTPRequest(
            f"{server.url}/jupyter-remote-hw/api/machines",
            headers={"Authorization": f"token {server.token}"},
        )
    )
    return {m["name"]: m for m in json.loads(response.body)["machines"]}


async def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.to_thread(main, list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def row(out: str, start: str) -> list[str]:
    """The cells of the table row that begins with ``start`` (split on 2+ spaces)."""
    import re

    line = next(line for line in out.splitlines() if line.strip().startswith(start))
    return re.split(r"\s{2,}", line.strip())


@pytest.fixture
async def server(
    ssh_host: SSHTestHost, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Server]:
    """A Jupyter server offering the SSH test host, whose Jupyter paths the CLI shares."""
    async with ssh_host_server(ssh_host, short_tmp, monkeypatch) as server:
        (short_tmp / "nb" / "analysis").mkdir()
        yield server


async def test_list_shows_what_the_panel_shows_and_commands_say_what_they_do(
    server: Server,
) -> None:
    sockets = []
    for path, kernel in (("analysis/train.ipynb", LOCAL_KERNEL), ("ssh.ipynb", SSH_KERNEL)):
        session = await server.api(
            "sessions",
            method="POST",
            body={"path": path, "name": path, "type": "notebook", "kernel": {"name": kernel}},
        )
        sockets.append(kc := await server.channels(session["kernel"]["id"]))
        assert (await kc.execute("1 + 1")).result == "2"
    await asyncio.sleep(0.5)
    model = await machines(server)
    code, out, err = await cli("list")
    assert code == 0, err
    assert "no Jupyter server is running" not in err
    assert set(model) == {"local", SSH_TARGET}
    for name, machine in model.items():
        assert machine["state"] == "running"
        cells = row(out, name)
        assert cells[:4] == [name, machine["provider"], machine["hardware"], machine["state"]]
        [kernel] = machine["kernels"]
        assert kernel["path"] in ("analysis/train.ipynb", "ssh.ipynb")
        assert kernel["display_name"] == "Python 3 (ipykernel)"
        assert kernel["state"] == kernel["execution_state"] == "idle"
        assert 0 < kernel["uptime_seconds"] < 120 and kernel["cost_so_far"] == 0
        cells = row(out, f"└ {kernel['path']} · Python 3 (ipykernel)")
        assert cells[1:3] == [machine["hardware"], "idle"] and cells[-1] == kernel["id"]
    assert "ready" not in out

    # Hardware the user already has: no machine to launch, said in one line.
    for name in ("local", SSH_TARGET):
        code, _, err = await cli("launch", name)
        assert code == 1 and "nothing to launch" in err and err.count("\n") == 1
    code, out, err = await cli("start", SSH_TARGET)
    assert code == 0 and f"{SSH_TARGET} (" in out and "running" in out, err
    code, out, err = await cli("terminate", SSH_TARGET, "--yes")
    assert code == 0 and "shut down 1 kernel;" in out and "agent stopped" in out, err
    assert set(await machines(server)) == {"local"}
    code, out, _ = await cli("list")
    assert SSH_TARGET not in out and row(out, "local")[3] == "running"
    # `stop` shuts the kernels down as terminate does, after asking (pytest's stdin is
    # not a terminal, so it says to pass --yes).
    code, _, err = await cli("stop", "local")
    assert code == 1 and "Shut down the kernels on local" in err
    assert "Pass --yes" in err and err.count("\n") == 1
    code, out, err = await cli("stop", "local", "--yes")
    assert code == 0 and "local (this machine): shut down 1 kernel;" in out, err
    assert await machines(server) == {}
    code, out, _ = await cli("list")
    assert out.startswith("no machines:")

    for kc in sockets:
        await kc.close()

    # Without a server: the ledger's view, in the same words, and why nothing is done.
    server.process.terminate()
    await asyncio.to_thread(server.process.wait, 30)
    code, out, err = await cli("list")
    assert code == 0 and "no Jupyter server is running" in err
    table = out.split("\n\n")[0]
    assert "running" not in table and "ready" not in table
    for name in ("local", SSH_TARGET):
        code, _, err = await cli("start", name)
        assert code == 1 and "no Jupyter server is running" in err and "start JupyterLab" in err
        code, _, err = await cli("terminate", name, "--yes")
        assert code == 1 and f"nothing to terminate on {name}" in err
        code, _, err = await cli("stop", name, "--yes")
        assert code == 1 and f"nothing to stop on {name}: no Jupyter server" in err
        code, _, err = await cli("launch", name)
        assert code == 1 and "nothing to launch" in err
    code, _, err = await cli("trust", "local")
    assert code == 1 and "no host key to trust" in err
    teammate = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    code, _, err = await cli("share", "local", "--with", teammate, "--role", "viewer")
    assert code == 1 and "local is this machine, not reached over SSH" in err
    assert err.count("\n") == 1


def test_a_remote_kernel_is_titled_as_the_panel_titles_it() -> None:
    kernel = {"path": None, "owner": "magic:host:12", "display_name": "Python 3 (ipykernel)"}
    assert kernel_title(kernel) == "%%remote · Python 3 (ipykernel)"
    assert kernel_title({**kernel, "owner": "server"}) == "no notebook · Python 3 (ipykernel)"
    assert kernel_title({**kernel, "path": "a/b.ipynb"}) == "a/b.ipynb · %%remote"
    assert (
        kernel_title({**kernel, "path": "a/b.ipynb", "owner": "server"})
        == "a/b.ipynb · Python 3 (ipykernel)"
    )
