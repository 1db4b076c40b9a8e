"""Trusting a host's key on purpose: fetch it, show its fingerprint, record it as OpenSSH would.

Connections never trust an unknown key by themselves (see ``connection.py``);
this is the one step a user takes to trust one, after checking its fingerprint.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from .connection import SSHConnection
from .errors import HostUnreachableError, TransportError, in_words
from .login import known_hosts_name, recorded_host_keys
from .settings import TransportSettings

#: Whether known_hosts already records the presented key, another key, or none.
TRUSTED, CHANGED, UNKNOWN = "trusted", "changed", "unknown"


@dataclass(frozen=True)
class PresentedKey:
    """The key a host presents, and what the user's known_hosts says of it.

    Attributes:
        destination: The name the user gave (an ssh_config alias or a host name).
        host: The host name the alias resolves to.
        port: The port it resolves to.
        algorithm: The key's type, such as ``ssh-ed25519``.
        fingerprint: Its SHA256 fingerprint, as ``ssh-keygen -l`` prints it.
        known_hosts: The file the key is recorded in (the first of the config's).
        status: :data:`TRUSTED`, :data:`CHANGED` or :data:`UNKNOWN`.
        line: The known_hosts line that records it.
    """

    destination: str
    host: str
    port: int
    algorithm: str
    fingerprint: str
    known_hosts: str
    status: str
    line: str

    @property
    def address(self) -> str:
        """``host:port``, the address the key belongs to."""
        return f"{self.host}:{self.port}"


async def fetch_presented_key(destination: str, settings: TransportSettings) -> PresentedKey:
    """Ask ``destination`` for its host key and compare it with known_hosts.

    Raises:
        HostUnreachableError: The host did not answer.
    """
    conn = SSHConnection(destination, settings)
    host, port, files = conn.resolved_address()
    try:
        key = await conn.presented_key()
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        reason, detail = in_words(exc)
        raise HostUnreachableError(
            destination,
            f"cannot reach {destination} ({host}:{port}) to read its host key: {reason}",
            detail=detail,
        ) from None
    if key is None:
        raise TransportError(destination, f"{destination} ({host}:{port}) sent no host key")
    kind, data = key.export_public_key("openssh").decode().split()[:2]
    recorded = recorded_host_keys(files, host, port)
    status = (
        UNKNOWN
        if not recorded
        else TRUSTED
        if any(k.public_data == key.public_data for k in recorded)
        else CHANGED
    )
    return PresentedKey(
        destination=destination,
        host=host,
        port=port,
        algorithm=kind,
        fingerprint=key.get_fingerprint("sha256"),
        known_hosts=files[0],
        status=status,
        line=f"{known_hosts_name(host, port)} {kind} {data}\n",
    )


class KeyMismatchError(TransportError):
    """The key presented is not the one expected (by the user, or by known_hosts);
    nothing was trusted."""


def refuse_changed(presented: PresentedKey) -> None:
    """Refuse a key that differs from the one known_hosts records for its host.

    Raises:
        KeyMismatchError: known_hosts records another key for the host; it is not replaced.
    """
    if presented.status == CHANGED:
        raise KeyMismatchError(
            presented.destination,
            f"{presented.known_hosts} records another key for {presented.address}; it is "
            "not replaced. If the machine was reinstalled, remove the old key with "
            f"`ssh-keygen -R '{known_hosts_name(presented.host, presented.port)}' -f "
            f"{presented.known_hosts}` and trust it again.",
        )


def record_key(presented: PresentedKey) -> None:
    """Append the key's line to its known_hosts file (made 0600 in a 0700 folder if new).

    Raises:
        KeyMismatchError: known_hosts records another key for the host; it is not replaced.
    """
    if presented.status == TRUSTED:
        return
    refuse_changed(presented)
    path = Path(presented.known_hosts).expanduser()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as handle:
        if handle.tell() and not path.read_bytes().endswith(b"\n"):
            handle.write("\n")
        handle.write(presented.line)


async def trust_seen_key(
    destination: str, settings: TransportSettings, fingerprint: str
) -> PresentedKey:
    """Record the key ``destination`` presents, if it is the one the user saw.

    The key is fetched again and compared with ``fingerprint`` (what the user was
    shown), so that a key nobody saw is never trusted.

    Returns:
        The key, now recorded (or already recorded before).

    Raises:
        HostUnreachableError: The host did not answer.
        KeyMismatchError: The host now presents another key than ``fingerprint``, or
            known_hosts records another key for it; nothing was written.
    """
    presented = await fetch_presented_key(destination, settings)
    if presented.fingerprint != fingerprint.strip():
        raise KeyMismatchError(
            destination,
            f"{destination} ({presented.address}) now presents {presented.algorithm} key "
            f"{presented.fingerprint}, not the key {fingerprint.strip()} you were shown. "
            "Nothing was trusted. Check with the machine's owner which key is right, then "
            f"try again (`jupyter remote-hw trust {shlex.quote(destination)}`).",
        )
    record_key(presented)
    return presented
