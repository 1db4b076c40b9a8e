"""The steps of a kernel launch: timed, logged, reported, and named when one fails."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..agent_client import AgentError, AgentUnavailableError
from ..transport import (
    AuthenticationError,
    CommandTimeoutError,
    HostKeyError,
    HostUnreachableError,
    TransportError,
)
from .errors import UnknownHardwareError
from .target import Target

LaunchListener = Callable[[dict[str, Any]], None]
"""Receives launch events: ``{"kernel_id", "target", "step", "state", "seconds", "detail"}``
with ``state`` one of ``started``, ``progress``, ``done``, ``failed``."""

STEP_HINTS: dict[str, str] = {
    "resolve hardware": "Pick a target the kernel picker lists, or configure this one.",
    "connect": "Check that `ssh <host>` works from the Jupyter server's machine.",
    "prepare host": "Check that the host has python3 (3.8 or newer) and a writable home.",
    "start kernel": "Look at the kernel's log in the agent's state directory on the host.",
    "find kernel": "The kernel is gone (the host rebooted or it was shut down): start a new one.",
    "connect channels": "Check the SSH server allows TCP forwarding (AllowTcpForwarding).",
}


@dataclass(frozen=True)
class StepRecord:
    """One finished step."""

    name: str
    seconds: float
    ok: bool


class LaunchError(Exception):
    """A launch failed; the message names the step, the time spent and what to try.

    Attributes:
        step: The step that failed.
        elapsed: Seconds since the launch began.
        reason: What went wrong.
        hint: What to try.
        status: The HTTP status that fits (404 unknown hardware, 409 cancelled,
            502 host unreachable, 504 timed out, a provider error's own
            ``http_status`` (422: a request its settings make impossible), 500
            otherwise).
    """

    def __init__(
        self, where: str, step: str, elapsed: float, reason: str, hint: str, status: int = 500
    ) -> None:
        self.where = where
        self.step = step
        self.elapsed = elapsed
        self.reason = reason.rstrip(". ")
        self.hint = hint
        self.status = status
        super().__init__(
            f"Launching a kernel on {where} failed at step '{step}' after {elapsed:.1f} s: "
            f"{self.reason}. {hint}".rstrip()
        )

    @property
    def user_error(self) -> bool:
        """Whether the user is to fix it (see :mod:`...errors`): unknown hardware, or a
        timeout, whose hint names the setting to raise, or their own cancelling; not
        when a step raised."""
        return self.status in (404, 409, 504) and self.__cause__ is None


def _classify(exc: BaseException, step: str) -> tuple[int, str]:
    """The HTTP status and hint for an exception raised inside ``step``."""
    hint = STEP_HINTS.get(step, "")
    if isinstance(exc, UnknownHardwareError):
        return 404, ""
    if isinstance(exc, HostKeyError | AuthenticationError):
        return 502, ""  # their messages already say what to run
    if isinstance(exc, TimeoutError | CommandTimeoutError):
        return 504, hint
    if isinstance(exc, TransportError) and step == "connect" and exc.destination:
        # The command as the user can paste it, for this host.
        return 502, hint.replace("<host>", exc.destination)
    if isinstance(exc, HostUnreachableError | TransportError | AgentUnavailableError):
        return 502, hint
    if isinstance(exc, AgentError) and exc.kind == "no_ipykernel":
        return 500, ""  # the agent says what to install
    status = getattr(exc, "http_status", None)
    if isinstance(status, int) and 400 <= status < 600:
        return status, ""  # a provider's own error, whose message says what to do
    return 500, hint


class LaunchSteps:
    """Times the steps of one launch and reports them to the log and to listeners.

    Args:
        where: The target's name, for messages.
        kernel_id: The kernel being launched.
        log: Where to log each step.
        listeners: Called with every event.
    """

    def __init__(
        self,
        where: str,
        kernel_id: str,
        log: logging.Logger,
        listeners: list[LaunchListener] | None = None,
    ) -> None:
        self.where = where
        #: How a person reads the target (``A10G 24 GiB · gpu-box``), once a machine for
        #: it is sought (see :meth:`for_target`); its messages say that, not its name.
        self.label: str | None = None
        self.kernel_id = kernel_id
        self.log = log
        self.listeners = list(listeners or [])
        self.records: list[StepRecord] = []
        self.notes: list[str] = []
        """What :meth:`note` reported, in order (e.g. the kernel's working directory)."""
        self.current: str | None = None
        self._began = time.monotonic()

    def for_target(self, target: Target) -> None:
        """Name the launch's target in its errors by its hardware and place."""
        self.label = target.label

    @property
    def _named(self) -> str:
        return self.label or self.where

    @property
    def elapsed(self) -> float:
        """Seconds since the launch began."""
        return time.monotonic() - self._began

    def _emit(self, step: str, state: str, seconds: float | None, detail: str = "") -> None:
        event = {
            "kernel_id": self.kernel_id,
            "target": self.where,
            "step": step,
            "state": state,
            "seconds": seconds,
            "detail": detail,
        }
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                self.log.exception("a launch listener failed on %s", event)

    def note(self, detail: str) -> None:
        """Report progress inside the current step (e.g. "uploading the agent")."""
        self.log.info("launch on %s: %s", self.where, detail)
        self.notes.append(detail)
        self._emit(self.current or "", "progress", None, detail)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Run the body as step ``name``; a failure becomes a :class:`LaunchError`."""
        self.current = name
        began = time.monotonic()
        self._emit(name, "started", None)
        try:
            yield
        except LaunchError:
            self._finish(name, began, ok=False)
            raise
        except Exception as exc:
            self._finish(name, began, ok=False, detail=str(exc))
            status, hint = _classify(exc, name)
            raise LaunchError(self._named, name, self.elapsed, str(exc), hint, status) from exc
        except BaseException:  # cancelled, e.g. by the launch timeout
            self._finish(name, began, ok=False, detail="cancelled")
            raise
        self._finish(name, began, ok=True)

    def _finish(self, name: str, began: float, *, ok: bool, detail: str = "") -> None:
        self.current = None
        seconds = time.monotonic() - began
        self.records.append(StepRecord(name, seconds, ok))
        self.log.log(
            logging.INFO if ok else logging.WARNING,
            "launch on %s: %s %s in %.2f s%s",
            self.where,
            name,
            "done" if ok else "failed",
            seconds,
            f": {detail}" if detail else "",
        )
        self._emit(name, "done" if ok else "failed", seconds, detail)

    def timed_out(self, limit: float, setting: str) -> LaunchError:
        """The error for a launch cut off by its time limit."""
        step = (
            self.records[-1].name
            if self.records and not self.records[-1].ok
            else (self.current or "launch")
        )
        return LaunchError(
            self._named,
            step,
            self.elapsed,
            f"timed out (the limit is {limit:g} s)",
            f"{STEP_HINTS.get(step, '')} Raise {setting} if the host is just slow.".strip(),
            status=504,
        )

    def cancelled(self, by: str) -> LaunchError:
        """The error for a launch cancelled by ``by`` (``the user``) while under way."""
        step = self.current or (self.records[-1].name if self.records else "launch")
        return LaunchError(
            self._named,
            step,
            self.elapsed,
            f"cancelled by {by}",
            "Nothing it started is left running; start the kernel again to retry.",
            status=409,
        )

    def summary(self) -> str:
        """The steps and their times on one line."""
        return " · ".join(f"{r.name} {r.seconds:.2f} s" for r in self.records)


__all__ = ["LaunchError", "LaunchListener", "LaunchSteps", "StepRecord"]
