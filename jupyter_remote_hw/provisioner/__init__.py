"""The jupyter_client kernel provisioner for hardware targets (entry point ``remote-hw``)."""

from .errors import KernelLaunchError
from .provisioner import RemoteHWProvisioner

__all__ = ["KernelLaunchError", "RemoteHWProvisioner"]
