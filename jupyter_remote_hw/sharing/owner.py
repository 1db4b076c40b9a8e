"""The owner's side: grant a teammate's key access to a kernel, list shares, revoke them."""

from __future__ import annotations

import getpass
import logging
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

import asyncssh

from ..agent_client import AgentError
from ..ledger.store import Ledger, ShareRecord
from ..providers.base import Machine
from ..providers.ssh.provider import SSHMachine
from ..validation import HOST, InvalidInputError, check_identifier
from .roles import (
    CHANNEL_PURPOSE,
    COLLABORATOR,
    REFUSED,
    ROLE_CHANNELS,
    UNKNOWN,
    ShareError,
    check_role,
)
from .sharefile import ShareFile

DEFAULT_AUTHORIZED_KEYS = "~/.ssh/authorized_keys"
"""Where share key lines go on a host, unless its sshd reads another file."""


def owner_name() -> str:
    """``user@machine`` of whoever runs this."""
    return f"{getpass.getuser()}@{socket.gethostname()}"


def read_public_key(text: str) -> asyncssh.SSHKey:
    """Parse a teammate's public key line.

    Raises:
        ShareError: It is not an OpenSSH public key (a private key is refused too).
    """
    if "PRIVATE KEY" in text:
        raise ShareError("that is a private key: ask your teammate for their .pub file")
    try:
        return asyncssh.import_public_key(text.strip())
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise ShareError(
            f"not an SSH public key ({exc}): pass the teammate's .pub file "
            "or its one line, such as 'ssh-ed25519 AAAA... name'"
        ) from None


@dataclass(frozen=True)
class Granted:
    """A share just made: its ledger row and the file for the teammate."""

    record: ShareRecord
    share_file: ShareFile


