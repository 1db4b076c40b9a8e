"""A share file holds what its role needs and no secret beyond it, field by field."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.sharing import COLLABORATOR, VIEWER, ShareError, ShareFile
from jupyter_remote_hw.sharing.provisioner import prune_kernelspecs, write_kernelspec
from jupyter_remote_hw.sharing.roles import parse_duration

from ..testhosts import SSHTestHost
from .conftest import OwnedKernel

COMMON = {
    "format",
    "version",
    "share_id",
    "role",
    "kernel_id",
    "host",
    "port",
    "user",
    "host_key",
    "ports",
    "purposes",
    "expires",
    "owner",
    "signature_scheme",
}


@pytest.mark.parametrize("role", [VIEWER, COLLABORATOR])
async def test_share_file_fields(
    role: str,
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
    tmp_path: Path,
) -> None:
    granted = await owned.share(teammate_key, role, expires_in=2 * 3600)
    path = granted.share_file.write(tmp_path / f"{role}.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    text = path.read_text()
    data = json.loads(text)
    expected = COMMON | ({"key"} if role == COLLABORATOR else set())
    assert set(data) == expected
    assert data["format"] == "jupyter-remote-hw-share" and data["version"] == 1
    assert data["role"] == role
    assert data["share_id"] == granted.record.share_id
    assert data["kernel_id"] == owned.kernel_id
    assert (data["host"], data["port"], data["user"]) == (
        ssh_host.address,
        ssh_host.port,
        ssh_host.user,
    )
    host_pub = (ssh_host.root / "ssh_host_ed25519_key.pub").read_text().split()
    assert data["host_key"].split()[:2] == host_pub[:2]
    wanted = (
        ["iopub_port"]
        if role == VIEWER
        else ["shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"]
    )
    assert sorted(data["ports"]) == sorted(wanted) == sorted(data["purposes"])
    # The ports are the share's own, never the kernel's.
    assert not set(data["ports"].values()) & {owned.connection[p] for p in wanted}
    assert abs(data["expires"] - granted.record.expires) < 1
    assert "@" in data["owner"] and data["signature_scheme"] == "hmac-sha256"
    if role == COLLABORATOR:
        assert data["key"] == owned.connection["key"]
    else:
        assert owned.connection["key"] not in text
    # No private key, password or credential of any kind.
    for secret_file in (ssh_host.user_key, ssh_host.host_key, teammate_key):
        blob = "".join(secret_file.read_text().splitlines()[1:-1])
        assert blob[:40] not in text
    for word in ("PRIVATE", "password", "aws_", "secret", "token"):
        assert word.lower() not in text.lower()
    # The file reads back as it was written.
    assert ShareFile.load(path) == granted.share_file


def test_viewer_share_file_cannot_carry_the_key(tmp_path: Path) -> None:
    fields: dict[str, Any] = {
        "share_id": "abcd",
        "role": VIEWER,
        "kernel_id": "k",
        "host": "h",
        "port": 22,
        "user": "u",
        "host_key": "ssh-ed25519 AAAA",
        "ports": {"iopub_port": 1},
        "purposes": {"iopub_port": "outputs"},
        "expires": 1.0,
        "owner": "o@m",
    }
    with pytest.raises(ShareError, match="only a collaborator"):
        ShareFile(**fields, key="sekrit")
    with pytest.raises(ShareError, match="viewer reaches"):
        ShareFile(**{**fields, "ports": {"shell_port": 1}})


def test_bad_share_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ShareError, match="no share file at"):
        ShareFile.load(tmp_path / "missing.json")
    other = tmp_path / "other.json"
    other.write_text('{"ip": "127.0.0.1"}')
    with pytest.raises(ShareError, match="not a jupyter-remote-hw share file"):
        ShareFile.load(other)


def test_durations() -> None:
    assert parse_duration("8h") == 8 * 3600
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d") == 2 * 86400
    for bad in ("", "8", "h", "-1h", "8x", "0m"):
        with pytest.raises(ShareError, match="not a duration"):
            parse_duration(bad)


def test_kernelspecs_of_ended_shares_are_pruned(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels"
    other = kernels / "python3"
    other.mkdir(parents=True)
    (other / "kernel.json").write_text("{}")
    now = time.time()

    def joined(share_id: str, expires: float) -> Path:
        share = ShareFile(
            share_id=share_id,
            role=VIEWER,
            kernel_id="k",
            host="127.0.0.1",
            port=22,
            user="u",
            host_key="ssh-ed25519 AAAA",
            ports={"iopub_port": 1},
            purposes={"iopub_port": "outputs"},
            expires=expires,
            owner="o@h",
        )
        return write_kernelspec(share.write(tmp_path / f"{share_id}.json"), None, kernels)

    live, ended, gone = joined("live", now + 60), joined("ended", now - 1), joined("gone", now + 60)
    (tmp_path / "gone.json").unlink()
    assert sorted(prune_kernelspecs(kernels, now)) == sorted([ended.name, gone.name])
    assert sorted(p.name for p in kernels.iterdir()) == sorted(["python3", live.name])
    assert (tmp_path / "ended.json").exists()  # the teammate's own file is left alone


def _file_fields() -> dict[str, Any]:
    return {
        "format": "jupyter-remote-hw-share",
        "version": 1,
        "share_id": "Qm3kTz0aLx7c",
        "role": VIEWER,
        "kernel_id": "0f6c3f5e-8f1e-4d2b-9c57-1d2a3b4c5d6e",
        "host": "10.0.0.7",
        "port": 22,
        "user": "ada",
        "host_key": "ssh-ed25519 AAAA",
        "ports": {"iopub_port": 40001},
        "purposes": {"iopub_port": "outputs"},
        "expires": time.time() + 3600,
        "owner": "ada@box",
    }


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("expires", "soon", "expires must be a number"),
        ("share_id", "../../outside", "share_id '../../outside' is not valid"),
        ("share_id", "a/b", "share_id 'a/b' is not valid"),
        ("kernel_id", "k\nfake log line", "kernel_id 'k\\\\nfake log line' is not valid"),
        ("host", 'evil" -oProxyCommand=x', "host .* is not valid"),
        ("port", 70000, "port must be <= 65535"),
        ("ports", {"iopub_port": "x" * 100_000}, "ports.iopub_port must be an integer"),
        ("ports", {"../x": 1}, "ports"),
        ("owner", "ada\r\nINFO forged", "owner"),
        ("role", "admin", "role must be one of 'viewer', 'collaborator'"),
        ("user", None, "user must be a string"),
    ],
)
def test_a_wrong_share_file_is_named_field_by_field(
    tmp_path: Path, field: str, value: Any, said: str
) -> None:
    path = tmp_path / "share.json"
    path.write_text(json.dumps({**_file_fields(), field: value}))
    with pytest.raises(ShareError, match=said) as caught:
        ShareFile.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a valid share file: {field}")
    assert len(message) < 300 and "\n" not in message


def test_a_share_file_missing_a_field_names_it(tmp_path: Path) -> None:
    fields = _file_fields()
    del fields["host_key"]
    with pytest.raises(ShareError, match="share file: host_key is missing"):
        ShareFile.from_json(fields, "share.json")


def test_a_share_id_from_outside_never_names_a_path() -> None:
    fields = {k: v for k, v in _file_fields().items() if k not in ("format", "version")}
    with pytest.raises(ShareError, match="share id '../x' is not valid"):
        ShareFile(**{**fields, "share_id": "../x"})
    assert ShareFile.from_json(_file_fields()).share_id == "Qm3kTz0aLx7c"
