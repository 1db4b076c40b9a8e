"""Errors about hardware targets."""

from __future__ import annotations

from ..errors import UserError


class UnknownHardwareError(UserError, LookupError):
    """No configured target has the requested name.

    Attributes:
        name: The requested target.
        known: The names that are configured.
    """

    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"unknown hardware {name!r}: the configured targets are {listed}. Add it to "
            "c.SSHProvider.hosts (or to ~/.ssh/config), or pick one of those."
        )
        self.name = name
        self.known = known
