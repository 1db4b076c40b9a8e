"""Commands, ssh_config options, the SSH agent and state events, against a real sshd."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jupyter_remote_hw.transport import (
    CommandTimeoutError,
    ConnectionFailedError,
    ConnectionState,
    SSHConnection,
)

from ..conftest import settings_for
from ..testhosts import NetnsTestHost, SSHTestHost


async def test_run_returns_status_and_both_streams(ssh_host: SSHTestHost) -> None:
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        result = await conn.run("echo out; echo err >&2; exit 3")
        assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
        assert not result.ok
        who = await conn.run("id -un", input=None)
        assert who.ok and who.stdout.strip() == ssh_host.user
        echoed = await conn.run("cat", input="fed on stdin")
        assert echoed.stdout == "fed on stdin"


def _running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, check=False).returncode == 0


async def test_run_timeout_kills_the_command(ssh_host: SSHTestHost) -> None:
    marker = "sleep 37.25"
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        with pytest.raises(CommandTimeoutError) as err:
            await conn.run(marker, timeout=1)
        assert f"`{marker}` did not finish within 1 s" in str(err.value)
        for _ in range(50):
            if not _running(marker):
                break
            await asyncio.sleep(0.1)
        assert not _running(marker), "the timed-out command is still running on the host"
        # The connection is still usable afterwards.
        assert (await conn.run("true")).ok


async def test_connection_follows_proxyjump(ns_host: NetnsTestHost, tmp_path: Path) -> None:
    # The namespace's own 127.0.0.1 is reachable only from inside it, so
    # reaching sshd there proves the jump through the namespace host.
    known = tmp_path / "known_hosts"
    known.write_text(ns_host.known_hosts_line() + ns_host.known_hosts_line("127.0.0.1"))
    config = tmp_path / "ssh_config"
    config.write_text(
        ns_host.config_block("jump", UserKnownHostsFile=str(known))
        + ns_host.config_block(
            "inside", HostName="127.0.0.1", ProxyJump="jump", UserKnownHostsFile=str(known)
        )
    )
    async with SSHConnection("inside", settings_for(config)) as conn:
        result = await conn.run("echo $SSH_CONNECTION")
    client_addr, _, server_addr, _ = result.stdout.split()
    assert server_addr == "127.0.0.1" and client_addr == "127.0.0.1"


async def test_keys_come_from_the_ssh_agent(
    ssh_host: SSHTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock = tmp_path / "agent.sock"
    agent = await asyncio.create_subprocess_exec(
        "ssh-agent", "-D", "-a", str(sock), stdout=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            if sock.exists():
                break
            await asyncio.sleep(0.05)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        added = await asyncio.create_subprocess_exec(
            "ssh-add",
            "-q",
            str(ssh_host.user_key),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert await added.wait() == 0
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(tmp_path))  # no default keys in ~/.ssh
        config = tmp_path / "ssh_config"
        block = ssh_host.config_block("viaagent", IdentitiesOnly="no")
        config.write_text(
            "".join(line + "\n" for line in block.splitlines() if "IdentityFile" not in line)
        )
        async with SSHConnection("viaagent", settings_for(config)) as conn:
            assert (await conn.run("true")).ok
    finally:
        agent.terminate()
        await asyncio.wait_for(agent.wait(), 5)


async def test_changes_are_observable(ssh_host: SSHTestHost) -> None:
    conn = SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config))
    seen: list[ConnectionState] = []
    conn.add_listener(lambda change: seen.append(change.state))

    async def follow() -> list[ConnectionState]:
        return [change.state async for change in conn.changes()]

    await conn.open()
    follower = asyncio.create_task(follow())
    await asyncio.sleep(0)
    await conn.close()
    assert await asyncio.wait_for(follower, 5) == [ConnectionState.CLOSED]
    assert seen == [ConnectionState.CONNECTED, ConnectionState.CLOSED]
    assert conn.state == ConnectionState.CLOSED


async def test_reconnects_after_sshd_kills_the_connection(ssh_host: SSHTestHost) -> None:
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        states: list[ConnectionState] = []
        conn.add_listener(lambda change: states.append(change.state))
        pid = (await conn.run("echo $PPID")).stdout.strip()
        # Kill this connection's sshd session process on the host.
        os.kill(int(pid), signal.SIGTERM)
        # Noticed within seconds (a loaded machine may take longer than half of one).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while ConnectionState.RECONNECTING not in states:
            assert loop.time() < deadline, states
            await asyncio.sleep(0.05)
        await conn.wait_connected(timeout=10)
        assert (await conn.run("echo again")).stdout == "again\n"


async def test_a_connection_lost_while_a_command_runs_is_said_so(ssh_host: SSHTestHost) -> None:
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        # The command ends its own connection (its sshd session) while it is sent input.
        with pytest.raises(ConnectionFailedError) as err:
            await conn.run("kill -TERM $PPID; sleep 5", input="x" * 4_000_000)
        message = str(err.value)
        assert "the connection was lost while `kill -TERM $PPID; sleep 5` ran" in message
        assert "whether it did its work is not known" in message


async def test_a_command_that_ends_before_reading_its_input_gives_its_own_answer(
    ssh_host: SSHTestHost,
) -> None:
    """A command that refuses before it reads its input (a check that fails first) is
    answered with its own output and status, not as a lost connection."""
    async with SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        for _ in range(3):
            result = await conn.run("sleep 0.3; echo refused >&2; exit 3", input="x" * 20_000_000)
            assert result.exit_status == 3, result
            assert result.stderr.strip().endswith("refused"), result


async def test_default_config_is_the_users_ssh_config(
    ssh_host: SSHTestHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    dot_ssh = tmp_path / ".ssh"
    dot_ssh.mkdir(mode=0o700)
    (dot_ssh / "config").write_text(ssh_host.config_block("fromhome"))
    settings = dataclasses.replace(settings_for(ssh_host.ssh_config), ssh_config_files=())
    async with SSHConnection("fromhome", settings) as conn:
        assert (await conn.run("echo $SSH_CONNECTION")).stdout.split()[3] == str(ssh_host.port)


@pytest.mark.parametrize(
    ("ciphers_line", "expected"),
    [
        (None, "aes128-gcm@openssh.com"),
        ("chacha20-poly1305@openssh.com", "chacha20-poly1305@openssh.com"),
    ],
)
async def test_cipher_prefers_aes_gcm_unless_config_says_otherwise(
    ssh_host: SSHTestHost, tmp_path: Path, ciphers_line: str | None, expected: str
) -> None:
    config = tmp_path / "ssh_config"
    extra = {"Ciphers": ciphers_line} if ciphers_line else {}
    config.write_text(ssh_host.config_block("ciphered", **extra))
    async with SSHConnection("ciphered", settings_for(config)) as conn:
        live = await conn.wait_connected()
        assert live.get_extra_info("send_cipher") == expected


async def test_a_process_answers_what_it_is_sent(ssh_host: SSHTestHost) -> None:
    payload = os.urandom(300_000)
    script = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1])"
    async with (
        SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn,
        conn.open_process(f"{sys.executable} -c '{script}'") as process,
    ):
        process.stdin.write(payload)
        process.stdin.write_eof()
        answer = await process.stdout.read()
        await process.wait()
    assert answer == payload[::-1]
    assert process.exit_status == 0


async def test_unix_socket_stream_on_the_host(ssh_host: SSHTestHost, tmp_path: Path) -> None:
    path = tmp_path / "echo.sock"

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_unix_server(echo, str(path))
    async with server, SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        reader, writer = await conn.open_unix_connection(str(path))
        writer.write(b"through the host\n")
        assert await reader.readline() == b"through the host\n"
        writer.close()
        with pytest.raises(ConnectionFailedError, match="cannot open socket"):
            await conn.open_unix_connection(str(tmp_path / "missing.sock"))


async def test_tcp_stream_on_the_host_with_a_wide_window(ssh_host: SSHTestHost) -> None:
    payload = os.urandom(3 * 1024 * 1024)

    async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(send, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, SSHConnection(ssh_host.alias, settings_for(ssh_host.ssh_config)) as conn:
        reader, writer = await conn.open_connection("127.0.0.1", port)
        assert writer.channel.get_recv_window() == 16 * 1024 * 1024
        writer.write(b"go\n")
        assert await reader.read() == payload
        writer.close()
        closed = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(ConnectionFailedError, match=rf"cannot open 127.0.0.1:{closed}"):
            await conn.open_connection("127.0.0.1", closed)
