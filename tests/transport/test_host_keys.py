"""Trusting a host key on purpose: the fingerprint shown is the host's, the line written
is the one OpenSSH would write, and a changed key is never replaced."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.transport import HostKeyError, SSHConnection, TransportError
from jupyter_remote_hw.transport.host_keys import (
    CHANGED,
    TRUSTED,
    UNKNOWN,
    fetch_presented_key,
    record_key,
)

from ..conftest import settings_for
from ..testhosts import SSHTestHost, free_port, keygen


def _config(tmp_path: Path, ssh_host: SSHTestHost, known: Path, alias: str = "stranger") -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(ssh_host.config_block(alias, UserKnownHostsFile=str(known)))
    return path


async def test_an_unknown_key_is_shown_then_recorded_as_openssh_would(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    known = tmp_path / "new" / "known_hosts"  # neither the folder nor the file exists yet
    settings = settings_for(_config(tmp_path, ssh_host, known))
    presented = await fetch_presented_key("stranger", settings)
    assert (presented.host, presented.port) == ("127.0.0.1", ssh_host.port)
    assert presented.fingerprint == ssh_host.fingerprint()
    assert presented.status == UNKNOWN and presented.known_hosts == str(known)

    record_key(presented)
    assert known.read_text() == ssh_host.known_hosts_line().strip() + "\n"
    assert stat.S_IMODE(known.stat().st_mode) == 0o600
    async with SSHConnection("stranger", settings) as conn:
        assert (await conn.run("echo ok")).stdout.strip() == "ok"
    assert (await fetch_presented_key("stranger", settings)).status == TRUSTED


async def test_a_connection_refuses_the_key_until_it_is_trusted(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    settings = settings_for(_config(tmp_path, ssh_host, known))
    with pytest.raises(HostKeyError, match="jupyter remote-hw trust stranger"):
        await SSHConnection("stranger", settings).open()
    record_key(await fetch_presented_key("stranger", settings))
    async with SSHConnection("stranger", settings) as conn:
        assert (await conn.run("echo ok")).stdout.strip() == "ok"


async def test_a_known_hosts_file_not_yet_created_is_an_unknown_key_not_an_unreachable_host(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    known = tmp_path / "missing" / "known_hosts"  # UserKnownHostsFile names it; OpenSSH
    settings = settings_for(_config(tmp_path, ssh_host, known))  # reads it as empty
    with pytest.raises(HostKeyError, match=f">> {known}`") as raised:
        await SSHConnection("stranger", settings).open()
    assert raised.value.fingerprint == ssh_host.fingerprint() and not raised.value.changed


async def test_a_changed_key_is_refused_and_the_recorded_one_kept(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    keygen(tmp_path / "impostor")
    kind, data = (tmp_path / "impostor.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_host.port} {kind} {data}\n")
    presented = await fetch_presented_key(
        "stranger", settings_for(_config(tmp_path, ssh_host, known))
    )
    assert presented.status == CHANGED
    with pytest.raises(TransportError, match="records another key .*ssh-keygen -R"):
        record_key(presented)
    assert known.read_text() == f"[127.0.0.1]:{ssh_host.port} {kind} {data}\n"


def _cli(tmp_path: Path, ssh_config: Path, *argv: str) -> tuple[int, str, str]:
    config = tmp_path / "jupyter_server_config.json"
    config.write_text(
        json.dumps(
            {
                "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
                "TransportManager": {"ssh_config_files": [str(ssh_config)], "connect_timeout": 3.0},
                "SSHProvider": {"include_ssh_config": False},
            }
        )
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(config), *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_trust_shows_the_fingerprint_and_trusts_once_confirmed(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    ssh_config = _config(tmp_path, ssh_host, known)
    code, _, err = _cli(tmp_path, ssh_config, "trust", "stranger")  # no terminal, no --yes
    assert code == 1 and "Pass --yes" in err
    assert not known.exists()

    code, out, _ = _cli(tmp_path, ssh_config, "trust", "stranger", "--yes")
    assert code == 0
    assert (
        f"stranger (127.0.0.1:{ssh_host.port}) presents ssh-ed25519 key "
        f"{ssh_host.fingerprint()}" in out
    )
    assert f"trusted: added to {known}" in out
    code, out, _ = _cli(tmp_path, ssh_config, "trust", "stranger", "--yes")
    assert code == 0 and f"already trusted in {known}" in out
    assert known.read_text().count("\n") == 1


def test_cli_trust_of_an_unreachable_host_says_so_in_one_line(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(ssh_host.config_block("gone", Port=free_port()))
    code, out, err = _cli(tmp_path, ssh_config, "trust", "gone", "--yes")
    assert code == 1 and out == ""
    assert err.startswith("jupyter remote-hw trust: cannot reach gone (127.0.0.1:")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_trust_of_a_changed_key_refuses_in_one_line(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    keygen(tmp_path / "impostor")
    kind, data = (tmp_path / "impostor.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_host.port} {kind} {data}\n")
    code, out, err = _cli(
        tmp_path, _config(tmp_path, ssh_host, known), "trust", "stranger", "--yes"
    )
    assert code == 1
    assert f"presents ssh-ed25519 key {ssh_host.fingerprint()}" in out
    assert err.startswith("jupyter remote-hw trust: ") and "records another key" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert known.read_text() == f"[127.0.0.1]:{ssh_host.port} {kind} {data}\n"
