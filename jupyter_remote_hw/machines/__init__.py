"""The user's machines as the server, the kernels and the command line see them: the
manager of providers and held machines, the one view of machines and kernels, and the
hardware listing the pickers show."""

from .manager import MachineManager, server_config

__all__ = ["MachineManager", "server_config"]
