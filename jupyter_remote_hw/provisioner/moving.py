"""A hibernated kernel woken on another target: the kernel keeps its id, ports and key,
and its target becomes the new one, as after a hardware switch: the machine the
provisioner runs it on (its place: the target's machine, or on a scheduler an
allocation of its own) and the kernelspec its kernel manager names, which Jupyter
lists and the machines listing reads. It has no process while it hibernates, so
nothing else moves.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_client.manager import KernelManager

from ..providers import KERNEL_NAME_PREFIX, Target
from .kernel_context import KernelContext


class MoveError(Exception):
    """The kernel cannot wake on that target (the message says why); nothing changed."""


@dataclass(frozen=True)
class Place:
    """Where a kernel was, to put it back there when a wake elsewhere fails."""

    target: Target
    """The provisioner's target."""
    placement: str | None
    """The machine manager's placement of the kernel."""
    kernel_name: str | None
    """Its kernel manager's kernelspec name (None: it has no kernel manager)."""


def _kernel_manager(provisioner: KernelContext) -> KernelManager | None:
    manager = provisioner.parent
    return manager if isinstance(manager, KernelManager) else None


def is_on(provisioner: KernelContext, name: str) -> bool:
    """Whether the kernel is on target ``name`` already: its machine's, or the target its
    kernelspec names (a scheduler's kernel runs in an allocation of that target)."""
    manager = _kernel_manager(provisioner)
    kernel_name = manager.kernel_name if manager is not None else ""
    return name == provisioner.target or kernel_name.lower() == KERNEL_NAME_PREFIX + name.lower()


def check_wake_target(provisioner: KernelContext, name: str) -> Target:
    """The target called ``name``, where a hibernated kernel can wake (any target: each
    machine, this one included, keeps a kernel's ports with its relay).

    Raises:
        UnknownHardwareError: No target has that name.
    """
    return provisioner.manager.target(name)


def move(provisioner: KernelContext, target: Target) -> Place:
    """Make ``target`` the kernel's: it is placed there (see
    :meth:`..machines.manager.MachineManager.place`) and its kernel manager's kernel
    name becomes that target's kernelspec.

    Returns:
        Where it was, for :func:`move_back`.
    """
    machines, kernel_id = provisioner.manager, provisioner.kernel_id
    manager = _kernel_manager(provisioner)
    was = Place(
        provisioner.resolved_target(),
        machines.placements.get(kernel_id),
        manager.kernel_name if manager is not None else None,
    )
    provisioner.place_on(machines.place(kernel_id, target))
    if manager is not None:
        manager.kernel_name = target.kernel_name
    return was


def move_back(provisioner: KernelContext, place: Place) -> None:
    """Put the kernel back where it was before :func:`move`."""
    machines, kernel_id = provisioner.manager, provisioner.kernel_id
    provisioner.place_on(place.target)
    if place.placement is None:
        machines.unplace(kernel_id)
    else:
        machines.placements.put(kernel_id, place.placement)
    manager = _kernel_manager(provisioner)
    if manager is not None and place.kernel_name is not None:
        manager.kernel_name = place.kernel_name


__all__ = ["MoveError", "Place", "check_wake_target", "is_on", "move", "move_back"]
