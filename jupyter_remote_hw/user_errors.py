"""Which failures are the user's to fix (logged in one line) and what the front end needs
to show them: the commands to run, and for an unknown host key, the key to trust.

A failure is *expected* when it comes from the user's setup or input: a host that cannot
be reached or whose key is not known, refused credentials, no AWS credentials or
capacity, a launch over budget, unknown hardware, a bad query or share. Those are logged
as one WARNING line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from .agent_client import AgentUnavailableError
from .agent_client.errors import AgentError
from .budget import BudgetExceededError
from .catalog.query import CatalogQueryError
from .providers.aws.errors import AWSError
from .providers.errors import UnknownHardwareError
from .providers.launch_steps import LaunchError
from .sharing.roles import ShareError
from .transport import HostKeyError, TransportError
from .validation import InvalidInputError

#: Errors whose message says what the user should do: never a bug of ours.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    TransportError, AgentUnavailableError, BudgetExceededError, CatalogQueryError,
    AWSError, UnknownHardwareError, ShareError, TimeoutError, InvalidInputError,
)
#: Agent error kinds that are the host's setup, not a bug (the message says what to install).
EXPECTED_AGENT_KINDS = frozenset({"no_ipykernel"})

_COMMAND = re.compile(r"`([^`\n]+)`")
#: A command with a part to fill in (``ssh <host>``) is an example, not one to copy.
_PLACEHOLDER = re.compile(r"<[A-Za-z][\w -]*>")


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: its ``launch_error``, then its causes, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "launch_error", None)
        if isinstance(wrapped, BaseException) and id(wrapped) not in seen:
            current = wrapped
        else:
            current = current.__cause__ or (
                None if current.__suppress_context__ else current.__context__)


def expected_error(exc: BaseException) -> BaseException | None:
    """The user error at the root of ``exc``, or None when ``exc`` is a bug."""
    for cause in causes(exc):
        if isinstance(cause, EXPECTED_ERRORS):
            return cause
        if isinstance(cause, AgentError) and cause.kind in EXPECTED_AGENT_KINDS:
            return cause
        status = getattr(cause, "status", None)
        if isinstance(cause, LaunchError) and status in (404, 504) and cause.__cause__ is None:
            return cause  # a launch timeout names the setting to raise
    return None


def is_expected(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (see :func:`expected_error`)."""
    return expected_error(exc) is not None


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
    return {"destination": error.destination, "host": error.host, "port": error.port,
            "fingerprint": error.fingerprint, "changed": error.changed}


def log_failure(log: logging.Logger | logging.LoggerAdapter[Any], exc: BaseException,
                what: str) -> None:
    """Log ``what`` failed: one WARNING line for a user error, the traceback for a bug."""
    if is_expected(exc):
        log.warning("%s: %s", what, one_line(str(exc)))
    else:
        log.error("%s", what, exc_info=exc)


def one_line(text: str) -> str:
    """``text`` with its line breaks folded, for a single log line."""
    return " ".join(text.split())


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
            record.msg = f"{match.group(1)}{uri[:LOGGED_URI]}… ({len(uri)} characters)" \
                f"{match.group(3)}"
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
    "EXPECTED_ERRORS", "ExpectedErrorFilter", "LongURIFilter", "commands_in", "expected_error",
    "host_key_details", "install_filter", "is_expected", "launch_logged", "log_failure",
]
