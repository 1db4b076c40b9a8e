"""Reaching a running instance: its ssh_config alias, its known host key, the SSH connection."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...ledger import MachineRecord
from ...transport import HostKeyError, SSHConnection
from ..target import Target
from .access import InstanceAccess
from .account import AWSAccount
from .errors import AWSError
from .host_keys import (
    fingerprint,
    known_hosts_file,
    known_hosts_text,
    learn_host_key,
    mismatch_error,
)
from .instances import Instances
from .machine import AWSMachine

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps


class InstanceReach:
    """Reaching a running instance over SSH, with its recorded host key, and preparing it.

    Args:
        account: The provider's settings and clients.
        access: How an instance lets us in (the key we log in with).
        instances: Instances' state (where one is now).
    """

    def __init__(self, account: AWSAccount, access: InstanceAccess, instances: Instances) -> None:
        self.account = account
        self.access = access
        self.instances = instances

    def _endpoint(self, instance: dict[str, Any]) -> tuple[str, int]:
        if self.account.ssh_endpoint_redirect:
            host, _, port = self.account.ssh_endpoint_redirect.rpartition(":")
            return host, int(port)
        address = instance.get("PublicIpAddress") or instance.get("PrivateIpAddress")
        if not address:
            raise AWSError(
                f"{instance.get('InstanceId')} has no address yet; it may be in a "
                "subnet without public addresses (set c.AWSProvider.subnet_id)"
            )
        return str(address), 22

    async def _known_host(self, record: MachineRecord, host: str, port: int) -> bool:
        """Write the machine's known_hosts file with its recorded host key at ``host:port``,
        learning the key first (once) when the ledger has none; False while it cannot be
        learnt yet (the console output lists no keys so far)."""
        ledger = self.account.require_ledger()
        record = ledger.get_machine(record.machine_id) or record
        public = str(record.info.get("host_key_public") or "")
        if not public:
            learnt = await learn_host_key(
                self.account.call,
                self.account.client("ec2", record.region),
                record,
                host,
                port,
                self.account.log,
            )
            if learnt is None:
                return False
            public, source = learnt
            ledger.update_machine(
                record.machine_id,
                info={
                    "host_key_public": public,
                    "host_key": fingerprint(public),
                    "host_key_source": source,
                },
            )
            ledger.note_machine(record.machine_id, "host key", f"{fingerprint(public)} ({source})")
            self.account.log.info(
                "machine %s: host key %s from the %s", record.name, fingerprint(public), source
            )
        _write_private(
            known_hosts_file(self.account.state_path(), self.account.alias(record.name)),
            known_hosts_text(host, port, [public]),
        )
        if record.info.get("address") != host or record.info.get("port") != port:
            ledger.update_machine(record.machine_id, info={"address": host, "port": port})
        return True

    def _write_ssh_config(self, record: MachineRecord, host: str, port: int) -> Path:
        path = self.account.state_path() / "ssh_config"
        blocks = _ssh_blocks(path.read_text() if path.exists() else "")
        alias = self.account.alias(record.name)
        blocks[alias] = (
            f"Host {alias}\n    HostName {host}\n    Port {port}\n    User {self.account.ssh_user}\n"
            f"    IdentityFile {self.access.identity()}\n    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known_hosts_file(self.account.state_path(), alias)}\n"
            "    StrictHostKeyChecking yes\n"
        )
        _write_private(path, "".join(blocks.values()))
        if self.account.transport is not None:
            files = list(self.account.transport.ssh_config_files)
            if not files:
                default = Path("~/.ssh/config").expanduser()
                files = [str(default)] if os.access(default, os.R_OK) else []
            if str(path) not in files:
                self.account.transport.ssh_config_files = [*files, str(path)]
        return path

    async def connect(self, target: Target, steps: LaunchSteps) -> AWSMachine:
        """Reach a running machine over SSH and prepare it (agent, lifetime policy).

        Runs the ``SSH reachable`` and ``host prepared`` steps.
        """
        assert self.account.transport is not None
        record = self.account.live_machine(target.name)
        if record is None:
            raise AWSError(f"no live machine named {target.name}")
        with steps.step("SSH reachable"):
            instance = await self.instances.describe(record)
            if instance is None:
                raise AWSError(f"{record.resource_id} no longer exists")
            host, port = self._endpoint(instance)
            self._write_ssh_config(record, host, port)
            conn = await self._wait_ssh(record, host, port, steps)
        machine = AWSMachine(
            target,
            self.account.transport,
            conn,
            self.account.log,
            self.account.agent_idle_exit,
            self.account,
            record.machine_id,
        )
        self.account.held.add(machine)
        with steps.step("host prepared"):
            await machine.agent(progress=steps.note)
        self.account.require_ledger().note_machine(
            record.machine_id, "host prepared", f"agent up after {steps.elapsed:.1f} s"
        )
        return machine

    async def _wait_ssh(
        self, record: MachineRecord, host: str, port: int, steps: LaunchSteps
    ) -> SSHConnection:
        """Connect once the instance answers, presenting the host key recorded for it."""
        assert self.account.transport is not None
        deadline = time.monotonic() + self.account.ssh_timeout
        where = host if port == 22 else f"[{host}]:{port}"
        known = False
        last: Exception | str | None = None
        while time.monotonic() < deadline:
            try:
                known = known or await self._known_host(record, host, port)
                if known:
                    return await self.account.transport.connect(self.account.alias(record.name))
                last = "its console output lists no SSH host key yet"
                steps.note(
                    f"waiting for the console output of {record.resource_id} to list "
                    "its SSH host keys"
                )
            except HostKeyError as exc:
                current = self.account.require_ledger().get_machine(record.machine_id) or record
                raise mismatch_error(
                    record.resource_id,
                    record.name,
                    where,
                    str(current.info.get("host_key") or "(none)"),
                    str(current.info.get("host_key_source") or "recorded"),
                    exc.fingerprint,
                ) from None
            except AWSError:
                raise
            except Exception as exc:  # noqa: BLE001 (not up yet: refused, reset, no route...)
                last = exc
                steps.note(f"waiting for SSH on {host}:{port} ({exc})")
            await asyncio.sleep(self.account.poll_interval)
        if isinstance(last, str):
            raise AWSError(
                f"{record.resource_id}: {last} after {self.account.ssh_timeout:.0f} s "
                "(c.AWSProvider.ssh_timeout), and no host key is trusted on first "
                "use. Connect again later, or launch with "
                "c.AWSProvider.host_key_source = 'injected'.",
                kind="hostkey",
            )
        raise AWSError(
            f"{record.resource_id} runs but SSH at {host}:{port} did not answer "
            f"within {self.account.ssh_timeout:.0f} s (c.AWSProvider.ssh_timeout): {last}. "
            "Check that c.AWSProvider.ssh_cidr covers your address."
        )


def _ssh_blocks(text: str) -> dict[str, str]:
    """The ``Host`` blocks of an ssh_config we wrote, by alias."""
    blocks: dict[str, str] = {}
    current = ""
    for line in text.splitlines(keepends=True):
        if line.startswith("Host "):
            current = line.split()[1]
            blocks[current] = ""
        if current:
            blocks[current] += line
    return blocks


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically."""
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)


__all__ = ["InstanceReach"]
