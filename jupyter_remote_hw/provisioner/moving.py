"""A hibernated kernel woken on another target: the kernel keeps its id, ports and key,
and its target (the provisioner's, and the kernelspec its kernel manager names, which
Jupyter lists and the machines listing reads) becomes the new one, as after a
hardware switch. It has no process while it hibernates, so nothing else moves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jupyter_client.manager import KernelManager

from ..providers import Target

if TYPE_CHECKING:
    from .provisioner import RemoteHWProvisioner


class MoveError(Exception):
    """The kernel cannot wake on that target (the message says why); nothing changed."""


def check_wake_target(provisioner: RemoteHWProvisioner, name: str) -> Target:
    """The target called ``name``, where a hibernated kernel can wake.

    Raises:
        UnknownHardwareError: No target has that name.
        MoveError: Its kernels have no relay to keep the kernel's ports (this machine).
    """
    target = provisioner.manager.target(name)
    if target.provider == "local":  # its kernels' ports are their own (no relay)
        raise MoveError(
            f"kernel {provisioner.kernel_id} cannot wake on {target.name} ({target.where}): "
            "kernels there have no relay to keep its ports; pick another target, or wake it "
            "and switch its hardware"
        )
    return target


def set_target(provisioner: RemoteHWProvisioner, name: str) -> str:
    """Make ``name`` the target of a provisioner's kernel; returns the target it had.

    Its kernel manager's kernel name becomes the new target's kernelspec, so that
    Jupyter's kernel listing and the machines listing show it there.
    """
    previous = provisioner.target
    provisioner.target = name
    target = provisioner._target()
    manager = provisioner.parent
    if isinstance(manager, KernelManager) and manager.kernel_name != target.kernel_name:
        manager.kernel_name = target.kernel_name
    return previous


__all__ = ["MoveError", "check_wake_target", "set_target"]
