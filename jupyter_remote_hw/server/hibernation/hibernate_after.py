"""A notebook's own hibernate time for its kernel, from the REST API: free of HTTP.

``PUT /jupyter-remote-hw/api/hibernate-after/<kernel id>`` with ``{"seconds": N}``
sets how long the kernel may stay idle before it hibernates (0: never), over its
target's ``hibernate_after``; ``{"seconds": null}`` gives it its target's time back.
The time is kept on the kernel's provisioner, so it holds across a hibernation and a
wake, and in the kernel's ledger row, so a later server that takes the kernel over
keeps it. JupyterLab sends it from the notebook's metadata (``remote_hw.hibernate_after``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..hardware_actions import HardwareRequestError
from .actions import HibernationActions
from .times import MAX_HIBERNATE_AFTER, hibernate_after_of, target_hibernate_after


@dataclass
class HibernateAfterActions:
    """Set a kernel's hibernate time.

    Args:
        hibernation: The hibernation actions (they find a kernel's provisioner).
    """

    hibernation: HibernationActions

    def set(self, kernel_id: str, seconds: Any) -> dict[str, Any]:
        """Set how long the kernel may stay idle before it hibernates.

        Args:
            kernel_id: The kernel.
            seconds: Seconds (0: never), or None for its target's time.

        Returns:
            ``{"kernel_id", "hibernate_after": {"seconds", "source"}, "target_seconds"}``:
            the time that applies now and whose it is, and the target's own.

        Raises:
            HardwareRequestError: 400 (``seconds`` is not a number of seconds from 0 to 7
                days), 404 (no such kernel), 409 (a kernel not started on a target).
        """
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or not 0 <= seconds <= MAX_HIBERNATE_AFTER
        ):
            raise HardwareRequestError(
                400,
                f"seconds must be a number of seconds from 0 (never) to {MAX_HIBERNATE_AFTER} "
                "(7 days), or null for the target's time",
                "seconds",
            )
        provisioner = self.hibernation.provisioner(kernel_id)
        hardware = self.hibernation.hardware
        providers = hardware.machines.providers
        provisioner.hibernate_after = None if seconds is None else float(seconds)
        ledger = hardware.machines.ledger
        record = ledger.get_kernel(kernel_id)
        if record is not None:  # a later server that takes the kernel over keeps it
            info = {**record.info, "hibernate_after": provisioner.hibernate_after}
            ledger.put_kernel(kernel_id, record.kernel_name, record.target, info, record.owner)
        hardware._publish_machine(provisioner.target)
        return {
            "kernel_id": kernel_id,
            "hibernate_after": hibernate_after_of(provisioner, providers),
            "target_seconds": target_hibernate_after(provisioner, providers),
        }


__all__ = ["HibernateAfterActions"]
