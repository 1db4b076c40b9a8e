"""The ``ssh`` provider: any host reachable with the user's SSH config and keys."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Dict, Instance, List, TraitError, Unicode, validate

from ...agent_client import AgentClient, Progress, start_ssh_agent
from ...transport import LocalForward, SSHConnection, TransportManager
from ...transport.state import ConnectionState
from ..base import Machine, Provider
from ..relayed import Forward, RelayedMachine, Where
from ..target import Target, gib_label, slug
from .config import host_aliases

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

DEFAULT_HARDWARE = "SSH host"
"""Hardware label of a host nobody labelled."""

_HOST_KEYS = {
    "host",
    "hardware",
    "python",
    "name",
    "root",
    "authorized_keys",
    "workdir",
    "hibernate_after",
}


class SSHMachine(RelayedMachine):
    """A host reached over its one shared SSH connection.

    The agent's socket is reached through the connection. A kernel's shell,
    control, stdin and IOPub ports here are its relay's
    (:class:`...agent_client.relay.KernelRelayClient`), which resumes across cuts of
    any length; its heartbeat port is forwarded, so that heartbeats fail while
    the link is down. Both keep their local ports across reconnects.

    Args:
        relay_buffer: Bytes of a kernel's messages the host keeps while the link is down.
    """

    def __init__(
        self,
        target: Target,
        transport: TransportManager,
        conn: SSHConnection,
        log: logging.Logger,
        idle_exit: float,
        relay_buffer: int = 256 * 1024 * 1024,
    ) -> None:
        super().__init__(target, log, idle_exit, relay_buffer)
        self.transport = transport
        self.conn = conn
        self._spare: asyncio.Future[tuple[Any, Any]] | None = None
        self._closing = False

    @property
    def link_up(self) -> bool:
        return self.conn.state == ConnectionState.CONNECTED

    async def _connection(self) -> SSHConnection:
        if self.conn.state.is_final:
            assert self.target.host is not None
            self.conn = await self.transport.connect(self.target.host)
        return self.conn

    async def _forward_heartbeat(self, where: Where, local_port: int) -> Forward:
        conn = await self._connection()
        if isinstance(where, str):
            return await self._forward(conn, 0, where, local_port)
        return await self._forward(conn, where, None, local_port)

    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        client = await start_ssh_agent(
            await self._connection(),
            python=self.target.python,
            root=self.target.root,
            progress=progress,
            log=self.log,
            idle_exit=self.idle_exit,
        )
        self._open_spare(client)
        return client

    def _open_spare(self, client: AgentClient) -> None:
        """Open a stream to the agent ahead of need, while a kernel starts."""
        if client.socket is not None and not self._closing:
            spare = asyncio.ensure_future(self.conn.open_unix_connection(client.socket))
            # One that fails (the link dropped) is simply not used.
            spare.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._spare = spare

    async def _open_agent_stream(self) -> tuple[Any, Any]:
        """A new stream to the host's agent (starting it again if it is gone).

        A stream opened ahead of need is taken when it is still open, so a
        new kernel's relay does not wait a round trip for its channel.
        """
        client = await self.agent()
        stream = await self._take_spare()
        if stream is None:
            if client.socket is None:
                raise RuntimeError("the agent's socket is not known")
            conn = await self._connection()
            stream = await conn.open_unix_connection(client.socket)
        self._open_spare(client)
        return stream

    async def _take_spare(self) -> tuple[Any, Any] | None:
        """The stream opened ahead of need if it is open now; any other is closed."""
        spare, self._spare = self._spare, None
        if spare is None:
            return None
        ready = spare.done()
        spare.cancel()
        await asyncio.gather(spare, return_exceptions=True)
        if spare.cancelled() or spare.exception() is not None:
            return None
        stream: tuple[Any, Any] = spare.result()
        if ready and not stream[0].at_eof():
            return stream
        stream[1].close()
        return None

    @staticmethod
    async def _forward(
        conn: SSHConnection, remote_port: int, remote_path: str | None, local_port: int
    ) -> LocalForward:
        if local_port:
            try:
                return await conn.forward_local_port(
                    remote_port, remote_path=remote_path, local_port=local_port
                )
            except OSError:
                pass  # taken meanwhile: any free port will do
        return await conn.forward_local_port(remote_port, remote_path=remote_path)

    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        conn = await self._connection()
        if isinstance(where, str):
            return await conn.open_unix_connection(where)
        return await conn.open_connection("127.0.0.1", where)

    async def close(self) -> None:
        self._closing = True
        stream = await self._take_spare()
        if stream is not None:
            stream[1].close()
        await super().close()


class SSHProvider(Provider):
    """Hosts from the SSH config and from ``c.SSHProvider.hosts``."""

    name = "ssh"

    hosts = List(
        Dict(),
        config=True,
        help="SSH hosts to offer, each a dict: 'host' (an ssh_config alias or [user@]host, "
        "required), 'hardware' (label for the picker, e.g. 'A10G 24GiB'; memory reads in "
        "GiB), 'python' (the host's Python with ipykernel, default python3), 'name' "
        "(target name, default from the host), 'root' (directory on the host for the "
        "agent's files, default the login home), 'authorized_keys' (the file the host's "
        "sshd reads keys from, where shares add their lines; default "
        "~/.ssh/authorized_keys), 'workdir' (where kernels start when the notebook's "
        "directory does not exist on the host; default SSHProvider.workdir), "
        "'hibernate_after' (seconds idle after which a kernel on the host hibernates, 0: "
        "never; default SSHProvider.hibernate_after).",
    )
    workdir = Unicode(
        "~",
        config=True,
        help="Where kernels on an SSH host start when the notebook's directory (the same "
        "path) does not exist there; ~ is the login home. A host entry's 'workdir' "
        "overrides it.",
    )
    include_ssh_config = Bool(
        True,
        config=True,
        help="Also offer every concrete Host alias of the SSH config files.",
    )
    exclude_hosts = List(
        Unicode(),
        default_value=["github.com", "gitlab.com", "bitbucket.org", "ssh.dev.azure.com"],
        config=True,
        help="SSH config aliases never offered (code hosting services).",
    )
    transport = Instance(TransportManager, allow_none=True)

    @validate("hosts")
    def _check_hosts(self, proposal: Any) -> list[dict[str, Any]]:
        for entry in proposal["value"]:
            if not isinstance(entry.get("host"), str) or not entry["host"]:
                raise TraitError(f"SSHProvider.hosts: {entry!r} has no 'host'")
            unknown = set(entry) - _HOST_KEYS
            if unknown:
                raise TraitError(
                    f"SSHProvider.hosts: {entry['host']!r} has unknown keys {sorted(unknown)}; "
                    f"use {sorted(_HOST_KEYS)}"
                )
            after = entry.get("hibernate_after")
            if after is not None and (
                isinstance(after, bool)
                or not isinstance(after, int | float)
                or not math.isfinite(after)
                or after < 0
            ):
                raise TraitError(
                    f"SSHProvider.hosts: {entry['host']!r} has 'hibernate_after' {after!r}; "
                    "give seconds, 0 or more (0: never)"
                )
        return list(proposal["value"])

    @staticmethod
    def _target_name(entry: dict[str, Any]) -> str:
        """The name of the target a host entry makes."""
        return "ssh-" + slug(str(entry.get("name") or entry["host"]))

    def hibernate_after_for(self, target: Target) -> float:
        """The host entry's ``hibernate_after``, else :attr:`hibernate_after`."""
        for entry in reversed(self.hosts):  # as in targets(), the last entry of a name wins
            if self._target_name(entry) == target.name:
                after = entry.get("hibernate_after")
                return float(self.hibernate_after if after is None else after)
        return float(self.hibernate_after)

    def _config_files(self) -> list[Path]:
        files = self.transport.ssh_config_files if self.transport is not None else []
        return [Path(f).expanduser() for f in files] or [Path("~/.ssh/config").expanduser()]

    def targets(self) -> list[Target]:
        found: dict[str, Target] = {}
        for entry in self.hosts:
            host = str(entry["host"])
            name = self._target_name(entry)
            found[name] = Target(
                name=name,
                provider=self.name,
                where=host,
                hardware=gib_label(str(entry.get("hardware") or DEFAULT_HARDWARE)),
                host=host,
                python=str(entry.get("python") or "python3"),
                root=str(entry["root"]) if entry.get("root") else None,
                authorized_keys=(
                    str(entry["authorized_keys"]) if entry.get("authorized_keys") else None
                ),
                workdir=str(entry.get("workdir") or self.workdir),
            )
        if self.include_ssh_config:
            configured = {t.host for t in found.values()}
            for alias in host_aliases(self._config_files()):
                name = "ssh-" + slug(alias)
                if alias in configured or alias in self.exclude_hosts or name in found:
                    continue
                found[name] = Target(
                    name=name,
                    provider=self.name,
                    where=alias,
                    hardware=DEFAULT_HARDWARE,
                    host=alias,
                    workdir=self.workdir,
                )
        return list(found.values())

    def price_per_hour(self, target: Target) -> float | None:
        """Nothing: the user's own hosts cost nothing per hour here."""
        return 0.0

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        assert self.transport is not None and target.host is not None
        with steps.step("connect"):
            conn = await self.transport.connect(target.host)
        machine = SSHMachine(
            target,
            self.transport,
            conn,
            self.log,
            self.agent_idle_exit,
            self.relay_buffer_mib * 1024 * 1024,
        )
        with steps.step("prepare host"):
            await machine.agent(progress=steps.note)
        return machine
