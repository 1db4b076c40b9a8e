"""Each connection failure, produced for real against sshd, gives a message that says what to do."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_remote_hw.transport import (
    AuthenticationError,
    ConnectionState,
    HostKeyError,
    HostUnreachableError,
    SSHConnection,
    TransportSettings,
)
from jupyter_remote_hw.transport.errors import in_words

from ..conftest import TEST_TRANSPORT, settings_for
from ..testhosts import SSHTestHost, free_port, keygen


def write_config(tmp_path: Path, text: str) -> Path:
    """Write an ssh_config for one test and return its path."""
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return path


async def test_unreachable_port_is_named(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, ssh_host.config_block("closed", Port=port))
    conn = SSHConnection("closed", settings_for(config))
    with pytest.raises(HostUnreachableError) as err:
        await conn.open()
    message = str(err.value)
    assert f"cannot reach closed (127.0.0.1:{port}): nothing accepts connections" in message
    assert "Errno" not in message
    detail = err.value.detail or ""
    assert "Connection refused" in detail or "Connect call failed" in detail, detail
    assert "HostName and Port" in message
    assert conn.state == ConnectionState.FAILED


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener that accepts and never says a word (a hung host)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield int(sock.getsockname()[1])
    finally:
        sock.close()


async def test_unanswering_host_times_out(
    ssh_host: SSHTestHost, tmp_path: Path, silent_server: int
) -> None:
    config = write_config(tmp_path, ssh_host.config_block("hung", Port=silent_server))
    started = time.monotonic()
    with pytest.raises(HostUnreachableError) as err:
        await SSHConnection("hung", settings_for(config, connect_timeout=1.5)).open()
    assert time.monotonic() - started < 5
    assert f"cannot reach hung (127.0.0.1:{silent_server}): no answer within 1.5 s" in str(
        err.value
    )


async def test_wrong_user_names_user_and_host(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    config = write_config(tmp_path, ssh_host.config_block("nobody", User="nosuchuser"))
    with pytest.raises(AuthenticationError) as err:
        await SSHConnection("nobody", settings_for(config)).open()
    message = str(err.value)
    assert f"nosuchuser@nobody (127.0.0.1:{ssh_host.port}) refused authentication" in message
    assert "IdentityFile" in message and "ssh-add" in message


async def test_wrong_key_names_user_and_host(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    other_key = keygen(tmp_path / "other_key")
    config = write_config(tmp_path, ssh_host.config_block("badkey", IdentityFile=str(other_key)))
    with pytest.raises(AuthenticationError) as err:
        await SSHConnection("badkey", settings_for(config)).open()
    assert f"{ssh_host.user}@badkey (127.0.0.1:{ssh_host.port}) refused" in str(err.value)


async def test_unknown_host_key_is_refused_with_fingerprint(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = write_config(
        tmp_path, ssh_host.config_block("stranger", UserKnownHostsFile=str(empty))
    )
    with pytest.raises(HostKeyError) as err:
        await SSHConnection("stranger", settings_for(config)).open()
    assert err.value.changed is False
    assert err.value.fingerprint == ssh_host.fingerprint()
    message = str(err.value)
    assert f"host key of stranger (127.0.0.1:{ssh_host.port}) is not known" in message
    assert ssh_host.fingerprint() in message
    assert f"ssh-keyscan -p {ssh_host.port} 127.0.0.1 >> {empty}" in message
    assert empty.read_text() == ""


async def test_unknown_host_key_of_an_alias_in_the_default_config_names_its_real_address(
    ssh_host: SSHTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The alias lives in ~/.ssh/config (no config files named in the settings), with a
    # HostName and Port of its own: ssh-keyscan reads no ssh_config, so the hint must
    # name the real address, not the alias and port 22.
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    (home / ".ssh" / "config").write_text(
        ssh_host.config_block("ncbox", UserKnownHostsFile=str(empty))
    )
    monkeypatch.setenv("HOME", str(home))
    settings = TransportSettings(**TEST_TRANSPORT)  # type: ignore[arg-type]
    assert settings.ssh_config_files == ()
    with pytest.raises(HostKeyError) as err:
        await SSHConnection("ncbox", settings).open()
    message = str(err.value)
    assert f"host key of ncbox (127.0.0.1:{ssh_host.port}) is not known" in message
    assert f"ssh-keyscan -p {ssh_host.port} 127.0.0.1 >> {empty}" in message


async def test_changed_host_key_is_refused_loudly(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    impostor = keygen(tmp_path / "impostor")
    public = (tmp_path / "impostor.pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_host.port} {public[0]} {public[1]}\n")
    config = write_config(tmp_path, ssh_host.config_block("moved", UserKnownHostsFile=str(known)))
    with pytest.raises(HostKeyError) as err:
        await SSHConnection("moved", settings_for(config)).open()
    assert impostor.exists()
    assert err.value.changed is True
    message = str(err.value)
    assert f"HOST KEY CHANGED for moved (127.0.0.1:{ssh_host.port})" in message
    assert ssh_host.fingerprint() in message
    assert f"ssh-keygen -R '[127.0.0.1]:{ssh_host.port}' -f {known}" in message


async def test_config_cannot_turn_host_key_checking_off(
    ssh_host: SSHTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts to fall back on
    config = write_config(tmp_path, ssh_host.config_block("careless", UserKnownHostsFile="none"))
    with pytest.raises(HostKeyError):
        await SSHConnection("careless", settings_for(config)).open()


async def test_errors_arrive_within_the_timeout(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    config = write_config(tmp_path, ssh_host.config_block("closed", Port=free_port()))
    async with asyncio.timeout(3):
        with pytest.raises(HostUnreachableError):
            await SSHConnection("closed", settings_for(config, connect_timeout=2)).open()


async def test_config_cannot_turn_host_key_checking_off_for_a_jump_host(
    ssh_host: SSHTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ProxyJump hop's key is verified as the destination's is."""
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/known_hosts to fall back on
    config = write_config(
        tmp_path,
        ssh_host.config_block("carelessjump", UserKnownHostsFile="none", StrictHostKeyChecking="no")
        + ssh_host.config_block("behind", ProxyJump="carelessjump"),
    )
    with pytest.raises(HostKeyError) as raised:
        await SSHConnection("behind", settings_for(config)).open()
    assert "host key of jump host carelessjump" in str(raised.value)
    # With the jump host's key known, the same chain connects, and closes as one.
    config = write_config(
        tmp_path,
        ssh_host.config_block("carefuljump")
        + ssh_host.config_block("behind2", ProxyJump="carefuljump"),
    )
    async with SSHConnection("behind2", settings_for(config)) as conn:
        assert (await conn.run("echo $SSH_CONNECTION")).ok


