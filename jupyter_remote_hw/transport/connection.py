"""One SSH connection to one destination: verified, kept alive, re-opened when lost."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import asyncssh
from asyncssh.encryption import get_default_encryption_algs
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    stop_never,
    wait_exponential_jitter,
)

from .errors import (
    AuthenticationError,
    CommandTimeoutError,
    ConnectionFailedError,
    HostKeyError,
    HostUnreachableError,
    TransportError,
)
from .forward import LocalForward
from .settings import TransportSettings
from .state import ConnectionState, StateChange, StateListener

_DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
_PGID_MARK = "jupyter-remote-hw-pgid:"

#: Cipher preference when the user's ssh_config names none. asyncssh moves
#: about twice the data per CPU second with AES-GCM than with chacha20-poly1305
#: (see docs/benchmarks.md); OpenSSH servers offer both by default.
_PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)


def _default_ssh_config() -> list[str]:
    """``~/.ssh/config`` when it can be read, as OpenSSH's client uses it."""
    path = Path("~", ".ssh", "config").expanduser()
    return [str(path)] if os.access(path, os.R_OK) else []


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names ``host:port``: the bare host on port 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


def _as_typed(path: str) -> str:
    """``path`` as a user types it: the home folder as ``~``."""
    home = str(Path.home())
    return "~" + path[len(home):] if path == home or path.startswith(home + "/") else path


def recorded_host_keys(files: list[str], host: str, port: int) -> list[asyncssh.SSHKey]:
    """The keys the known_hosts ``files`` record for ``host:port`` (unreadable files skipped)."""
    keys: list[asyncssh.SSHKey] = []
    for path in files:
        try:
            keys.extend(asyncssh.match_known_hosts(path, host, host, port)[0])
        except (OSError, ValueError):
            continue
    return keys


@dataclass(frozen=True)
class CommandResult:
    """What a remote command did.

    Attributes:
        command: The command line as sent.
        exit_status: Its exit status; None when it was killed by a signal.
        stdout: Its standard output, decoded as UTF-8.
        stderr: Its standard error, decoded as UTF-8.
    """

    command: str
    exit_status: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """Whether the command exited with status 0."""
        return self.exit_status == 0

#: Largest packet the host may send on a byte stream opened by
#: :meth:`SSHConnection.open_connection`: 8 times a forward's, so a download
#: is fewer packets to decrypt and hand over (a forward, whose bytes go on to
#: a local socket, measured best at 32 KiB).
STREAM_MAX_PACKET = 256 * 1024
#: Receive window of a byte stream opened by :meth:`SSHConnection.open_connection`:
#: twice a forward's, as a transfer's bulk stream is read at once into its
#: buffers and a download over a long link moves at most one window per round
#: trip on each channel (a large transfer takes several channels; the bytes in
#: flight never exceed the transfer's own size).
STREAM_WINDOW = 16 * 1024 * 1024


class _Client(asyncssh.SSHClient):
    """Tells the owning :class:`SSHConnection` why a connection ended."""

    def __init__(self, owner: SSHConnection) -> None:
        self._owner = owner

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._lost_reason = str(exc) if exc else "closed by the host"


