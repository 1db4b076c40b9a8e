"""Which failures are the user's to fix, for every layer to use.

An error class whose message says what the user should do (a host that cannot be
reached or whose key is not known, refused credentials, no AWS credentials or
capacity, a launch over budget, unknown hardware, a bad query or share) derives
from :class:`UserError`, wherever it is defined. An error that is the user's to
fix only in some cases says so with a ``user_error`` attribute (an agent that
reports a missing ipykernel, a launch that timed out). Such failures are logged
as one WARNING line; anything else is a bug and keeps its traceback.

This module imports nothing of jupyter-remote-hw, so that every layer can mark
its errors and log failures without importing the layers above it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any


class UserError(Exception):
    """An error whose message says what the user should do: never a bug of ours."""


#: Errors that are the user's to fix, beside those deriving from :class:`UserError`.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (UserError, TimeoutError)


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
                None if current.__suppress_context__ else current.__context__
            )


def expected_error(exc: BaseException) -> BaseException | None:
    """The user error at the root of ``exc``, or None when ``exc`` is a bug."""
    for cause in causes(exc):
        if isinstance(cause, EXPECTED_ERRORS) or getattr(cause, "user_error", False) is True:
            return cause
    return None


def detail_of(exc: BaseException) -> str | None:
    """The OS's own text of the failure at the root of ``exc`` (an error's ``detail``,
    ``[Errno 111] Connect call failed (...)``), where its message says it in plain
    words; None when none of its causes carries one."""
    for cause in causes(exc):
        detail = getattr(cause, "detail", None)
        if isinstance(detail, str) and detail:
            return detail
    return None


def is_expected(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's to fix (see :func:`expected_error`)."""
    return expected_error(exc) is not None


def one_line(text: str) -> str:
    """``text`` with its line breaks folded, for a single log line."""
    return " ".join(text.split())


def log_failure(
    log: logging.Logger | logging.LoggerAdapter[Any], exc: BaseException, what: str
) -> None:
    """Log ``what`` failed: one WARNING line for a user error, the traceback for a bug."""
    if is_expected(exc):
        log.warning("%s: %s", what, one_line(str(exc)))
    else:
        log.error("%s", what, exc_info=exc)


__all__ = [
    "EXPECTED_ERRORS",
    "UserError",
    "causes",
    "detail_of",
    "expected_error",
    "is_expected",
    "log_failure",
    "one_line",
]
