"""The ``ssh`` provider: any host reachable with the user's SSH config and keys."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Dict, Instance, List, TraitError, Unicode, validate

from ...agent_client import AgentClient, Progress, start_ssh_agent
from ...hibernation.far import FarPlace
from ...transport import LocalForward, SSHConnection, TransportError, TransportManager
from ...transport.state import ConnectionState
from ..base import Machine, Provider
from ..host_files import read_file, remove_dir, warm_files
from ..relayed import Forward, RelayedMachine, Where
from ..target import Target, gib_label, slug
from .config import host_aliases

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

DEFAULT_HARDWARE = "SSH host"
"""Hardware label of a host nobody labelled."""

PLACE_PREFIX = "ssh:"
"""A hibernation place's ``host`` on an SSH host: ``ssh:<destination>``."""

HIBERNATED_DIR = ".local/state/jupyter-remote-hw/hibernated"
"""Where on a host (under its ``root``, else the login's home) hibernated kernels keep
their state, beside the agent's own state."""

_HOST_KEYS = {
    "host",
    "hardware",
    "python",
    "name",
    "root",
    "authorized_keys",
    "workdir",
    "hibernate_after",
    "hibernate_on_host",
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
        "never; default SSHProvider.hibernate_after), 'hibernate_on_host' (keep a "
        "hibernated kernel's state on the host's own disk; default "
        "SSHProvider.hibernate_on_host).",
    )
    hibernate_on_host = Bool(
        True,
        config=True,
        help="A kernel on an SSH host that hibernates writes its state to the host's own "
        "disk (under the host's root, else the login's home, in "
        f"{HIBERNATED_DIR}) and reads it back there when it wakes, so the bytes never "
        "cross the link; the Jupyter server keeps only the manifest and the digests. Set "
        "False for hosts whose disk does not outlive them (containers, machines rebuilt "
        "from an image): their state is then kept on the Jupyter server's disk. A host "
        "entry's 'hibernate_on_host' overrides it.",
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
            on_host = entry.get("hibernate_on_host")
            if on_host is not None and not isinstance(on_host, bool):
                raise TraitError(
                    f"SSHProvider.hosts: {entry['host']!r} has 'hibernate_on_host' "
                    f"{on_host!r}; give true or false"
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
        after = self._host_entry(target).get("hibernate_after")
        return float(self.hibernate_after if after is None else after)

    def _host_entry(self, target: Target) -> dict[str, Any]:
        """The host entry that made ``target`` (as in targets(), the last of a name
        wins); empty for a host of the SSH config."""
        for entry in reversed(self.hosts):
            if self._target_name(entry) == target.name:
                return dict(entry)
        return {}

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

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """The host's own disk, unless :attr:`hibernate_on_host` (or the host entry's
        ``hibernate_on_host``) says it does not outlive the host. Every target of the
        same destination reads it."""
        on_host = self._host_entry(target).get("hibernate_on_host")
        if not (self.hibernate_on_host if on_host is None else on_host) or not target.host:
            return None
        root = (target.root or "~").rstrip("/")  # "/" becomes "", and the path "/.local/..."
        return FarPlace(
            self.name,
            PLACE_PREFIX + target.host,
            f"{root}/{HIBERNATED_DIR}",
            f"the disk of {target.host}",
        )

    async def _place_connection(self, place: FarPlace, *paths: str) -> SSHConnection:
        """The connection to the host of ``place``, which holds ``paths``.

        Raises:
            OSError: The place is not one of our hosts', a path lies outside it, or
                the host cannot be reached.
        """
        destination = place.host.removeprefix(PLACE_PREFIX)
        known = {t.host for t in self.targets()}
        if not place.host.startswith(PLACE_PREFIX) or destination not in known:
            raise OSError(f"{place.label} is not the disk of a configured SSH host")
        base = place.path.rstrip("/")
        for path in paths:
            inside = path.rstrip("/") == base or path.startswith(base + "/")
            if not inside or "/../" in f"/{path}/":
                raise OSError(f"{path} is not in {place.path} on {destination}")
        if self.transport is None:
            raise OSError(f"{destination} cannot be reached from here: no SSH transport")
        try:
            return await self.transport.connect(destination)
        except TransportError as exc:
            raise OSError(f"{destination} cannot be reached: {exc}") from None

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """The file, read over the host's SSH connection (SFTP), for a kernel woken on
        another machine."""
        conn = await self._place_connection(place, path)
        return await read_file(conn, path, conn.destination)

    async def warm_hibernated(self, place: FarPlace, paths: list[str]) -> None:
        """The files read on the host (into its page cache, nothing comes back), while
        the kernel that reads them there starts."""
        conn = await self._place_connection(place, *paths)
        await warm_files(conn, paths, conn.destination)

    async def remove_hibernated(self, place: FarPlace) -> str:
        """The directory removed over the host's SSH connection."""
        conn = await self._place_connection(place, place.path)
        await remove_dir(conn, place.path, conn.destination)
        return f"its saved state in {place.path} on {place.label} removed"

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
