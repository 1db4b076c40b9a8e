"""Where machines come from: ``local`` (this machine) and ``ssh`` (any SSH host)."""

from .base import Machine, Provider
from .errors import UnknownHardwareError
from .local import LocalProvider
from .ssh.provider import SSHProvider
from .target import KERNEL_NAME_PREFIX, Target

__all__ = [
    "KERNEL_NAME_PREFIX",
    "LocalProvider",
    "Machine",
    "Provider",
    "SSHProvider",
    "Target",
    "UnknownHardwareError",
]
