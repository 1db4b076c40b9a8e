"""Which failures are the user's to fix (logged in one line) and what the front end needs
to show them: the commands to run, and for an unknown host key, the key to trust.

A failure is *expected* when it comes from the user's setup or input: a host that cannot
be reached or whose key is not known, refused credentials, no AWS credentials or
capacity, a launch over budget, unknown hardware, a bad query or share. Those are logged
as one WARNING line; anything else is a bug and keeps its traceback. Which errors are
expected is said where they are defined (see :mod:`.errors`, re-exported here); this
module adds what the server's logs and the front end need on top of it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..errors import EXPECTED_ERRORS, causes, expected_error, is_expected, log_failure, one_line
from ..providers.launch_steps import LaunchError
from ..transport import HostKeyError

_COMMAND = re.compile(r"`([^`\n]+)`")
#: A command with a part to fill in (``ssh <host>``) is an example, not one to copy.
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w -]*>")


def commands_in(*texts: str | None) -> list[str]:
    """The commands quoted in backticks in ``texts``, each once, in order; examples with
    a part to fill in (``ssh <host>``) are left out."""
    found: list[str] = []
    for text in texts:
        for command in _COMMAND.findall(text or ""):
            if command not in found and not _PLACEHOLDER.search(command):
                found.append(command)
    return found


def host_key_details(exc: BaseException) -> dict[str, Any] | None:
    """For a failure caused by a host key: the host, its real address and the key's
    fingerprint, as ``{"destination", "host", "port", "fingerprint", "changed"}``."""
    error = next((c for c in causes(exc) if isinstance(c, HostKeyError)), None)
    if error is None:
        return None
    return {
        "destination": error.destination,
        "host": error.host,
        "port": error.port,
        "fingerprint": error.fingerprint,
        "changed": error.changed,
    }


def launch_logged(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed launch step, which its steps already logged (WARNING)."""
    return any(isinstance(c, LaunchError) and c.__cause__ is not None for c in causes(exc))


#: An access log line of jupyter_server for a request answered 502 or 504.
_GATEWAY_ACCESS = re.compile(r"^50[24] [A-Z]+ \S+ \(")


class ExpectedErrorFilter(logging.Filter):
    """Logs a user error in one WARNING line, and only once; bugs keep their traceback.

    jupyter_client logs every failed kernel start with ``log.exception`` (ERROR and a
    traceback, twice), whatever the reason, and jupyter_server logs each 5xx answer at
    ERROR. Installed on the server's log handlers, this filter:

    - drops those records for a failed launch step (its steps logged it already),
    - turns other records carrying a user error into one WARNING line, once per error,
    - logs the access line of a 502 or 504 answer (a host that failed, not this
      server) at WARNING.
    """

    def __init__(self) -> None:
        super().__init__()
        self._last: BaseException | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place when it is about a user error; whether to keep it."""
        if record.levelno < logging.ERROR:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            if isinstance(record.msg, str) and _GATEWAY_ACCESS.match(record.msg):
                _as_warning(record)
            return True
        if not is_expected(exc):
            return True
        if launch_logged(exc) or exc is self._last:
            return False
        self._last = exc
        message = one_line(str(exc))
        text = record.getMessage()
        if text and text != str(exc) and message not in one_line(text):
            message = f"{one_line(text)}: {message}"
        record.msg, record.args = message, None
        record.exc_info, record.exc_text = None, None
        _as_warning(record)
        return True


#: An access log line of jupyter_server: status, method, then the request's URI.
_ACCESS = re.compile(r"^(\d{3} [A-Z]+ )(\S+)( .*)$", re.DOTALL)
#: The most characters of a URI an access log line quotes.
LOGGED_URI = 200


class LongURIFilter(logging.Filter):
    """Cuts the URI of an access log line to :data:`LOGGED_URI` characters, so that a
    request with a huge path or query is not logged whole."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Shorten ``record``'s URI in place; always keep it."""
        if not isinstance(record.msg, str):
            return True
        text = record.getMessage()
        if len(text) <= LOGGED_URI:
            return True
        match = _ACCESS.match(text)
        if match and len(match.group(2)) > LOGGED_URI:
            uri = match.group(2)
            record.msg = (
                f"{match.group(1)}{uri[:LOGGED_URI]}… ({len(uri)} characters){match.group(3)}"
            )
            record.args = None
        return True


def _as_warning(record: logging.LogRecord) -> None:
    record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)


def install_filter(log: logging.Logger) -> None:
    """Put an :class:`ExpectedErrorFilter` and a :class:`LongURIFilter` on each of
    ``log``'s handlers (once)."""
    for handler in log.handlers:
        for kind in (ExpectedErrorFilter, LongURIFilter):
            if not any(isinstance(f, kind) for f in handler.filters):
                handler.addFilter(kind())


__all__ = [
    "EXPECTED_ERRORS",
    "ExpectedErrorFilter",
    "LongURIFilter",
    "causes",
    "commands_in",
    "expected_error",
    "host_key_details",
    "install_filter",
    "is_expected",
    "launch_logged",
    "log_failure",
    "one_line",
]
