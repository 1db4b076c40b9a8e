"""Bad input to the REST API, against a real jupyter_server with the extension: always a
4xx with a short JSON error naming the field (never a 500, an HTML page or a huge value
echoed), logs that quote it cut short, and the API as docs/rest-api.yaml says, checked
by schemathesis with every default check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from ..serverprocess import REPO, Server, server_dirs, start_server

API = "/jupyter-remote-hw/api"
CONTRACT = REPO / "docs" / "rest-api.yaml"
SETTINGS = Path(__file__).with_name("schemathesis.toml")
#: A teammate's public key.
KEY = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
#: A share file as the owner sends it.
SHARE_FILE = {
    "format": "jupyter-remote-hw-share",
    "version": 1,
    "share_id": "Qm3kTz0aLx7c",
    "role": "viewer",
    "kernel_id": "0f6c3f5e",
    "host": "127.0.0.1",
    "port": 1,
    "user": "ada",
    "host_key": "ssh-ed25519 AAAA",
    "ports": {"iopub_port": 40001},
    "purposes": {"iopub_port": "outputs"},
    "expires": 4e9,
    "owner": "ada@box",
}
#: Examples per operation and phase: the run takes about a minute on two cores.
EXAMPLES = 50


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        assert self.headers.get("content-type", "").startswith("application/json"), self
        return json.loads(self.body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A jupyter_server process with the extension, local hardware only."""
    root = tmp_path_factory.mktemp("api")
    dirs = server_dirs(root)
    (dirs["config"] / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
                "MachineManager": {"ledger_path": str(root / "ledger.sqlite3")},
                "LocalProvider": {"state_dir": str(root / "l")},
                "SSHProvider": {"include_ssh_config": False},
                "TransportManager": {"connect_timeout": 3.0},
            }
        )
    )
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    server = start_server(dirs, root / "server.log")
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.process.poll() is None, server.log.read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{server.url}/api/status?token={server.token}", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, server.log.read_text()[-3000:]
                time.sleep(0.2)
        yield server
    finally:
        server.stop()


