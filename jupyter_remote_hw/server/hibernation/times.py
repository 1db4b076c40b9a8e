"""How long each kernel may stay idle before it hibernates, and who said so.

A kernel's time is its notebook's when the notebook set one (``PUT
/jupyter-remote-hw/api/hibernate-after/<kernel id>``, kept on the provisioner and in
the ledger), else its target's ``hibernate_after`` (see
:meth:`...providers.base.Provider.hibernate_after_for`). The hibernation timer
(:mod:`.timer`) and the machines listing read it here, so they agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from ...provisioner import RemoteHWProvisioner

#: The longest time a notebook may ask for: 7 days, in seconds.
MAX_HIBERNATE_AFTER = 7 * 24 * 3600

#: Who set a kernel's time: its target's configuration, or its notebook.
Source = Literal["target", "notebook"]


class HibernateAfter(TypedDict):
    """A kernel's hibernate time as the machines listing says it."""

    seconds: float
    """Seconds idle before it hibernates; 0: never."""
    source: Source
    """``notebook`` when its notebook set it, else ``target``."""


def target_hibernate_after(provisioner: RemoteHWProvisioner, providers: Mapping[str, Any]) -> float:
    """The time of the kernel's target (0: never, also for a target no longer offered)."""
    try:
        target = provisioner.resolved_target()  # resolved once per kernel, not every round
    except Exception:  # noqa: BLE001 (a target no longer offered: leave the kernel be)
        return 0.0
    provider = providers.get(target.provider)
    return float(provider.hibernate_after_for(target)) if provider is not None else 0.0


def hibernate_after_of(
    provisioner: RemoteHWProvisioner, providers: Mapping[str, Any]
) -> HibernateAfter:
    """The kernel's hibernate time: its notebook's when set, else its target's.

    Args:
        provisioner: The kernel's provisioner.
        providers: The machine manager's providers, by name.
    """
    if provisioner.hibernate_after is not None:
        return {"seconds": provisioner.hibernate_after, "source": "notebook"}
    return {"seconds": target_hibernate_after(provisioner, providers), "source": "target"}


def kernel_hibernate_after(kernel: Any, providers: Mapping[str, Any]) -> dict[str, Any] | None:
    """The hibernate time of one of the server's kernels (its kernel manager), or None for
    a kernel not on remote hardware."""
    provisioner = getattr(kernel, "provisioner", None)
    if not isinstance(provisioner, RemoteHWProvisioner):
        return None
    return dict(hibernate_after_of(provisioner, providers))


__all__ = [
    "MAX_HIBERNATE_AFTER",
    "HibernateAfter",
    "Source",
    "hibernate_after_of",
    "kernel_hibernate_after",
    "target_hibernate_after",
]
