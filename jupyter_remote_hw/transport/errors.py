"""Errors raised by the SSH transport, each naming the host at fault and what to try."""

from __future__ import annotations

from ..errors import UserError


class TransportError(UserError):
    """Base class: something went wrong talking to ``destination`` over SSH.

    Attributes:
        destination: The host name as the caller gave it (an ssh_config alias
            or a host name).
    """

    def __init__(self, destination: str, message: str) -> None:
        super().__init__(message)
        self.destination = destination


class HostUnreachableError(TransportError):
    """No SSH connection could be opened: DNS, routing, refused or timed out."""


class AuthenticationError(TransportError):
    """The host refused the user or every key offered."""


class HostKeyError(TransportError):
    """The host's key is not in known_hosts, or differs from the key recorded there.

    Attributes:
        fingerprint: SHA256 fingerprint of the key the host presented, when it
            could be read.
        changed: True when known_hosts lists a different key for this host.
        host: The host name the destination resolves to (ssh_config's HostName).
        port: The port it resolves to (ssh_config's Port).
    """

    def __init__(
        self,
        destination: str,
        message: str,
        *,
        fingerprint: str | None,
        changed: bool,
        host: str | None = None,
        port: int | None = None,
    ) -> None:
        super().__init__(destination, message)
        self.fingerprint = fingerprint
        self.changed = changed
        self.host = host or destination
        self.port = port or 22


class ConnectionFailedError(TransportError):
    """The connection was lost and could not be re-established in time, or was closed."""


class CommandTimeoutError(TransportError):
    """A remote command did not finish within its timeout."""
