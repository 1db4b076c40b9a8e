"""The kernel spec manager's import path of earlier releases, for configuration that
names it (``c.ServerApp.kernel_spec_manager_class =
"jupyter_remote_hw.kernelspecs.RemoteHWKernelSpecManager"``); it lives in
:mod:`.provisioner.kernelspecs`."""

from .provisioner.kernelspecs import RemoteHWKernelSpecManager, target_kernel_spec

__all__ = ["RemoteHWKernelSpecManager", "target_kernel_spec"]
