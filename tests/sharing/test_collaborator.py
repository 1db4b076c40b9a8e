"""A collaborator joins with their own key through the real sshd and runs code on the kernel."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from pathlib import Path

import asyncssh
import pytest

from jupyter_remote_hw.sharing import COLLABORATOR, ShareFile
from jupyter_remote_hw.sharing.join import Attachment

from ..testhosts import SSHTestHost
from .conftest import OwnedKernel, own_kernel, run, started_client, stop_client


async def test_collaborator_runs_code_on_the_owners_kernel_and_both_see_it(
    owned: OwnedKernel,
    teammate_key: Path,
    tmp_path: Path,
    ssh_host: SSHTestHost,
) -> None:
    pub = teammate_key.with_suffix(".pub").read_text()
    granted = await owned.sharer.share(
        owned.machine, owned.kernel_id, pub, COLLABORATOR, expires_in=3600
    )
    path = granted.share_file.write(tmp_path / "share.json")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # The key line went into the host's authorized_keys, tagged and restricted.
    lines = ssh_host.authorized_keys.read_text().splitlines()
    (line,) = [ln for ln in lines if ln.endswith(granted.record.share_id)]
    assert line.startswith("restrict,port-forwarding,permitopen=")
    assert line.count("permitopen=") == 5 and 'expiry-time="' in line
    assert pub.split()[1] in line
    # The owner's own key line is untouched.
    assert (ssh_host.root / "id_ed25519.pub").read_text().strip() in lines

    async with Attachment(ShareFile.load(path), teammate_key) as attachment:
        info = attachment.connection_info()
        assert info["key"] == owned.connection["key"]
        teammate = await started_client(info)
        try:
            assert (await run(teammate, "shared_by_teammate = 6 * 7"))["status"] == "ok"
            seen = await run(owned.client, "assert shared_by_teammate == 42")
            assert seen["status"] == "ok", seen
            assert (await run(owned.client, "from_owner = 'hello'"))["status"] == "ok"
            assert (await run(teammate, "assert from_owner == 'hello'"))["status"] == "ok"
        finally:
            stop_client(teammate)
    # Detaching left the owner's kernel running, with its state.
    status = await owned.agent.call("kernel_status", kernel_id=owned.kernel_id)
    assert status["alive"]
    assert (await run(owned.client, "assert shared_by_teammate == 42"))["status"] == "ok"
    # The owner's ledger recorded the share and the teammate's session joining.
    await owned.sharer.sync(owned.machine)
    events = [e.event for e in owned.manager.ledger.share_events(granted.record.share_id)]
    assert events[0] == "granted" and "joined" in events


async def test_share_key_opens_nothing_but_its_own_ports(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
    tmp_path: Path,
) -> None:
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    share = granted.share_file
    async with Attachment(share, teammate_key) as attachment:
        conn = attachment.conn
        assert conn is not None
        # No shell or command: the forced command runs instead, and fails.
        result = await conn.run("echo should-not-run", check=False)
        assert result.exit_status != 0 and "should-not-run" not in str(result.stdout)
        # The kernel's own sockets and the agent's socket are refused by sshd.
        assert owned.connection["transport"] == "ipc"
        kernel_paths = [
            f"{owned.connection['ip']}-{owned.connection[name]}"
            for name in ("shell_port", "iopub_port")
        ]
        for path in kernel_paths:
            try:
                await conn.open_unix_connection(path)
            except asyncssh.ChannelOpenError:
                pass
            else:
                raise AssertionError(f"sshd let a share key reach {path}")
        # No listening on the host: remote forwards of ports and UNIX sockets are refused.
        for port in (0, share.ports["iopub_port"], 45999):
            with pytest.raises(asyncssh.ChannelListenError):
                await conn.forward_remote_port("127.0.0.1", port, "127.0.0.1", 9)
        state_dir = (await owned.agent.call("hello"))["state_dir"]
        socket_path = str(Path(state_dir) / "agent.sock")
        assert Path(socket_path).exists()  # the owner's connection reaches it
        try:
            await conn.open_unix_connection(socket_path)
        except asyncssh.ChannelOpenError:
            pass
        else:
            raise AssertionError("sshd let a share key reach the agent's socket")
    log = ssh_host.log.read_text()
    assert f"connect to path {socket_path}, but the request was denied" in log
    for path in kernel_paths:
        assert f"connect to path {path}, but the request was denied" in log


def _first_bytes(port: int, as_user: int | None) -> bytes:
    """What a fresh TCP connection to 127.0.0.1:``port`` receives first (b"": closed)."""
    probe = (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
        "s.settimeout(10)\n"
        "sys.stdout.write(s.recv(64).hex())\n"
    )
    prefix = (
        []
        if as_user is None
        else ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups"]
    )
    done = subprocess.run(
        [*prefix, "/usr/bin/python3", "-c", probe, str(port)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return bytes.fromhex(done.stdout.strip())


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another user needs root")
async def test_another_user_of_the_host_cannot_use_a_shares_relay(
    owned: OwnedKernel,
    teammate_key: Path,
) -> None:
    """A share's relays listen on TCP (``permitopen`` limits keys to TCP), where any user
    of the host may connect: the relay closes a connection that is not this user's."""
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    port = granted.share_file.ports["iopub_port"]
    # The owner's own process gets the kernel's ZMTP greeting through the relay...
    assert (await asyncio.to_thread(_first_bytes, port, None))[:1] == b"\xff"
    # ... another user's gets nothing: the relay closed the connection.
    assert await asyncio.to_thread(_first_bytes, port, 65534) == b""


async def test_hardened_host_refuses_unix_socket_listeners(
    hardened_host: SSHTestHost,
    short_tmp: Path,
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    """``port-forwarding`` lets a key listen on UNIX sockets on the host, which no key
    option forbids; with ``AllowStreamLocalForwarding local`` in sshd_config sshd
    refuses it, while the owner's side still reaches its agent's socket."""
    async with own_kernel(hardened_host, short_tmp) as owned:  # the agent is reached
        granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
        async with Attachment(granted.share_file, teammate_key) as attachment:
            assert attachment.conn is not None
            planted = tmp_path / "planted.sock"
            with pytest.raises(asyncssh.ChannelListenError):
                await attachment.conn.forward_remote_path(str(planted), "/dev/null")
            assert not planted.exists()
            teammate = await started_client(attachment.connection_info())
            try:
                assert (await run(teammate, "on_hardened = 1"))["status"] == "ok"
            finally:
                stop_client(teammate)