def call(
    server: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    token: bool = True,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request; its status, headers (lower-case names) and body."""
    request = urllib.request.Request(
        f"{server.url}{path}", data=body, method=method, headers=dict(headers or {})
    )
    if token:
        request.add_header("Authorization", f"token {server.token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as exc:
        with exc:
            return Answer(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())


def log_since(server: Server, mark: int) -> str:
    return server.log.read_text(errors="replace")[mark:]


def test_deeply_nested_json_is_a_400(server: Server) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    answer = call(server, "POST", f"{API}/launch", body)
    assert answer.status == 400
    assert answer.json["message"] == "the request body is nested too deeply"
    assert answer.json["field"] == "body"


def test_a_huge_name_in_a_path_is_neither_echoed_nor_logged_whole(server: Server) -> None:
    mark = len(server.log.read_text(errors="replace"))
    name = "a" * 60_000
    answer = call(server, "POST", f"{API}/machines/{name}/start", b"")
    assert answer.status == 400 and len(answer.body) < 400
    assert answer.json["field"] == "name"
    assert "(60000 characters) is not valid" in answer.json["message"]
    time.sleep(0.2)
    logged = log_since(server, mark)
    assert "a" * 300 not in logged and "(60000 characters)" in logged


@pytest.mark.parametrize(
    ("path", "body", "field", "said"),
    [
        (
            "shares",
            {"kernel": "k", "public_key": KEY, "role": "viewer", "expires": "99999999999h"},
            "expires",
            "expires '99999999999h' is not valid",
        ),
        (
            "shares",
            {"kernel": "k", "public_key": KEY, "role": "viewer", "expires": "999999h"},
            "expires",
            "is longer than 365 days",
        ),
        (
            "shares",
            {
                "kernel": "k",
                "public_key": KEY,
                "role": "viewer",
                "address": "10.0.0.7\nINFO forged",
            },
            "address",
            "is not valid",
        ),
        (
            "shares",
            {"kernel": "k", "public_key": KEY, "role": "viewer", "address": "-oProxyCommand=x"},
            "address",
            "not starting with '-'",
        ),
        (
            "shares",
            {"kernel": "", "public_key": KEY, "role": "viewer"},
            "kernel",
            "kernel '' is not valid",
        ),
        (
            "shares",
            {"kernel": "k", "public_key": KEY, "role": "owner"},
            "role",
            "role must be one of 'viewer', 'collaborator'",
        ),
        ("launch", {"hardware": 'lo"cal'}, "hardware", "hardware 'lo\"cal' is not valid"),
        ("launch", {"hardware": "local", "extra": 1}, "extra", "extra is not a field here"),
        ("launch", {}, "hardware", "hardware is missing"),
        ("launch", [], "body", "body must be a JSON object"),
        (
            "switch/0f6c3f5e",
            {"hardware": "local", "carry": ["x; import os"]},
            "carry.0",
            "carry.0 'x; import os' is not valid",
        ),
        (
            "join",
            {"share_file": {**SHARE_FILE, "share_id": "../x"}},
            "share_file.share_id",
            "the share file is not a valid share file: share_id '../x' is not valid",
        ),
        (
            "join",
            {"share_file": {**SHARE_FILE, "expires": "soon"}},
            "share_file.expires",
            "expires must be a number",
        ),
        ("hosts/gpu-box/trust", {"fingerprint": "x" * 10_000}, "fingerprint", "fingerprint 'xxx"),
    ],
)
def test_bad_fields_are_a_400_naming_the_field(
    server: Server, path: str, body: Any, field: str, said: str
) -> None:
    answer = call(server, "POST", f"{API}/{path}", json.dumps(body).encode())
    assert answer.status == 400, answer
    error = answer.json
    assert error["field"] == field and said in error["message"], error
    assert len(answer.body) < 500


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"{}", "seconds is missing"),
        (b'{"seconds": "30m"}', "seconds must be a number or null"),
        (b'{"seconds": true}', "seconds must be a number or null"),
        (b'{"seconds": -1}', "seconds must be >= 0"),
        (b'{"seconds": 604801}', "seconds must be <= 604800"),
        (b'{"seconds": NaN}', "seconds must be a number of seconds from 0 (never)"),
        (b'{"seconds": Infinity}', "seconds must be <= 604800"),
    ],
)
def test_a_bad_hibernate_time_is_a_400_naming_seconds(
    server: Server, raw: bytes, said: str
) -> None:
    answer = call(server, "PUT", f"{API}/hibernate-after/0f6c3f5e", raw)
    assert answer.status == 400, answer
    assert answer.json["field"] == "seconds" and said in answer.json["message"], answer.json


def test_the_hibernate_time_of_an_unknown_kernel_is_a_404(server: Server) -> None:
    answer = call(server, "PUT", f"{API}/hibernate-after/0f6c3f5e", b'{"seconds": 600}')
    assert answer.status == 404, answer
    error = answer.json
    assert error["message"] == "no kernel 0f6c3f5e on this server", error
    assert error["field"] == "kernel_id"


@pytest.mark.parametrize(
    ("method", "path", "status", "field"),
    [
        ("GET", "shares?all=junk", 400, "all"),
        ("DELETE", "shares/..%2F..%2Fx", 400, "share_id"),
        ("GET", "usage/k%0Ax", 400, "kernel_id"),
        ("GET", "variables/0f6c3f5e?hardware=a%20b", 400, "hardware"),
        ("POST", "hosts/-oProxyCommand=x/trust", 400, "host"),
        ("GET", "no/such/route", 404, None),
        ("GET", "", 404, None),
        ("POST", "machines/local/explode", 404, None),
        ("GET", "events", 400, "Upgrade"),
    ],
)
def test_bad_paths_and_queries_are_json_4xx(
    server: Server, method: str, path: str, status: int, field: str | None
) -> None:
    answer = call(server, method, f"{API}/{path}".rstrip("/"), b"{}" if method == "POST" else None)
    assert answer.status == status
    assert answer.json.get("field") == field and answer.json["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "hardware"),
        ("POST", "launch"),
        ("DELETE", "shares/abc"),
        ("GET", "events"),
        ("PUT", "hibernate-after/0f6c3f5e"),
    ],
)
def test_no_credentials_is_a_401_as_json(server: Server, method: str, path: str) -> None:
    body = b'{"seconds": 60}' if method in ("POST", "PUT") else None
    answer = call(server, method, f"{API}/{path}", body, token=False)
    assert answer.status == 401
    assert answer.headers["www-authenticate"] == "token"
    assert answer.json["message"].startswith("not authenticated")


def test_an_unknown_method_is_a_405_saying_which_are_allowed(server: Server) -> None:
    answer = call(server, "TRACE", f"{API}/shares")
    assert answer.status == 405 and answer.headers["allow"] == "GET, POST"
    assert answer.json["message"] == "Method Not Allowed"
    assert call(server, "PUT", f"{API}/hardware", b"{}").headers["allow"] == "GET"


def test_the_api_keeps_its_contract(server: Server, tmp_path: Path) -> None:
    """schemathesis, every default check, against docs/rest-api.yaml (run in a temporary
    directory: it keeps a cache of what it found in the one it runs in)."""
    mark = len(server.log.read_text(errors="replace"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(SETTINGS),
            "run",
            str(CONTRACT),
            "--url",
            server.url,
            "--header",
            f"Authorization: token {server.token}",
            "--max-examples",
            str(EXAMPLES),
            "--generation-deterministic",
            "--workers",
            "1",
            "--continue-on-failure",
            "--no-color",
            "--request-timeout",
            "30",
        ],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
    )
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failures" not in done.stdout.split("Test cases:")[-1]
    logged = log_since(server, mark)
    assert "Traceback" not in logged and "[E " not in logged, logged[-5000:]
