"""One SSH connection to one destination: verified, kept alive, re-opened when lost."""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import AsyncIterator, Callable
from typing import Self

import asyncssh
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    stop_never,
    wait_exponential_jitter,
)

from .channels import ConnectionChannels
from .errors import (
    AuthenticationError,
    ConnectionFailedError,
    HostUnreachableError,
    TransportError,
    in_words,
)
from .forward import LocalForward
from .login import VerifiedLogin
from .settings import TransportSettings
from .state import ConnectionState, StateChange, StateListener


class _Client(asyncssh.SSHClient):
    """Tells the owning :class:`SSHConnection` why a connection ended."""

    def __init__(self, owner: SSHConnection) -> None:
        self._owner = owner

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._lost_reason = str(exc) if exc else "closed by the host"


class SSHConnection(VerifiedLogin, ConnectionChannels):
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

    def _set_state(
        self, state: ConnectionState, reason: str | None = None, *, raised: bool = False
    ) -> None:
        """Enter ``state``; ``raised``: the failure is raised to the caller, who reports it
        (so it is logged here at INFO, not a second time at WARNING)."""
        if state == self._state and reason == self._last_change.reason:
            return
        self._state = state
        self._last_change = StateChange(self.destination, state, reason)
        log = (
            self.log.warning
            if state in (ConnectionState.RECONNECTING, ConnectionState.FAILED) and not raised
            else self.log.info
        )
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

    async def _connect_once(self) -> asyncssh.SSHClientConnection:
        """Open one connection, turning failures into errors that say what to do."""
        options = self._options()
        host, port, user = str(options.host), int(options.port), str(options.username)
        where = (
            f"{self.destination} ({host}:{port})" if host != self.destination else f"{host}:{port}"
        )
        jump = (
            options.tunnel
            if isinstance(options.tunnel, str) and options.tunnel.lower() != "none"
            else None
        )
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
            if isinstance(exc, TimeoutError):
                reason, detail = f"no answer within {self.settings.connect_timeout:g} s", None
            else:
                reason, detail = in_words(exc)
            raise HostUnreachableError(
                self.destination,
                f"cannot reach {where}: {reason}. Check HostName and Port for "
                f"'{self.destination}' in your ssh config, that the machine is running, "
                "and that sshd listens there.",
                detail=detail,
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
                    multiplier=s.reconnect_initial_delay,
                    max=s.reconnect_max_delay,
                    jitter=s.reconnect_initial_delay,
                ),
                stop=stop_after_delay(s.reconnect_give_up_after)
                if s.reconnect_give_up_after > 0
                else stop_never,
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

    # -- closing ----------------------------------------------------------

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
