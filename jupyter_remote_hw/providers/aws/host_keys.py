"""SSH host keys of EC2 instances: made here, given to the instance at first boot, and
checked on every connection.

A launch makes a new ed25519 host key pair here, in memory, and hands it to the
instance in its user data (cloud-init's ``ssh_keys``, applied before sshd first
starts), so the key sshd presents is known before the instance exists: nothing
is trusted on first use. The public half is recorded in the ledger
(``host_key_public``, with its fingerprint as ``host_key``). Every connection,
at whatever address the instance has after a stop and start, is verified
against that record through a known_hosts file of that machine alone; a key
that differs is refused with both fingerprints and the instance named, and
never trusted in its place.

Where the private half goes, and why that is acceptable: it is never written on
this side (not in the ledger, not in a file). EC2 keeps the user data for the
instance's lifetime. From inside the instance every process can read it from
the metadata service (IMDSv2, which our launches require); that gives nothing
new, since whoever runs code there (the owner, or a collaborator on a share,
who runs as the owner with the AMI's passwordless sudo) can read
``/etc/ssh/ssh_host_*_key`` anyway. From outside, an AWS principal allowed
``ec2:DescribeInstanceAttribute`` on the instance can read it; to impersonate
the instance with it they must also be on the network path between this
machine and the instance. Where that matters, deny that action or set
``c.AWSProvider.host_key_source = "console"``, which learns the key from the
console output instead (public keys only).

Machines launched without an injected key (``console``, or by an earlier
version) learn it once: from the console output, where cloud-init prints the
host keys at first boot, or, for an earlier version's record that holds only a
fingerprint, from the key presented, which must have that fingerprint. Nothing
is ever trusted on first use.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from ...ledger import MachineRecord
from .errors import AWSError

Call = Callable[..., Awaitable[Any]]
"""How boto3 calls are made: ``await call(step, fn, **kwargs)`` (in a thread)."""

_HOST_KEYS = re.compile(
    r"-----BEGIN SSH HOST KEY KEYS-----\s*(.*?)\s*-----END SSH HOST KEY KEYS-----", re.DOTALL
)

SSHD_DROP_IN = "/etc/ssh/sshd_config.d/01-jupyter-remote-hw.conf"
"""Where ``harden_sshd`` puts its sshd setting; sshd keeps the first value it reads, so
this file sorts first."""

SSHD_HARDENING = "AllowStreamLocalForwarding local\n"
"""Share keys may not create UNIX-socket listeners on an instance (docs/sharing.md)."""

INJECTED = "injected at launch"
CONSOLE = "console output"
RECORDED_FINGERPRINT = "recorded fingerprint"


@dataclass(frozen=True)
class HostKeyPair:
    """A host key made here for one instance.

    Attributes:
        private: The private key, OpenSSH format (kept in memory only).
        public: ``ssh-ed25519 <base64>``.
        fingerprint: ``SHA256:...``, as ``ssh-keygen -l`` prints it.
    """

    private: str
    public: str
    fingerprint: str


def new_host_key() -> HostKeyPair:
    """A fresh ed25519 host key pair."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    public = " ".join(key.export_public_key("openssh").decode().split()[:2])
    return HostKeyPair(
        private=key.export_private_key("openssh").decode(),
        public=public,
        fingerprint=key.get_fingerprint("sha256"),
    )


def fingerprint(public: str) -> str:
    """The ``SHA256:...`` fingerprint of an OpenSSH public key line."""
    return str(asyncssh.import_public_key(public).get_fingerprint("sha256"))


def user_data(host_key: HostKeyPair | None, harden_sshd: bool) -> str | None:
    """The instance's user data: a cloud-config (JSON, which YAML reads) that installs
    ``host_key`` as sshd's only host key before sshd first starts, and with
    ``harden_sshd`` the sshd setting that refuses remote UNIX-socket forwards.

    None when there is nothing to say.
    """
    config: dict[str, object] = {}
    if host_key is not None:
        config.update(
            {
                # The AMI's own keys go, no other type is made: sshd presents ours alone.
                "ssh_deletekeys": True,
                "ssh_genkeytypes": [],
                "ssh_keys": {
                    "ed25519_private": host_key.private,
                    "ed25519_public": host_key.public,
                },
            }
        )
    if harden_sshd:
        config["write_files"] = [
            {
                "path": SSHD_DROP_IN,
                "content": SSHD_HARDENING,
                "owner": "root:root",
                "permissions": "0644",
            }
        ]
        # Written before sshd starts; the reload covers an sshd that was already up.
        config["runcmd"] = [
            [
                "sh",
                "-c",
                ("systemctl reload ssh 2>/dev/null || systemctl reload sshd 2>/dev/null || true"),
            ]
        ]
    if not config:
        return None
    return "#cloud-config\n" + json.dumps(config, indent=1) + "\n"


