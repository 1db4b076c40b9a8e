"""The ``ssh`` provider: hosts from ``~/.ssh/config`` and ``c.SSHProvider.hosts``, each
reached over one SSH connection, the agent started there over it."""

from .config import host_aliases
from .provider import DEFAULT_HARDWARE, SSHMachine, SSHProvider

__all__ = ["DEFAULT_HARDWARE", "SSHMachine", "SSHProvider", "host_aliases"]