class ShareOwner:
    """Makes, lists and revokes the shares of kernels on SSH hosts.

    Args:
        ledger: Where shares and their events are recorded.
        log: Where to log.
        authorized_keys: The file on the host that its sshd reads keys from,
            for every host; None: the host's ``authorized_keys`` setting, else
            :data:`DEFAULT_AUTHORIZED_KEYS`.
    """

    def __init__(
        self, ledger: Ledger, log: logging.Logger | None = None, authorized_keys: str | None = None
    ) -> None:
        self.ledger = ledger
        self.log = log or logging.getLogger(__name__)
        self.authorized_keys = authorized_keys

    @staticmethod
    def _ssh(machine: Machine) -> SSHMachine:
        if not isinstance(machine, SSHMachine):
            raise ShareError(
                f"{machine.target.name} is not reached over SSH: only kernels on "
                "SSH or cloud hosts can be shared (teammates join through sshd)",
                REFUSED,
            )
        return machine

    async def share(
        self,
        machine: Machine,
        kernel_id: str,
        public_key: str,
        role: str,
        expires_in: float,
        address: str | None = None,
    ) -> Granted:
        """Grant ``public_key`` the ``role`` on a kernel for ``expires_in`` seconds.

        Args:
            machine: The kernel's machine.
            kernel_id: The kernel.
            public_key: The teammate's public key line.
            role: ``viewer`` or ``collaborator``.
            expires_in: Seconds until sshd refuses the key.
            address: The host's address as the teammate reaches it (default:
                the address this side connects to).

        Raises:
            ShareError: Bad role, key, address or kernel; the host refused.
        """
        ssh = self._ssh(machine)
        check_role(role)
        key = read_public_key(public_key)
        if expires_in <= 0:
            raise ShareError("a share must expire in the future")
        if address is not None:
            try:
                check_identifier(address, HOST, "address")
            except InvalidInputError as exc:
                raise ShareError(str(exc)) from None
        client = await ssh.agent()
        try:
            status = await client.call("kernel_status", kernel_id=kernel_id)
        except AgentError as exc:
            raise ShareError(
                f"cannot share the kernel on {machine.target.label}: {exc}", UNKNOWN
            ) from None
        if not status.get("alive"):
            raise ShareError(f"the kernel on {machine.target.label} is not running", REFUSED)
        connection = dict(status["connection"])
        share_id = secrets.token_urlsafe(9).replace("-", "x").replace("_", "y")
        expires = time.time() + expires_in
        channels = list(ROLE_CHANNELS[role])
        try:
            added = await client.call(
                "add_share",
                share_id=share_id,
                kernel_id=kernel_id,
                channels=channels,
                public_key=key.export_public_key().decode().strip(),
                expires=expires,
                authorized_keys=(
                    self.authorized_keys
                    or machine.target.authorized_keys
                    or DEFAULT_AUTHORIZED_KEYS
                ),
            )
        except AgentError as exc:
            raise ShareError(f"{machine.target.name} refused the share: {exc}", REFUSED) from None
        conn = await ssh.conn.wait_connected(ssh.conn.settings.forward_wait_timeout)
        host_key = conn.get_server_host_key()
        assert host_key is not None
        peer = conn.get_extra_info("peername")
        login = str((await client.call("hello")).get("user") or "")
        share_file = ShareFile(
            share_id=share_id,
            role=role,
            kernel_id=kernel_id,
            host=address or str(peer[0]),
            port=int(peer[1]),
            user=login,
            host_key=host_key.export_public_key().decode().strip(),
            ports={name: int(port) for name, port in added["ports"].items()},
            purposes={name: CHANNEL_PURPOSE[name] for name in channels},
            expires=expires,
            owner=owner_name(),
            signature_scheme=str(connection.get("signature_scheme", "hmac-sha256")),
            key=str(connection["key"]) if role == COLLABORATOR else "",
        )
        teammate = key.get_comment() or "teammate"
        record = self.ledger.add_share(
            share_id,
            kernel_id,
            machine.target.name,
            role,
            teammate=teammate,
            fingerprint=key.get_fingerprint("sha256"),
            expires=expires,
            info={"host": share_file.host, "port": share_file.port, "ports": share_file.ports},
        )
        self.log.info(
            "kernel %s shared as %s with %s (%s) until %s",
            kernel_id,
            role,
            teammate,
            record.fingerprint,
            time.ctime(expires),
        )
        return Granted(record, share_file)

    async def sync(self, machine: Machine) -> list[dict[str, Any]]:
        """Ask the host for its shares, record new joins in the ledger, return the host's view."""
        client = await self._ssh(machine).agent()
        found = list((await client.call("list_shares")).get("shares", []))
        for share in found:
            record = self.ledger.get_share(share["share_id"])
            if record is None:
                continue
            seen = {
                round(event.time, 3)
                for event in self.ledger.share_events(record.share_id)
                if event.event == "joined"
            }
            for join in share.get("joins", []):
                if round(float(join["time"]), 3) in seen:
                    continue
                detail = f"sshd session {join['pid']}" if join.get("pid") else "attached"
                self.ledger.note_share(record.share_id, "joined", detail, at=join["time"])
        return found

    async def revoke(self, machine: Machine, share_id: str) -> dict[str, Any]:
        """Remove the share's key line and drop the teammate's connections.

        Raises:
            ShareError: Neither the ledger nor the host knows the share.
        """
        await self.sync(machine)
        client = await self._ssh(machine).agent()
        try:
            dropped = await client.call("drop_share", share_id=share_id)
        except AgentError as exc:
            if exc.kind != "unknown_share" or self.ledger.get_share(share_id) is None:
                raise ShareError(f"cannot revoke {share_id}: {exc}", UNKNOWN) from None
            dropped = {"share_id": share_id, "removed_line": False, "closed": 0, "sessions": []}
        if self.ledger.get_share(share_id) is not None:
            self.ledger.revoke_share(
                share_id,
                f"key line removed: {dropped['removed_line']}; "
                f"connections closed: {dropped['closed']}; sshd sessions ended: "
                f"{dropped['sessions']}",
            )
        self.log.info("share %s revoked", share_id)
        return dict(dropped)
