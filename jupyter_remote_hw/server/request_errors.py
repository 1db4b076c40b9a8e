"""The error of a hardware request that cannot be done, as the REST API reports it."""

from __future__ import annotations

from typing import Any

from .user_errors import commands_in


class HardwareRequestError(Exception):
    """A request that cannot be done; the message says why and what to do.

    Attributes:
        status: The HTTP status that fits (400 bad field, 404 unknown, 409
            not possible now, 5xx launch failures).
        field: The request field at fault, when one is.
        step: The launch step that failed, for launch failures.
        hint: What to try, for launch failures.
        host_key: For a host whose key is not trusted: its destination, real host
            and port, and the key's fingerprint (see :func:`.user_errors.host_key_details`).
        detail: The OS's own text of the failure, where the message says it in plain
            words (the front end shows it behind a "details" toggle).
    """

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        step: str | None = None,
        hint: str | None = None,
        host_key: dict[str, Any] | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.step = step
        self.hint = hint
        self.host_key = host_key
        self.detail = detail

    def to_json(self) -> dict[str, Any]:
        """The error as the REST API sends it, with the commands its text quotes."""
        body: dict[str, Any] = {"message": str(self)}
        for key in ("field", "step", "hint", "host_key", "detail"):
            if getattr(self, key):
                body[key] = getattr(self, key)
        body["commands"] = commands_in(str(self), self.hint)
        return body


__all__ = ["HardwareRequestError"]
