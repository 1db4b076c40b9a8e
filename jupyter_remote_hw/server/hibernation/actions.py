"""Hibernating a kernel and waking it, from the REST API: free of HTTP.

The handlers in :mod:`..handlers` call these; a :class:`..hardware_actions.HardwareRequestError`
carries the HTTP status of what cannot be done. The work is the provisioner's
(:mod:`...provisioner.hibernating`); this says it in the API's words and publishes
``hibernation`` events (the save's steps and bytes) and ``machine`` events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

from ...hibernation import (
    POLICIES,
    Policy,
    RestoreError,
    SaveError,
    SaveSummary,
    StoreFullError,
    UnsavableStateError,
)
from ...providers import UnknownHardwareError
from ...provisioner import RemoteHWProvisioner
from ...provisioner.hibernating import HibernationStateError, WakeError
from ...provisioner.moving import MoveError
from ...provisioner.operations import OperationConflictError
from ..hardware_actions import HardwareActions, HardwareRequestError

#: Seconds between two ``hibernation`` progress events of one kernel.
EVENT_EVERY = 0.5


@dataclass
class HibernationActions:
    """Hibernate and wake the server's kernels.

    Args:
        hardware: The hardware actions (the server's managers, events, machine models).
    """

    hardware: HardwareActions

    def provisioner(self, kernel_id: str) -> RemoteHWProvisioner:
        """The provisioner of one of the server's kernels on hardware.

        Raises:
            HardwareRequestError: 404 for no such kernel, 409 for a kernel that
                jupyter-remote-hw did not start.
        """
        kernel_manager = self.hardware.kernel_manager
        if kernel_id not in kernel_manager:
            raise HardwareRequestError(404, f"no kernel {kernel_id} on this server", "kernel_id")
        provisioner = getattr(kernel_manager.get_kernel(kernel_id), "provisioner", None)
        if not isinstance(provisioner, RemoteHWProvisioner):
            raise HardwareRequestError(
                409,
                f"the kernel ({kernel_manager.get_kernel(kernel_id).kernel_name}) does not "
                "run on remote hardware: only kernels started on a hardware target can "
                "hibernate",
                "kernel_id",
            )
        return provisioner

    def _publish(self, kernel_id: str, state: str, **fields: Any) -> None:
        self.hardware.events.publish("hibernation", kernel_id=kernel_id, state=state, **fields)

    async def hibernate(self, kernel_id: str, policy: Any = None) -> dict[str, Any]:
        """Save a kernel's state and release its hardware; the kernel keeps its id.

        Args:
            kernel_id: The kernel.
            policy: ``partial`` (default: save what can be saved, list the rest) or
                ``refuse`` (save nothing when anything cannot be saved).

        Returns:
            ``{"kernel_id", "hibernated": True, "saved", "modules", "left_out", "bytes",
            "kept_on", "seconds"}`` (``kept_on``: where the state is kept when not on the
            server's disk, else None).

        Raises:
            HardwareRequestError: 404, 409 (cannot now, or ``refuse`` and something
                cannot be saved, or the store is full: the kernel runs on), 502 (the
                save failed: the kernel runs on as it was).
        """
        if policy is not None and policy not in POLICIES:
            raise HardwareRequestError(
                400, f"policy must be one of {', '.join(POLICIES)}", "policy"
            )
        provisioner = self.provisioner(kernel_id)
        last: dict[str, Any] = {"at": 0.0, "step": ""}

        def progress(step: str, done: int, total: int) -> None:
            now = time.monotonic()
            if step == last["step"] and now - float(last["at"]) < EVENT_EVERY and done < total:
                return
            last.update(at=now, step=step)
            self._publish(kernel_id, "saving", step=step, done=done, total=total)

        self._publish(kernel_id, "saving", step="starting", done=0, total=0)
        try:
            summary = await provisioner.hibernate(cast(Policy, policy or "partial"), progress)
        except (
            HibernationStateError,
            OperationConflictError,
            UnsavableStateError,
            StoreFullError,
        ) as exc:
            self._publish(kernel_id, "failed", detail=str(exc))
            raise HardwareRequestError(409, str(exc)) from exc
        except SaveError as exc:
            self._publish(kernel_id, "failed", detail=str(exc))
            raise HardwareRequestError(502, str(exc)) from exc
        answer = _saved(kernel_id, summary)
        self._publish(
            kernel_id,
            "hibernated",
            bytes=answer["bytes"],
            kept_on=answer["kept_on"],
            left_out=answer["left_out"],
        )
        self.hardware._publish_machine(provisioner.target)
        return answer

    async def wake(self, kernel_id: str, target: Any = None) -> dict[str, Any]:
        """Bring a hibernated kernel back on its target, or on ``target`` (which then
        becomes its target, as after a hardware switch); its launch steps are ``launch``
        events. A kernel that is not hibernated is left as it is.

        Returns:
            ``{"kernel_id", "woken", "target", "assigned", "imported", "left_out", "bytes",
            "seconds", "notes"}`` (``woken`` false when it was not hibernated; ``left_out``:
            ``{"name", "reason"}`` of each variable not restored, what the save left out and
            what the restricted loader refused).

        Raises:
            HardwareRequestError: 400 or 404 for a bad or unknown ``target``, 404, 409
                (cannot wake there, or not now), 502 (the wake failed: the kernel still
                hibernates on its target with its state intact; try again).
        """
        provisioner = self.provisioner(kernel_id)
        name = self.hardware.target(target, "target").name if target is not None else None
        before = provisioner.target
        try:
            summary = await provisioner.wake(target=name)
        except (HibernationStateError, MoveError) as exc:
            raise HardwareRequestError(409, str(exc), "target") from exc
        except OperationConflictError as exc:
            raise HardwareRequestError(409, str(exc)) from exc
        except UnknownHardwareError as exc:  # gone since it was looked up
            raise HardwareRequestError(404, str(exc), "target") from exc
        except (WakeError, RestoreError) as exc:
            raise HardwareRequestError(502, str(exc)) from exc
        if provisioner.target != before:
            self.hardware._publish_machine(before)
        self.hardware._publish_machine(provisioner.target)
        if summary is None:
            return {"kernel_id": kernel_id, "woken": False, "target": provisioner.target}
        return {
            "kernel_id": kernel_id,
            "woken": True,
            "target": provisioner.target,
            "assigned": [v["name"] for v in summary.assigned],
            "imported": [m["module"] for m in summary.imported],
            "left_out": list(summary.left_out),
            "bytes": summary.total_bytes,
            "seconds": round(summary.seconds, 3),
            "notes": list(summary.notes),
        }


def _saved(kernel_id: str, summary: SaveSummary) -> dict[str, Any]:
    return {
        "kernel_id": kernel_id,
        "hibernated": True,
        "saved": summary.saved,
        "modules": summary.modules,
        "left_out": summary.left_out,
        "bytes": summary.entry.nbytes,
        "kept_on": (summary.entry.far or {}).get("label"),
        "seconds": round(summary.seconds, 3),
    }


__all__ = ["HibernationActions"]
