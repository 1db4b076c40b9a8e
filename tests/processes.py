"""Processes on this machine found by their command line (test hosts run here too)."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def processes_under(marker: str) -> list[str]:
    """``"<pid>: <command line>"`` of every live process (but this one) mentioning ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def kill_processes_mentioning(marker: str) -> None:
    """SIGKILL every process whose command line mentions ``marker`` (agents, kernels).

    A safety net for tests that fail half-way; tests that check cleanup look
    for leftovers themselves before this runs.
    """
    for line in processes_under(marker):
        with contextlib.suppress(OSError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