async def test_a_jump_host_by_bracketed_address_and_port_connects(
    ssh_host: SSHTestHost, tmp_path: Path
) -> None:
    """``ProxyJump [127.0.0.1]:PORT`` (the bracketed form IPv6 hops need) is read as
    OpenSSH reads it, and a port that is not a number is named."""
    # The address's own block names the test host's known_hosts file, as a user's would.
    config = write_config(
        tmp_path,
        ssh_host.config_block("127.0.0.1")
        + ssh_host.config_block(
            "bracketed", ProxyJump=f"{ssh_host.user}@[127.0.0.1]:{ssh_host.port}"
        )
        + ssh_host.config_block("badport", ProxyJump="127.0.0.1:twentytwo"),
    )
    async with SSHConnection("bracketed", settings_for(config)) as conn:
        assert (await conn.run("echo $SSH_CONNECTION")).ok
    with pytest.raises(HostUnreachableError) as raised:
        await SSHConnection("badport", settings_for(config)).open()
    assert "has the port 'twentytwo', not a number" in str(raised.value)


@pytest.mark.parametrize(
    ("raised", "words", "detail"),
    [
        (
            ConnectionRefusedError(111, "Connect call failed ('10.0.0.7', 22)"),
            "nothing accepts",
            True,
        ),
        (OSError(113, "Connect call failed ('10.0.0.7', 22)"), "no route to that host", True),
        (
            OSError(
                "Multiple exceptions: [Errno 111] Connect call failed ('::1', 22, 0, 0), "
                "[Errno 111] Connect call failed ('127.0.0.1', 22)"
            ),
            "nothing accepts",
            True,
        ),
        (socket.gaierror(-2, "Name or service not known"), "does not resolve", True),
        (OSError("something new"), "something new", False),
    ],
)
def test_a_failure_to_connect_is_said_in_words_with_the_os_text_kept_apart(
    raised: BaseException, words: str, detail: bool
) -> None:
    said, kept = in_words(raised)
    assert words in said and "Errno" not in said
    assert (kept == str(raised)) if detail else kept is None
