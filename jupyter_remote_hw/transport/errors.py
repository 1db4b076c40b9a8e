"""Errors raised by the SSH transport, each naming the host at fault and what to try."""

from __future__ import annotations

import errno
import re
import socket

import asyncssh

from ..errors import UserError

#: What a failed connection's OS error number means, in words a user reads.
_IN_WORDS: dict[int, str] = {
    errno.ECONNREFUSED: "nothing accepts connections on that port",
    errno.EHOSTUNREACH: "there is no route to that host",
    errno.ENETUNREACH: "the network of that host cannot be reached",
    errno.ETIMEDOUT: "the host did not answer",
    errno.ECONNRESET: "the host reset the connection",
    errno.ECONNABORTED: "the connection was aborted",
}


def in_words(exc: BaseException) -> tuple[str, str | None]:
    """Why a connection could not be opened, in plain words, and the OS's own text.

    Args:
        exc: What opening the connection raised (an ``OSError``, or asyncssh's
            ``ConnectionLost``).

    Returns:
        The words for a message, and the error as the OS or asyncssh put it
        (``[Errno 111] Connect call failed (...)``) for a "details" view, or
        None when the words already say all of it.
    """
    raw = str(exc) or type(exc).__name__
    if isinstance(exc, socket.gaierror):
        return "its host name does not resolve to an address", raw
    if isinstance(exc, asyncssh.ConnectionLost):
        return "the connection was closed before SSH began", raw
    number = exc.errno if isinstance(exc, OSError) else None
    if number is None:  # asyncio's "Multiple exceptions: ..." of a name with several addresses
        numbers = set(re.findall(r"\[Errno (\d+)\]", raw))
        number = int(numbers.pop()) if len(numbers) == 1 else None
    words = _IN_WORDS.get(number or 0)
    return (words, raw) if words else (raw, None)


class TransportError(UserError):
    """Base class: something went wrong talking to ``destination`` over SSH.

    Attributes:
        destination: The host name as the caller gave it (an ssh_config alias
            or a host name).
        detail: The OS's or SSH library's own text of the failure, where the
            message puts it in plain words (shown behind a "details" toggle).
    """

    def __init__(self, destination: str, message: str, *, detail: str | None = None) -> None:
        super().__init__(message)
        self.destination = destination
        self.detail = detail


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
