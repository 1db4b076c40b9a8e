"""Processes of this machine, as seen from outside them.

The host agent keeps its own copy (``agent/``): it runs standalone, without this package.
"""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["process_alive"]
