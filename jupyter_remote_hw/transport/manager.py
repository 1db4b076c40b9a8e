"""The configurable owner of all SSH connections: one per destination."""

from __future__ import annotations

import asyncio

from traitlets import Float, Int, List, Unicode
from traitlets.config import LoggingConfigurable

from .connection import SSHConnection
from .settings import TransportSettings


class TransportManager(LoggingConfigurable):
    """Hands out the one shared :class:`SSHConnection` of each destination.

    Every trait is settable from ``jupyter_server_config.py`` as
    ``c.TransportManager.<name>``.
    """

    ssh_config_files = List(
        Unicode(),
        default_value=[],
        config=True,
        help="ssh_config files to read. Empty: ~/.ssh/config, as ssh does.",
    )
    known_hosts_files = List(
        Unicode(),
        default_value=[],
        config=True,
        help="known_hosts files to verify host keys against. Empty: UserKnownHostsFile "
        "from the ssh config, else ~/.ssh/known_hosts. Verification cannot be turned off.",
    )
    connect_timeout = Float(
        15.0, config=True, help="Seconds allowed for one connection attempt, login included."
    )
    keepalive_interval = Float(
        5.0, config=True, help="Seconds between SSH keepalive probes; 0 turns them off."
    )
    keepalive_count_max = Int(
        3, config=True, help="Unanswered keepalive probes after which the link counts as lost."
    )
    reconnect_initial_delay = Float(
        0.25, config=True, help="Seconds before the first reconnect attempt (then backs off)."
    )
    reconnect_max_delay = Float(
        2.0, config=True, help="Longest wait, in seconds, between reconnect attempts."
    )
    reconnect_give_up_after = Float(
        600.0,
        config=True,
        help="Seconds of failed reconnect attempts before the connection is declared "
        "failed; 0 retries for ever.",
    )
    command_timeout = Float(
        60.0, config=True, help="Default timeout, in seconds, of a command run on a host."
    )
    forward_wait_timeout = Float(
        30.0,
        config=True,
        help="Seconds a new client of a local forward waits for a lost connection to "
        "come back before it is dropped.",
    )

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._connections: dict[str, SSHConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def settings(self) -> TransportSettings:
        """The current trait values as one immutable settings value."""
        return TransportSettings(
            ssh_config_files=tuple(self.ssh_config_files),
            known_hosts_files=tuple(self.known_hosts_files),
            connect_timeout=self.connect_timeout,
            keepalive_interval=self.keepalive_interval,
            keepalive_count_max=self.keepalive_count_max,
            reconnect_initial_delay=self.reconnect_initial_delay,
            reconnect_max_delay=self.reconnect_max_delay,
            reconnect_give_up_after=self.reconnect_give_up_after,
            command_timeout=self.command_timeout,
            forward_wait_timeout=self.forward_wait_timeout,
        )

    async def connect(self, destination: str) -> SSHConnection:
        """Return the open connection to ``destination``, opening it if needed.

        A connection that failed or was closed is replaced by a new one.
        """
        lock = self._locks.setdefault(destination, asyncio.Lock())
        async with lock:
            conn = self._connections.get(destination)
            if conn is not None and not conn.state.is_final:
                return conn
            conn = SSHConnection(destination, self.settings, log=self.log)
            await conn.open()
            self._connections[destination] = conn
            return conn

    def get(self, destination: str) -> SSHConnection | None:
        """The connection to ``destination`` if one was opened, else None."""
        return self._connections.get(destination)

    async def close(self, destination: str) -> None:
        """Close the connection to ``destination`` and its forwards, if one is open."""
        conn = self._connections.pop(destination, None)
        if conn is not None:
            await conn.close()

    async def close_all(self) -> None:
        """Close every connection and forward."""
        conns = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(conn.close() for conn in conns))