def host_keys_from_console(output: str) -> list[str]:
    """The ``<type> <base64>`` host keys that cloud-init printed on the console, if any."""
    found = _HOST_KEYS.search(output or "")
    if not found:
        return []
    keys = []
    for line in found.group(1).splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(("ssh-", "ecdsa-")):
            keys.append(f"{parts[0]} {parts[1]}")
    return keys


def valid_keys(lines: list[str]) -> list[str]:
    """The lines of ``lines`` that are public keys (the rest is not trusted)."""
    keys = []
    for line in lines:
        try:
            asyncssh.import_public_key(line)
        except (asyncssh.KeyImportError, ValueError):
            continue
        keys.append(line)
    return keys


def known_hosts_file(state_dir: Path, alias: str) -> Path:
    """The known_hosts file of one machine: its recorded key, at its current address."""
    folder = state_dir / "known_hosts.d"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder / alias


def known_hosts_text(host: str, port: int, keys: list[str]) -> str:
    """known_hosts lines naming ``host:port`` as OpenSSH does, one per key."""
    name = host if port == 22 else f"[{host}]:{port}"
    return "".join(f"{name} {key}\n" for key in keys)


def mismatch_error(
    instance_id: str, name: str, where: str, recorded: str, source: str, presented: str | None
) -> AWSError:
    """The error for an instance whose host key is not the one recorded."""
    return AWSError(
        f"HOST KEY MISMATCH for {instance_id} ({name}) at {where}: it presents "
        f"{presented or 'a key that could not be read'}, but the key recorded for it "
        f"({source}) is {recorded}. Someone may be intercepting the connection, or this "
        "is not the instance that was launched. Nothing was trusted: connection refused. "
        f"If the instance cannot be trusted, terminate it (`jupyter remote-hw terminate "
        f"{name}`) and launch a new one.",
        kind="hostkey",
    )


async def learn_host_key(
    call: Call, ec2: Any, record: MachineRecord, host: str, port: int, log: logging.Logger
) -> tuple[str, str] | None:
    """The host key of a machine launched without one injected, and where it was learnt:
    the key presented, when it has the fingerprint an earlier version recorded, or is
    one of those the console output lists; None while the console lists none.

    Args:
        call: Runs a boto3 call in a thread.
        ec2: The region's EC2 client.
        record: The machine.
        host: Where its sshd answers.
        port: Its port.
        log: Where an unreadable console output is logged.

    Raises:
        AWSError: The key presented is not the one recorded or listed.
    """
    where = host if port == 22 else f"[{host}]:{port}"
    recorded = str(record.info.get("host_key") or "")
    listed: list[str] = []
    if not recorded:
        try:
            reply = await call(
                "read the console output",
                ec2.get_console_output,
                InstanceId=record.resource_id,
                Latest=True,
            )
            listed = valid_keys(host_keys_from_console(str(reply.get("Output") or "")))
        except Exception as exc:  # noqa: BLE001 (not readable yet, or not allowed: wait)
            log.info("console output of %s not read: %s", record.resource_id, exc)
        if not listed:
            return None
    probe = await asyncssh.get_server_host_key(host, port)
    if probe is None:
        raise AWSError(f"{where} offered no SSH host key")
    offered = " ".join(probe.export_public_key("openssh").decode().split()[:2])
    presented = probe.get_fingerprint("sha256")
    if recorded:
        if presented != recorded:
            raise mismatch_error(
                record.resource_id,
                record.name,
                where,
                recorded,
                str(record.info.get("host_key_source") or "recorded"),
                presented,
            )
        return offered, RECORDED_FINGERPRINT
    if offered not in listed:
        raise AWSError(
            f"the SSH host key of {record.resource_id} at {where} ({presented}) is not one "
            "of the keys its console output lists: someone may be in between. Nothing was "
            "trusted.",
            kind="hostkey",
        )
    return offered, CONSOLE
