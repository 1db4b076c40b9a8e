"""Errors from talking to a host agent."""

from __future__ import annotations


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


class AgentUnavailableError(Exception):
    """No agent could be started or reached on a host; the message says which step failed."""
