"""An SSH host whose key is not yet known, in a real Jupyter server: the error names the
real address and the key's fingerprint and offers to trust it; trusting the key the user
saw writes known_hosts where OpenSSH would, and the launch then works. A key the user did
not see is never trusted. These user errors are logged in one WARNING line each."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..provisioner.conftest import HARDWARE, write_config
from ..serverprocess import Server, start_server
from ..testhosts import SSHTestHost, free_port, keygen


@pytest.fixture
async def http_client() -> AsyncIterator[None]:
    yield
    AsyncHTTPClient().close()


async def call(
    server: Server, path: str, body: Any = None, method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    """Call ``path`` under the server's base URL; the status and JSON body."""
    response = await AsyncHTTPClient().fetch(
        HTTPRequest(
            f"{server.url}/{path}",
            method=method,
            request_timeout=120,
            headers={"Authorization": f"token {server.token}"},
            body=json.dumps(body if body is not None else {}) if method == "POST" else None,
        ),
        raise_error=False,
    )
    return response.code, json.loads(response.body) if response.body else {}


def fingerprint_of(public_key: Path) -> str:
    """A key's SHA256 fingerprint, as the server would show it."""
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[1]


@pytest.fixture
async def server(
    ssh_host: SSHTestHost, short_tmp: Path, monkeypatch: pytest.MonkeyPatch, http_client: None
) -> AsyncIterator[Server]:
    """A server whose user's ~/.ssh/config names "newhost": the test host, whose key
    the user's ~/.ssh/known_hosts does not have yet; and "gone", where nothing listens."""
    home = short_tmp / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    (home / ".ssh" / "config").write_text(
        "Host newhost\n"
        f"    HostName {ssh_host.address}\n    Port {ssh_host.port}\n"
        f"    User {ssh_host.user}\n    IdentityFile {ssh_host.user_key}\n"
        "    IdentitiesOnly yes\n"
        f"Host gone\n    HostName 127.0.0.1\n    Port {free_port()}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    dirs = {name: short_tmp / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    remote_root = short_tmp / "r"
    write_config(
        dirs["config"] / "jupyter_server_config.json",
        home / ".ssh" / "config",
        remote_root,
        short_tmp / "l",
        [
            {
                "host": "newhost",
                "python": sys.executable,
                "hardware": HARDWARE,
                "root": str(remote_root),
            },
            {"host": "gone", "hardware": "Gone GPU 80GB"},
        ],
    )
    server = start_server(dirs, short_tmp / "server.log")
    try:
        await server.ready()
        yield server
    finally:
        server.process.terminate()
        server.process.wait(60)


def log_lines(server: Server, pattern: str) -> list[str]:
    """The server's log lines that match ``pattern``."""
    return [line for line in server.log.read_text().splitlines() if re.search(pattern, line)]


async def test_an_unknown_host_key_is_named_then_trusted_in_one_step(
    server: Server, ssh_host: SSHTestHost, short_tmp: Path
) -> None:
    known_hosts = short_tmp / "home" / ".ssh" / "known_hosts"
    fingerprint = ssh_host.fingerprint()
    address = f"127.0.0.1:{ssh_host.port}"

    code, error = await call(server, "jupyter-remote-hw/api/launch", {"hardware": "ssh-newhost"})
    assert code == 502, error
    assert f"newhost ({address})" in error["message"] and fingerprint in error["message"]
    assert error["step"] == "connect"
    assert "jupyter remote-hw trust newhost" in error["commands"]
    assert f"ssh-keyscan -p {ssh_host.port} 127.0.0.1 >> ~/.ssh/known_hosts" in error["commands"]
    host_key = error["host_key"]
    assert {k: host_key[k] for k in ("destination", "host", "port", "fingerprint", "changed")} == {
        "destination": "newhost",
        "host": "127.0.0.1",
        "port": ssh_host.port,
        "fingerprint": fingerprint,
        "changed": False,
    }
    assert host_key["trust"] == {
        "method": "POST",
        "url": "/jupyter-remote-hw/api/hosts/newhost/trust",
        "body": {"fingerprint": fingerprint},
    }

    # A key the user was not shown is refused, and nothing is written.
    keygen(short_tmp / "other")
    code, refused = await call(
        server,
        host_key["trust"]["url"].lstrip("/"),
        {"fingerprint": fingerprint_of(short_tmp / "other.pub")},
    )
    assert code == 409, refused
    assert refused["field"] == "fingerprint" and "Nothing was trusted" in refused["message"]
    assert fingerprint in refused["message"]
    assert not known_hosts.exists()
    code, bad = await call(server, host_key["trust"]["url"].lstrip("/"), {"fingerprint": "x"})
    assert (code, bad["field"]) == (400, "fingerprint")

    # The key the user saw: written where OpenSSH writes it, in its [host]:port form.
    code, trusted = await call(
        server, host_key["trust"]["url"].lstrip("/"), host_key["trust"]["body"]
    )
    assert code == 200, trusted
    assert trusted["known_hosts"] == str(known_hosts) and not trusted["already_trusted"]
    assert known_hosts.read_text() == ssh_host.known_hosts_line("127.0.0.1")

    # Until it connects, the hardware listing says why not (the picker shows it).
    row = await hardware_row(server, "ssh-newhost")
    assert row["unreachable"]["reason"] == "host key not trusted", row
    assert fingerprint in row["unreachable"]["detail"]

    code, model = await call(server, "jupyter-remote-hw/api/launch", {"hardware": "ssh-newhost"})
    assert code == 201, model
    assert (await hardware_row(server, "ssh-newhost"))["unreachable"] is None
    await call(server, f"api/kernels/{model['id']}", method="DELETE")

    # Each expected error is one WARNING line, never an ERROR or a traceback.
    log = server.log.read_text()
    assert "Traceback" not in log, log[-6000:]
    assert not log_lines(server, r"^\[E "), log[-6000:]
    assert len(log_lines(server, r"^\[W .*host key of newhost .* is not known")) == 1, log[-6000:]
    assert (
        len(
            log_lines(
                server,
                r"^\[W .*POST /jupyter-remote-hw/api/hosts/newhost/trust: "
                r".*Nothing was trusted",
            )
        )
        == 1
    ), log[-6000:]


async def test_a_kernel_start_through_jupyters_api_logs_no_error_nor_traceback(
    server: Server, ssh_host: SSHTestHost
) -> None:
    """Through Jupyter's own kernel and session routes: jupyter_client logs a failed start
    with its traceback at ERROR, twice; the extension's log filter leaves our one line."""
    code, error = await call(server, "api/kernels", {"name": "remote-hw-ssh-newhost"})
    assert code == 502, error
    assert ssh_host.fingerprint() in error["message"]
    code, error = await call(
        server,
        "api/sessions",
        {"path": "a.ipynb", "type": "notebook", "kernel": {"name": "remote-hw-ssh-newhost"}},
    )
    assert code == 500, error  # jupyter_server makes any failed session start a 500
    assert ssh_host.fingerprint() in error["message"]
    log = server.log.read_text()
    assert "Traceback" not in log, log[-6000:]
    # jupyter_server answers a failed session start 500 whatever the cause, and logs any
    # 500's access line (with the request's headers) at ERROR: its policy, not a traceback.
    assert [line.split("ServerApp] ")[1][:22] for line in log_lines(server, r"^\[E ")] == [
        "{",
        "500 POST /api/sessions",
    ], log[-6000:]
    lines = log_lines(server, r"^\[[WE] .*host key of newhost .* is not known")
    assert all(line.startswith("[W ") for line in lines), lines
    # Ours, once; then jupyter_server's own two lines for any HTTP error of its kernel API.
    assert [re.sub(r"^\[W [\d:. -]+ServerApp\] ", "", line)[:26] for line in lines] == [
        "launch on ssh-newhost: con",
        "502 POST /api/kernels (127",
        'wrote error: "Launching a ',
        "launch on ssh-newhost: con",
        "500 POST /api/sessions (12",
        'wrote error: "Launching a ',
    ], lines


async def hardware_row(server: Server, name: str) -> dict[str, Any]:
    """The row of ``GET /jupyter-remote-hw/api/hardware`` for ``name``."""
    code, listing = await call(server, "jupyter-remote-hw/api/hardware", method="GET")
    assert code == 200, listing
    return next(row for row in listing["hardware"] if row["name"] == name)


async def test_an_unreachable_host_is_one_warning_line(server: Server) -> None:
    assert (await hardware_row(server, "ssh-gone"))["unreachable"] is None  # never tried
    began = time.time()
    code, error = await call(server, "jupyter-remote-hw/api/launch", {"hardware": "ssh-gone"})
    assert code == 502, error
    # Named as a person reads it, by its hardware and place, not by the target's name.
    assert error["message"].startswith(
        "Launching a kernel on Gone GPU 80 GiB · gone failed at step 'connect'"
    ), error
    assert "host_key" not in error
    # Plain words in the message; the OS's own text only behind the "details" toggle.
    assert "nothing accepts connections on that port" in error["message"], error
    assert "Errno" not in error["message"] and "Connect call failed" not in error["message"]
    assert "Connect call failed" in error["detail"] or "refused" in error["detail"], error
    # The listing says so from now on, with since when and why; it can still be picked.
    row = await hardware_row(server, "ssh-gone")
    assert row["usable"] is True and row["unreachable"]["reason"] == "unreachable", row
    assert began <= row["unreachable"]["since"] <= time.time()
    assert "gone" in row["unreachable"]["detail"]
    code, _ = await call(server, "jupyter-remote-hw/api/launch", {"hardware": "ssh-gone"})
    assert code == 502
    assert (await hardware_row(server, "ssh-gone"))["unreachable"]["since"] == row["unreachable"][
        "since"
    ]  # since the first failure in a row
    log = server.log.read_text()
    assert "Traceback" not in log, log[-6000:]
    assert not log_lines(server, r"^\[E "), log[-6000:]
    assert len(log_lines(server, r"^\[W .*cannot reach gone")) == 2, log[-6000:]
