"""What the subcommands of ``jupyter remote-hw`` share: the error they fail with,
money and durations as people read them, and the base of the classes that run them."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..machines.manager import MachineManager
from ..providers.aws import AWSProvider
from ..providers.launch_steps import LaunchSteps


class CLIError(Exception):
    """A command failed; the message says why and what to do (exit status 1)."""


def _money(value: float | None) -> str:
    """Dollars for people: ``$0.0042``, ``$1.01``, ``?`` when unknown."""
    if value is None:
        return "?"
    if value < 1:
        return "$" + (f"{value:.4f}".rstrip("0").rstrip(".") or "0")
    return f"${value:,.2f}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _ago(when: float | None, now: float) -> str:
    return "never" if when is None else f"{_duration(now - when)} ago"


class BaseCommands:
    """Subcommands over one machine manager, writing tables on ``out`` and progress on ``err``.

    Args:
        manager: The process's machine manager (providers, ledger).
        out: Where tables go.
        err: Where progress and questions go.
    """

    def __init__(self, manager: MachineManager, out: TextIO, err: TextIO) -> None:
        self.manager = manager
        self.out = out
        self.err = err

    @property
    def aws(self) -> AWSProvider:
        provider = self.manager.providers["aws"]
        assert isinstance(provider, AWSProvider)
        return provider

    def _confirm(self, question: str, yes: bool) -> bool:
        """Whether the user says yes to ``question`` (``yes``: without asking)."""
        if yes:
            return True
        if not sys.stdin.isatty():
            raise CLIError(f"{question} Pass --yes to confirm when not at a terminal.")
        self.err.write(f"{question} [y/N] ")
        self.err.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    def _print(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def _note(self, text: str) -> None:
        """Say on stderr, at once, what a command is waiting for."""
        self.err.write(text + "\n")
        self.err.flush()

    def _show_step(self, event: dict[str, Any], began: float) -> None:
        """Say on stderr a launch step's event (see :class:`.LaunchSteps`), timed from
        ``began`` (a :func:`time.monotonic` time)."""
        at = f"[{time.monotonic() - began:6.1f} s]"
        seconds = float(event.get("seconds") or 0.0)
        if event["state"] == "done":
            self.err.write(f"{at} ✓ {event['step']} ({seconds:.1f} s)\n")
        elif event["state"] == "failed":
            self.err.write(f"{at} ✗ {event['step']} failed after {seconds:.1f} s\n")
        elif event["state"] == "progress" and event.get("detail"):
            self.err.write(f"{at}     {event['detail']}\n")
        elif event["state"] == "started":
            self.err.write(f"{at} … {event['step']}\n")
        self.err.flush()

    def _steps(self, name: str) -> LaunchSteps:
        began = time.monotonic()
        return LaunchSteps(
            name, "-", self.manager.log, [lambda event: self._show_step(event, began)]
        )
