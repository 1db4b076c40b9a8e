"""Revoking drops the teammate at once; an expired key line is refused by sshd itself."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import asyncssh
import pytest

from jupyter_remote_hw.agent.shares import edit_authorized_keys, key_line
from jupyter_remote_hw.agent.sshd_sessions import sessions_begun_before
from jupyter_remote_hw.sharing import COLLABORATOR, ShareError
from jupyter_remote_hw.sharing.join import Attachment

from ..testhosts import SSHTestHost
from .conftest import OwnedKernel, run, started_client, stop_client


async def test_revoke_removes_the_line_and_drops_the_teammate_within_seconds(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    share_id = granted.record.share_id
    attachment = await Attachment(granted.share_file, teammate_key).open()
    teammate = await started_client(attachment.connection_info())
    try:
        assert (await run(teammate, "before_revoke = 1"))["status"] == "ok"
        began = time.monotonic()
        dropped = await owned.sharer.revoke(owned.machine, share_id)
        # The teammate's SSH connection is gone within seconds: its sshd session ended.
        await asyncio.wait_for(attachment.wait_closed(), timeout=5)
        assert time.monotonic() - began < 5
        assert dropped["removed_line"] and dropped["sessions"]
        assert share_id not in ssh_host.authorized_keys.read_text()
        # The owner's own link is untouched.
        assert (await run(owned.client, "assert before_revoke == 1"))["status"] == "ok"
    finally:
        stop_client(teammate)
        await attachment.close()
    # The share's ports stay bound, refusing connections, while an sshd session
    # from before the revocation may be left: nothing else can take them.
    for port in granted.share_file.ports.values():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        with socket.socket() as probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", port))
    # Joining again is refused by sshd: the key line is gone.
    with pytest.raises(ShareError, match="refused your key"):
        await Attachment(granted.share_file, teammate_key).open()
    record = owned.manager.ledger.get_share(share_id)
    assert record is not None and record.revoked is not None
    events = [e.event for e in owned.manager.ledger.share_events(share_id)]
    assert events[0] == "granted" and "joined" in events and events[-1] == "revoked"
    assert owned.manager.ledger.shares() == []


async def test_expired_line_is_refused_by_sshd(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    """The line is written as the agent writes it, with an expiry two minutes ago,
    and left in place: sshd alone refuses it."""
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    share = granted.share_file
    await owned.agent.call("drop_share", share_id=share.share_id)
    pub = teammate_key.with_suffix(".pub").read_text()
    ports = list(share.ports.values())

    def write_line(expiry: float) -> str:
        edit_authorized_keys(str(ssh_host.authorized_keys), remove=share.share_id)
        line = key_line(
            pub, ports, time.strftime("%Y%m%d%H%MZ", time.gmtime(expiry)), share.share_id
        )
        edit_authorized_keys(str(ssh_host.authorized_keys), add=line)
        assert line in ssh_host.authorized_keys.read_text()
        return line

    try:
        # The same line with a future expiry lets the key in...
        write_line(time.time() + 3600)
        async with Attachment(share, teammate_key) as attachment:
            assert attachment.conn is not None
        # ...and with an expiry two minutes ago, sshd refuses it (the share
        # file's own clock says it is valid: the refusal is sshd's alone).
        write_line(time.time() - 120)
        with pytest.raises(ShareError, match="refused your key"):
            await Attachment(share, teammate_key).open()
        fingerprint = asyncssh.import_public_key(pub).get_fingerprint("sha256")
        assert f"Failed publickey for {ssh_host.user} from 127.0.0.1" in ssh_host.log.read_text()
        assert fingerprint in ssh_host.log.read_text().rsplit("Failed publickey", 1)[1]
    finally:
        edit_authorized_keys(str(ssh_host.authorized_keys), remove=share.share_id)
    assert share.share_id not in ssh_host.authorized_keys.read_text()


async def test_agent_drops_a_share_when_it_expires(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    added = await owned.agent.call(
        "add_share",
        share_id="expiring1",
        kernel_id=owned.kernel_id,
        channels=["iopub_port"],
        public_key=teammate_key.with_suffix(".pub").read_text(),
        expires=time.time() + 2,
        authorized_keys=str(ssh_host.authorized_keys),
    )
    assert "expiring1" in ssh_host.authorized_keys.read_text()
    assert added["ports"]["iopub_port"] > 0
    await asyncio.sleep(3)
    assert "expiring1" not in ssh_host.authorized_keys.read_text()
    assert (await owned.agent.call("list_shares"))["shares"] == []


async def test_shares_end_with_their_kernel(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    granted = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    attachment = await Attachment(granted.share_file, teammate_key).open()
    teammate = await started_client(attachment.connection_info())
    try:
        await owned.agent.call("shutdown_kernel", kernel_id=owned.kernel_id, now=True)
        await asyncio.wait_for(attachment.wait_closed(), timeout=5)
    finally:
        stop_client(teammate)
        await attachment.close()
    assert granted.record.share_id not in ssh_host.authorized_keys.read_text()
    assert (await owned.agent.call("list_shares"))["shares"] == []


async def test_sessions_begun_before_a_time(owned: OwnedKernel) -> None:
    """The owner's own SSH connection is an sshd session process of this user, begun
    before now; none begun before boot. A revoked share's ports are freed by this."""
    now = sessions_begun_before(time.time())
    assert now, "the owner's connection should be an sshd session process"
    for pid in now:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        assert cmdline.startswith("sshd: ") and "[listener]" not in cmdline
    assert sessions_begun_before(0.0) == set()


async def test_a_key_with_a_live_share_gets_no_second_one_until_the_first_is_revoked(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    """sshd uses the first line that matches a key: a second line would never be used."""
    first = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    first_id = first.record.share_id
    with pytest.raises(
        ShareError,
        match=f"this key already has share {first_id} "
        rf"\(kernel {owned.kernel_id}\) on this host.*revoke it first",
    ):
        await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    assert ssh_host.authorized_keys.read_text().count("jupyter-remote-hw-share:") == 1
    await owned.sharer.revoke(owned.machine, first_id)
    second = await owned.share(teammate_key, COLLABORATOR, expires_in=3600)
    async with Attachment(second.share_file, teammate_key) as attachment:
        teammate = await started_client(attachment.connection_info())
        try:
            assert (await run(teammate, "second_share = 2"))["status"] == "ok"
        finally:
            stop_client(teammate)
