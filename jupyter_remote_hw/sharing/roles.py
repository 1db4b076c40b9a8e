"""Share roles, the kernel channels each one reaches, and share lifetimes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import UserError
from ..providers.base import PORT_NAMES
from ..validation import quote

if TYPE_CHECKING:
    from ..ledger.records import ShareRecord

VIEWER = "viewer"
"""Watches the kernel's outputs as they happen; runs nothing."""
COLLABORATOR = "collaborator"
"""Runs code on the kernel, as the owner does."""

ROLE_CHANNELS: dict[str, tuple[str, ...]] = {
    VIEWER: ("iopub_port",),
    COLLABORATOR: PORT_NAMES,
}
"""The kernel channels (connection-file port names) a role may reach."""


def runs_code(role: str) -> bool:
    """Whether a share of ``role`` lets its holder run code in the kernel."""
    return "shell_port" in ROLE_CHANNELS.get(role, ())


def kernels_run_by_others(shares: Iterable[ShareRecord]) -> set[str]:
    """The ids of the kernels that ``shares`` (ended ones too: what was run stays run)
    let someone else run code in."""
    return {share.kernel_id for share in shares if runs_code(share.role)}


CHANNEL_PURPOSE: dict[str, str] = {
    "shell_port": "requests: execute, complete, inspect (signed with the kernel's key)",
    "iopub_port": "outputs, as the kernel publishes them",
    "stdin_port": "input() prompts",
    "control_port": "interrupt and debug requests",
    "hb_port": "heartbeat",
}
"""What each shared channel is, as said in share files."""

DEFAULT_EXPIRES = "8h"
"""How long a share lasts when nobody says."""
MAX_EXPIRES = 365 * 86400
"""The longest a share may last, in seconds."""

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")


INVALID = "invalid"
"""ShareError kind: bad input (a key, role, duration or share file)."""
UNKNOWN = "unknown"
"""ShareError kind: no such kernel, machine or share."""
REFUSED = "refused"
"""ShareError kind: not possible now (kernel not running, key refused, share expired)."""
UNREACHABLE = "unreachable"
"""ShareError kind: the host cannot be reached."""


class ShareError(UserError):
    """A share cannot be made, read, joined or revoked; the message says why and what to do.

    Attributes:
        kind: What went wrong: :data:`INVALID`, :data:`UNKNOWN`, :data:`REFUSED`
            or :data:`UNREACHABLE`.
        field: The share file's field at fault, when one is.
    """

    def __init__(self, message: str, kind: str = INVALID, field: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field


def check_role(role: str) -> str:
    """Return ``role`` if it is a known role.

    Raises:
        ShareError: It is not.
    """
    if role not in ROLE_CHANNELS:
        raise ShareError(f"unknown role {role!r}: use {VIEWER} or {COLLABORATOR}")
    return role


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``8h``, ``30m``, ``2d`` or ``1h30m``.

    Raises:
        ShareError: Not a positive duration in those units, or longer than
            :data:`MAX_EXPIRES`.
    """
    spec = text.strip().lower()
    pos, seconds = 0, 0.0
    for match in _DURATION.finditer(spec):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not spec or pos != len(spec) or seconds <= 0:
        raise ShareError(
            f"expiry {quote(text)} is not a duration: write it like 30m, 8h, 2d or 1h30m"
        )
    if seconds > MAX_EXPIRES:
        raise ShareError(
            f"expiry {quote(text)} is longer than {MAX_EXPIRES // 86400} days: "
            "share for less, and share again when it ends"
        )
    return seconds
