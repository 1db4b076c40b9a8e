"""Errors of hibernation; each says what failed and what was kept."""

from __future__ import annotations

from typing import Any

from ..errors import UserError


class HibernationError(Exception):
    """Saving or restoring a kernel's state failed.

    Attributes:
        step: The step that failed (``reading variables``, ``writing``, ...), or None.
    """

    def __init__(self, message: str, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


class SaveError(HibernationError):
    """Saving failed: nothing was stored, and the kernel runs on as it was."""


class UnsavableStateError(SaveError, UserError):
    """The ``refuse`` policy met variables or modules that cannot be saved.

    Attributes:
        left_out: ``{"name", "type" or "module", "reason"}`` of each.
    """

    def __init__(self, message: str, left_out: list[dict[str, Any]]) -> None:
        super().__init__(message, "checking what can be saved")
        self.left_out = left_out


class StoreFullError(SaveError, UserError):
    """A save would take the store beyond its cap (or the disk beyond its room).

    Attributes:
        needed: Bytes the new entry takes.
        used: Bytes the other entries take now.
        limit: The cap in bytes (or the bytes free on the disk).
    """

    def __init__(self, message: str, needed: int, used: int, limit: int) -> None:
        super().__init__(message, "checking room")
        self.needed = needed
        self.used = used
        self.limit = limit


class EntryNotFoundError(HibernationError, UserError, KeyError):
    """No saved state under that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CorruptEntryError(HibernationError):
    """A saved entry cannot be read as it was written (a part is missing, cut short or
    changed; the manifest does not load or comes from a newer version)."""


class RestoreError(HibernationError):
    """Restoring failed; the saved state is intact, and the restore can be tried again."""
