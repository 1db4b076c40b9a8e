"""Why a provider's hardware cannot be used now, in words, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unusable:
    """A reason hardware cannot be used now, for people.

    Attributes:
        reason: What is wrong, in a few words (``no credentials``).
        hint: What to do (``set AWS_PROFILE or run `aws configure```); commands in backticks.
        commands: The commands the hint names, for a copy button.
    """

    reason: str
    hint: str
    commands: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """``reason — hint``: the one line a picker or the command line shows."""
        return f"{self.reason} — {self.hint}"


__all__ = ["Unusable"]
