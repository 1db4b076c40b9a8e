"""Connection states and the events that report changes between them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class ConnectionState(StrEnum):
    """Where an SSH connection stands."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    CLOSED = "closed"

    @property
    def is_final(self) -> bool:
        """Whether the connection will never become usable again."""
        return self in (ConnectionState.FAILED, ConnectionState.CLOSED)


@dataclass(frozen=True)
class StateChange:
    """One change of a connection's state.

    Attributes:
        destination: The host, as named by the caller.
        state: The new state.
        reason: Why, for ``reconnecting`` and ``failed``; None otherwise.
        timestamp: When the change happened (seconds since the epoch).
    """

    destination: str
    state: ConnectionState
    reason: str | None = None
    timestamp: float = field(default_factory=time.time)


StateListener = Callable[[StateChange], None]
