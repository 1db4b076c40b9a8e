"""SSH transport: one verified, self-healing asyncssh connection per host.

The layers above ask :class:`TransportManager` for a host's
:class:`SSHConnection`, run commands on it and open :class:`LocalForward`
ports whose local port survives reconnects.
"""

from .channels import CommandResult
from .connection import SSHConnection
from .errors import (
    AuthenticationError,
    CommandTimeoutError,
    ConnectionFailedError,
    HostKeyError,
    HostUnreachableError,
    TransportError,
)
from .forward import LocalForward
from .manager import TransportManager
from .settings import TransportSettings
from .state import ConnectionState, StateChange, StateListener

__all__ = [
    "AuthenticationError",
    "CommandResult",
    "CommandTimeoutError",
    "ConnectionFailedError",
    "ConnectionState",
    "HostKeyError",
    "HostUnreachableError",
    "LocalForward",
    "SSHConnection",
    "StateChange",
    "StateListener",
    "TransportError",
    "TransportManager",
    "TransportSettings",
]
