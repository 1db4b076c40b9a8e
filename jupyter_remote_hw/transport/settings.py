"""Settings of the SSH transport, as one immutable value."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransportSettings:
    """How connections are opened, kept alive and re-opened.

    Attributes:
        ssh_config_files: ssh_config files to read; empty means ``~/.ssh/config``.
        known_hosts_files: known_hosts files to trust; empty means what the
            ssh_config says (``UserKnownHostsFile``), else ``~/.ssh/known_hosts``.
        connect_timeout: Seconds allowed for one connection attempt, login included.
        keepalive_interval: Seconds between keepalive probes; 0 turns them off.
        keepalive_count_max: Unanswered probes after which the link counts as lost.
        reconnect_initial_delay: First wait, in seconds, before a reconnect attempt.
        reconnect_max_delay: Longest wait, in seconds, between reconnect attempts.
        reconnect_give_up_after: Seconds of failed reconnecting after which the
            connection is declared failed; 0 retries for ever.
        command_timeout: Default timeout, in seconds, of a remote command.
        forward_wait_timeout: Seconds a new connection to a local forward waits
            for the SSH connection to come back before it is dropped.
    """

    ssh_config_files: tuple[str, ...] = ()
    known_hosts_files: tuple[str, ...] = ()
    connect_timeout: float = 15.0
    keepalive_interval: float = 5.0
    keepalive_count_max: int = 3
    reconnect_initial_delay: float = 0.25
    reconnect_max_delay: float = 2.0
    reconnect_give_up_after: float = 600.0
    command_timeout: float = 60.0
    forward_wait_timeout: float = 30.0