class SSHConnection:
    """The one SSH connection to ``destination``, shared by all who talk to that host.

    Connects with the user's ssh_config (HostName, User, Port, IdentityFile,
    ProxyJump) and SSH agent, verifies the host key against known_hosts, sends
    keepalives, and reconnects with backoff when the link drops. Callers follow
    the state through :meth:`add_listener` or :meth:`changes`.

    Args:
        destination: An ssh_config ``Host`` alias or a host name.
        settings: Timeouts, keepalive and reconnect policy, config files.
        log: Where to log; defaults to this module's logger.
    """

    def __init__(
        self,
        destination: str,
        settings: TransportSettings | None = None,
        *,
        log: logging.Logger | None = None,
    ) -> None:
        self.destination = destination
        self.settings = settings or TransportSettings()
        self.log = log or logging.getLogger(__name__)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._known_files: list[str] = []
        self._state = ConnectionState.CONNECTING
        self._last_change = StateChange(destination, self._state)
        self._changed = asyncio.Event()
        self._listeners: list[StateListener] = []
        self._supervisor: asyncio.Task[None] | None = None
        self._lost_reason: str | None = None
        self._forwards: set[LocalForward] = set()
        self._opened = False

    # -- state -------------------------------------------------------------

    @property
    def state(self) -> ConnectionState:
        """The current state."""
        return self._state

    @property
    def last_change(self) -> StateChange:
        """The most recent state change, with its reason."""
        return self._last_change

    def add_listener(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener`` on every state change; returns a function that removes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def changes(self) -> AsyncIterator[StateChange]:
        """Yield state changes as they happen, ending after a final state."""
        queue: asyncio.Queue[StateChange] = asyncio.Queue()
        remove = self.add_listener(queue.put_nowait)
        try:
            while True:
                change = await queue.get()
                yield change
                if change.state.is_final:
                    return
        finally:
            remove()

    def _set_state(self, state: ConnectionState, reason: str | None = None, *,
                   raised: bool = False) -> None:
        """Enter ``state``; ``raised``: the failure is raised to the caller, who reports it
        (so it is logged here at INFO, not a second time at WARNING)."""
        if state == self._state and reason == self._last_change.reason:
            return
        self._state = state
        self._last_change = StateChange(self.destination, state, reason)
        log = self.log.warning if state in (ConnectionState.RECONNECTING,
                                            ConnectionState.FAILED) and not raised \
            else self.log.info
        log("ssh %s: %s%s", self.destination, state.value, f" ({reason})" if reason else "")
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for listener in list(self._listeners):
            try:
                listener(self._last_change)
            except Exception:
                self.log.exception("ssh %s: state listener failed", self.destination)

    async def wait_connected(self, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        """Wait until connected (through any reconnect) and return the live connection.

        Raises:
            ConnectionFailedError: The connection failed for good, was closed, or
                did not come back within ``timeout`` seconds.
        """
        try:
            async with asyncio.timeout(timeout):
                while self._state != ConnectionState.CONNECTED:
                    if self._state.is_final:
                        break
                    await self._changed.wait()
        except TimeoutError:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: not connected after {timeout:.0f} s "
                f"(state {self._state.value}: {self._last_change.reason or 'no reason given'})",
            ) from None
        if self._state != ConnectionState.CONNECTED or self._conn is None:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: connection {self._state.value}"
                f"{': ' + self._last_change.reason if self._last_change.reason else ''}",
            )
        return self._conn

    # -- connecting --------------------------------------------------------

    def _options(self) -> asyncssh.SSHClientConnectionOptions:
        options, self._known_files = self._verified_options(self.destination)
        return options

    def _verified_options(
        self, host: str, **given: Any
    ) -> tuple[asyncssh.SSHClientConnectionOptions, list[str]]:
        """Options to reach ``host`` (the destination or a jump host) from the ssh_config
        files, with its host key always verified, and the known_hosts files it uses.

        Args:
            host: An ssh_config alias or host name.
            given: Options that the ssh_config does not set for this host
                (a ProxyJump hop's user and port).
        """
        s = self.settings
        kwargs: dict[str, Any] = {
            **given,
            "host": host,
            "connect_timeout": s.connect_timeout,
            "keepalive_interval": s.keepalive_interval,
            "keepalive_count_max": s.keepalive_count_max,
        }
        # Named explicitly, ~/.ssh/config included: options built on their own do not
        # read it (only asyncssh.connect does), and these options give the host name,
        # port and known_hosts files that errors and the known_hosts check rely on.
        kwargs["config"] = list(s.ssh_config_files) or _default_ssh_config()
        if s.known_hosts_files:
            kwargs["known_hosts"] = list(s.known_hosts_files)
        options = asyncssh.SSHClientConnectionOptions(**kwargs)
        overrides: dict[str, Any] = {}
        if list(options.encryption_algs) == get_default_encryption_algs():
            overrides["encryption_algs"] = _PREFERRED_CIPHERS
        if options.known_hosts is None:
            # "UserKnownHostsFile none" would turn verification off: never do that.
            self.log.warning(
                "ssh %s: ssh_config disables known_hosts; verifying against %s anyway",
                host, _DEFAULT_KNOWN_HOSTS,
            )
            overrides["known_hosts"] = b""
        # The files that record host keys, and the first, where a trusted key is written.
        known_files = self._known_hosts_files(options)
        present = [f for f in known_files if Path(f).expanduser().exists()]
        if "known_hosts" not in overrides and present != known_files:
            # A known_hosts file that does not exist yet records no key, as for OpenSSH
            # (asyncssh would fail on it): verify against the others, or against none.
            overrides["known_hosts"] = present or b""
        if overrides:
            options = asyncssh.SSHClientConnectionOptions(**kwargs, **overrides)
        return options, known_files

    async def _open_jump_hosts(self, spec: str) -> asyncssh.SSHClientConnection:
        """Connect through a ProxyJump chain (``[user@]host[:port],...``), each hop's host
        key verified as the destination's is (asyncssh alone would take each hop's
        ssh_config as it is, ``UserKnownHostsFile none`` included).

        Returns:
            The connection to the last hop; closing it closes the ones before.

        Raises:
            HostKeyError: A hop's host key is unknown or changed.
            OSError, asyncssh.Error: A hop could not be reached or refused us.
        """
        last: asyncssh.SSHClientConnection | None = None
        config = list(self.settings.ssh_config_files) or ()
        try:
            for hop in (part.strip() for part in spec.split(",") if part.strip()):
                user, _, address = hop.rpartition("@")
                host, _, port = address.partition(":") if address.count(":") == 1 else \
                    (address, "", "")
                given: dict[str, Any] = {}
                if user:
                    given["username"] = user
                if port:
                    given["port"] = int(port)
                options, files = self._verified_options(host, **given)
                try:
                    conn = await asyncssh.connect(host, config=config, options=options,
                                                  tunnel=last or ())
                except asyncssh.HostKeyNotVerifiable:
                    where = f"{options.host}:{options.port}"
                    raise HostKeyError(
                        self.destination,
                        f"host key of jump host {hop} ({where}), on the way to "
                        f"{self.destination}, is not known or has changed; nothing was "
                        f"trusted automatically. Check it and add it to {files[0]} (connect "
                        f"once with `ssh {shlex.quote(hop)}`), then retry.",
                        fingerprint=None, changed=False, host=str(options.host),
                        port=int(options.port),
                    ) from None
                conn.set_tunnel(last)
                last = conn
        except BaseException:
            if last is not None:
                last.close()
            raise
        if last is None:
            raise HostUnreachableError(self.destination,
                                       f"ProxyJump of {self.destination} names no host")
        return last

    def resolved_address(self) -> tuple[str, int, list[str]]:
        """The host name and port the destination resolves to, and its known_hosts files.

        Read from the ssh_config files (``~/.ssh/config`` by default), as OpenSSH would.
        """
        options = self._options()
        return str(options.host), int(options.port), self._known_files

    async def presented_key(self) -> asyncssh.SSHKey | None:
        """The host key the destination presents, read without authenticating.

        Raises:
            OSError, TimeoutError, asyncssh.Error: It could not be read.
        """
        return await asyncio.wait_for(
            asyncssh.get_server_host_key(
                self.destination, config=list(self.settings.ssh_config_files) or ()),
            self.settings.connect_timeout,
        )

    def _known_hosts_files(self, options: asyncssh.SSHClientConnectionOptions) -> list[str]:
        known = options.known_hosts
        if isinstance(known, (str, Path)):
            return [str(known)]
        if isinstance(known, list) and known and all(isinstance(k, (str, Path)) for k in known):
            return [str(k) for k in known]
        return [str(_DEFAULT_KNOWN_HOSTS.expanduser())]

    async def _connect_once(self) -> asyncssh.SSHClientConnection:
        """Open one connection, turning failures into errors that say what to do."""
        options = self._options()
        host, port, user = str(options.host), int(options.port), str(options.username)
        where = f"{self.destination} ({host}:{port})" if host != self.destination else \
            f"{host}:{port}"
        jump = options.tunnel if isinstance(options.tunnel, str) and \
            options.tunnel.lower() != "none" else None
        tunnel: asyncssh.SSHClientConnection | None = None
        try:
            if jump is not None:
                tunnel = await self._open_jump_hosts(jump)
            conn = await asyncssh.connect(
                self.destination,
                config=list(self.settings.ssh_config_files) or (),
                options=options,
                tunnel=tunnel or (),
                client_factory=lambda: _Client(self),
            )
            if tunnel is not None:
                conn.set_tunnel(tunnel)  # closed with the connection
                tunnel = None
        except asyncssh.HostKeyNotVerifiable as exc:
            raise await self._host_key_error(options, where, host, port, exc) from None
        except asyncssh.PermissionDenied as exc:
            raise AuthenticationError(
                self.destination,
                f"{user}@{where} refused authentication ({exc.reason}). Check User and "
                f"IdentityFile for '{self.destination}' in your ssh config, or load your key "
                f"into the SSH agent with ssh-add; `ssh {shlex.quote(self.destination)}` "
                "should log in without asking for a password.",
            ) from None
        except (OSError, TimeoutError, asyncssh.ConnectionLost) as exc:
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):
                reason = f"no answer within {self.settings.connect_timeout:g} s"
            raise HostUnreachableError(
                self.destination,
                f"cannot reach {where}: {reason}. Check HostName and Port for "
                f"'{self.destination}' in your ssh config, that the machine is running, "
                "and that sshd listens there.",
            ) from None
        except asyncssh.DisconnectError as exc:
            raise HostUnreachableError(
                self.destination, f"{where} closed the connection: {exc.reason}"
            ) from None
        finally:
            if tunnel is not None:  # the destination was not reached through it
                tunnel.close()
        self._lost_reason = None
        return conn

    async def _host_key_error(
        self,
        options: asyncssh.SSHClientConnectionOptions,
        where: str,
        host: str,
        port: int,
        exc: asyncssh.HostKeyNotVerifiable,
    ) -> HostKeyError:
        fingerprint: str | None = None
        kind = "host"
        try:
            key = await self.presented_key()
            if key is not None:
                fingerprint = key.get_fingerprint("sha256")
                kind = key.get_algorithm()
        except (OSError, TimeoutError, asyncssh.Error) as probe_exc:
            self.log.debug("ssh %s: could not read host key: %s", self.destination, probe_exc)
        files = self._known_files
        changed = bool(recorded_host_keys(files, host, port))
        shown = fingerprint or "(could not be read)"
        name = known_hosts_name(host, port)
        target = _as_typed(files[0]) if files else str(_DEFAULT_KNOWN_HOSTS)
        if changed:
            message = (
                f"HOST KEY CHANGED for {where}: it now presents {kind} key {shown}, which "
                f"differs from the key recorded in {', '.join(files)}. Someone may be "
                "intercepting the connection, or the machine was reinstalled. Connection "
                "refused. If you know it was reinstalled, remove the old key with "
                f"`ssh-keygen -R '{name}' -f {target}` and trust the new one."
            )
        else:
            message = (
                f"host key of {where} is not known: it presents {kind} key {shown}. "
                "Nothing was trusted automatically. If that is your machine's key, trust "
                f"it with `jupyter remote-hw trust {shlex.quote(self.destination)}`, or add it "
                f"with `ssh-keyscan -p {port} {host} >> {target}` (or connect once with "
                f"`ssh {shlex.quote(self.destination)}` and accept it), then retry."
            )
        self.log.debug("ssh %s: host key rejected: %s", self.destination, exc)
        return HostKeyError(self.destination, message, fingerprint=fingerprint, changed=changed,
                            host=host, port=port)

    async def open(self) -> Self:
        """Connect for the first time and start watching the connection.

        Raises:
            HostUnreachableError: The host could not be reached.
            AuthenticationError: The user or every key was refused.
            HostKeyError: The host key is unknown or changed.
        """
        if self._opened:
            await self.wait_connected()
            return self
        self._opened = True
        self._set_state(ConnectionState.CONNECTING)
        try:
            self._conn = await self._connect_once()
        except TransportError as exc:
            self._set_state(ConnectionState.FAILED, str(exc), raised=True)
            raise
        self._set_state(ConnectionState.CONNECTED)
        self._supervisor = asyncio.create_task(self._supervise())
        return self

    async def _supervise(self) -> None:
        """Run :meth:`_watch`; a bug in it fails the connection loudly, never silently."""
        try:
            await self._watch()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.exception("ssh %s: connection supervisor crashed", self.destination)
            self._set_state(ConnectionState.FAILED, f"internal error: {exc!r}")

    async def _watch(self) -> None:
        """Wait for the connection to drop; reconnect with backoff until given up."""
        s = self.settings
        while self._conn is not None:
            await self._conn.wait_closed()
            if self._state.is_final:
                return
            self._set_state(ConnectionState.RECONNECTING, self._lost_reason or "connection lost")

            def before_sleep(retry_state: RetryCallState) -> None:
                outcome = retry_state.outcome
                error = outcome.exception() if outcome else None
                self._set_state(ConnectionState.RECONNECTING, str(error) if error else None)

            retrying = AsyncRetrying(
                wait=wait_exponential_jitter(
                    multiplier=s.reconnect_initial_delay, max=s.reconnect_max_delay,
                    jitter=s.reconnect_initial_delay,
                ),
                stop=stop_after_delay(s.reconnect_give_up_after)
                if s.reconnect_give_up_after > 0 else stop_never,
                retry=retry_if_exception_type(HostUnreachableError),
                before_sleep=before_sleep,
                reraise=True,
            )
            try:
                async for attempt in retrying:
                    with attempt:
                        conn = await self._connect_once()
            except TransportError as exc:
                self._conn = None
                self._set_state(ConnectionState.FAILED, f"reconnect gave up: {exc}")
                return
            self._conn = conn
            self._set_state(ConnectionState.CONNECTED)

    # -- using the connection ---------------------------------------------

    async def run(
        self, command: str, *, timeout: float | None = None, input: str | None = None
    ) -> CommandResult:
        """Run ``command`` (POSIX sh syntax) on the host; return its status and output.

        Raises:
            CommandTimeoutError: It did not finish within ``timeout`` seconds
                (default: the settings' ``command_timeout``); its whole process
                group on the host is killed.
            ConnectionFailedError: There is no connection to run it on.
        """
        limit = timeout if timeout is not None else self.settings.command_timeout
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        # sshd makes the command a session leader; `exec` keeps that pid for sh,
        # which reports it first so that a timeout can kill the whole group.
        wrapped = "exec sh -c " + shlex.quote(f"echo {_PGID_MARK}$$ >&2; {command}")
        try:
            process = await conn.create_process(wrapped, errors="replace")
        except asyncssh.ChannelOpenError as exc:  # the link dropped after wait_connected
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: could not start `{command}`: {exc.reason}",
            ) from None
        pgid: str | None = None
        try:
            async with asyncio.timeout(limit):
                first = str(await process.stderr.readline())
                if first.startswith(_PGID_MARK):
                    pgid = first[len(_PGID_MARK):].strip()
                stdout, stderr = await process.communicate(input)
        except TimeoutError:
            process.close()
            if pgid and pgid.isdigit():
                await conn.run(f"exec sh -c 'kill -s KILL -- -{pgid}'", check=False)
            raise CommandTimeoutError(
                self.destination,
                f"ssh {self.destination}: `{command}` did not finish within {limit:g} s "
                "and was killed",
            ) from None
        prefix = "" if pgid is not None else first
        return CommandResult(
            command=command,
            exit_status=process.exit_status,
            stdout=str(stdout or ""),
            stderr=prefix + str(stderr or ""),
        )

    @contextlib.asynccontextmanager
    async def open_process(self, command: str) -> AsyncIterator[asyncssh.SSHClientProcess[bytes]]:
        """Start ``command`` on the host for a dialogue over its stdin and stdout (bytes).

        For exchanges that :meth:`run` cannot carry, such as sending data only
        when the command asks for it. The process's channel is closed when the
        context ends; the caller bounds the time it takes.

        Raises:
            ConnectionFailedError: There is no connection to start it on.
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            process = await conn.create_process(command, encoding=None)
        except asyncssh.ChannelOpenError as exc:  # the link dropped after wait_connected
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: could not start a command: {exc.reason}",
            ) from None
        try:
            yield process
        finally:
            process.close()
            await process.wait_closed()

    async def open_unix_connection(
        self, remote_path: str
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """Open a byte stream to the UNIX socket ``remote_path`` on the host.

        Raises:
            ConnectionFailedError: There is no connection, or the host refused
                to open the socket (it does not exist or is not ours).
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            return await conn.open_unix_connection(remote_path, encoding=None)
        except asyncssh.ChannelOpenError as exc:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: cannot open socket {remote_path}: {exc.reason}",
            ) from None

    async def open_connection(
        self, remote_host: str, remote_port: int
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """Open a byte stream to ``remote_host:remote_port`` as seen from the host.

        Made for bulk transfers: the channel's receive window is twice a
        forward's, so downloads are less held back by round trips, and the
        host may send larger packets than on a forward.

        Raises:
            ConnectionFailedError: There is no connection, or the host refused
                to open the channel (nothing listens there, or forwarding is
                not allowed for this key).
        """
        conn = await self.wait_connected(self.settings.forward_wait_timeout)
        try:
            return await conn.open_connection(remote_host, remote_port, encoding=None,
                                              window=STREAM_WINDOW,
                                              max_pktsize=STREAM_MAX_PACKET)
        except asyncssh.ChannelOpenError as exc:
            raise ConnectionFailedError(
                self.destination,
                f"ssh {self.destination}: cannot open {remote_host}:{remote_port}: {exc.reason}",
            ) from None

    async def forward_local_port(
        self, remote_port: int, *, remote_host: str = "127.0.0.1",
        remote_path: str | None = None, local_port: int = 0,
    ) -> LocalForward:
        """Listen on 127.0.0.1 and tunnel each client to ``remote_host:remote_port``,
        or to the host's UNIX socket ``remote_path`` when one is given.

        The local port is kept across reconnects; it is closed with this
        connection or by :meth:`LocalForward.close`.
        """
        forward = LocalForward(
            self.destination,
            lambda: self.wait_connected(self.settings.forward_wait_timeout),
            remote_port,
            remote_host=remote_host,
            remote_path=remote_path,
            local_port=local_port,
            log=self.log,
        )
        await forward.start()
        self._forwards.add(forward)
        return forward

    async def close(self) -> None:
        """Close every forward and the connection; the state becomes ``closed``."""
        if self._state == ConnectionState.CLOSED:
            return
        self._set_state(ConnectionState.CLOSED)
        # The supervisor first: a reconnect finishing meanwhile would bring
        # back a connection that nobody closes.
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        for forward in list(self._forwards):
            await forward.close()
        self._forwards.clear()
        if self._conn is not None:
            self._conn.close()
            await self._conn.wait_closed()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
