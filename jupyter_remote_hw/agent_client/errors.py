"""Errors from talking to a host agent."""

from __future__ import annotations

from ..errors import UserError

#: Agent error kinds that are the host's setup, not a bug (the message says what to install).
EXPECTED_AGENT_KINDS = frozenset({"no_ipykernel"})


class AgentError(Exception):
    """The agent answered a request with an error.

    Attributes:
        kind: The agent's short machine code (``no_ipykernel``,
            ``unknown_kernel``, ``kernel_died``, ``bad_request`` ...).
        where: The host the agent runs on.
    """

    def __init__(self, where: str, kind: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.kind = kind

    @property
    def user_error(self) -> bool:
        """Whether the host's setup is at fault, not a bug (see :mod:`...errors`)."""
        return self.kind in EXPECTED_AGENT_KINDS


class AgentUnavailableError(UserError):
    """No agent could be started or reached on a host; the message says which step failed."""
