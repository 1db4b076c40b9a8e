"""Hibernating kernels left idle: every few seconds, each kernel on hardware that has
been idle (no cell running, no message) past its hibernate time is hibernated, as
``POST /jupyter-remote-hw/api/hibernate/<kernel id>`` would.

How long is idle is the kernel's notebook's time when it set one, else its target's
(``c.AWSProvider.hibernate_after``, a SLURM cluster's ``hibernate_after``...; see
:mod:`.times`).
A kernel that cannot hibernate now (the policy refuses what it holds, the store is
full) is told so once, on the event socket and in the log, and tried again only after
it was used again.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from ...errors import log_failure
from ...machines.manager import MachineManager
from ...provisioner import RemoteHWProvisioner
from ..hardware_actions import HardwareRequestError
from .actions import HibernationActions
from .times import hibernate_after_of

#: Seconds after a failed attempt during which the kernel's activity is the attempt's.
SETTLE = 2.0


def _settled() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=SETTLE)


class IdleHibernation:
    """Hibernates the server's kernels that were idle past their time (their notebook's,
    else their target's).

    Args:
        actions: The hibernation actions (the same as the REST API's).
        machines: The machine manager (its providers say each target's time).
        kernel_manager: The server's kernel manager.
        log: Where to log.
        policy: ``partial`` or ``refuse`` (see :func:`...hibernation.save`).
    """

    def __init__(
        self,
        actions: HibernationActions,
        machines: MachineManager,
        kernel_manager: Any,
        log: logging.Logger,
        policy: str = "partial",
    ) -> None:
        self.actions = actions
        self.machines = machines
        self.kernel_manager = kernel_manager
        self.log = log
        self.policy = policy
        #: Kernels that could not hibernate, by id: activity up to this time is not use
        #: (the attempt's own messages come in just after it).
        self._refused: dict[str, datetime.datetime] = {}

    def idle_after(self, provisioner: RemoteHWProvisioner) -> float:
        """Seconds of idleness after which the kernel hibernates (0: never): its
        notebook's time when it set one, else its target's."""
        return hibernate_after_of(provisioner, self.machines.providers)["seconds"]

    def due(self, now: datetime.datetime | None = None) -> list[str]:
        """The kernels to hibernate now."""
        now = now or datetime.datetime.now(datetime.UTC)
        found = []
        for kernel_id in list(self.kernel_manager.list_kernel_ids()):
            kernel = self.kernel_manager.get_kernel(kernel_id)
            provisioner = getattr(kernel, "provisioner", None)
            if not isinstance(provisioner, RemoteHWProvisioner):
                continue
            if provisioner.hibernation.hibernated or provisioner.hibernation.waking:
                continue
            if getattr(kernel, "execution_state", None) != "idle":
                continue
            last = getattr(kernel, "last_activity", None)
            if not isinstance(last, datetime.datetime):
                continue
            refused = self._refused.get(kernel_id)
            if refused is not None and last <= refused:
                continue  # not used since it could not hibernate
            after = self.idle_after(provisioner)
            if after > 0 and (now - last).total_seconds() >= after:
                found.append(kernel_id)
        return found

    async def check(self) -> list[str]:
        """Hibernate every kernel that is due; the ids hibernated. Never raises."""
        hibernated = []
        self._refused = {k: v for k, v in self._refused.items() if k in self.kernel_manager}
        for kernel_id in self.due():
            kernel = self.kernel_manager.get_kernel(kernel_id)
            last = kernel.last_activity
            self.log.info(
                "kernel %s: idle since %s, past its hibernate time: hibernating",
                kernel_id,
                last.isoformat(timespec="seconds"),
            )
            try:
                await self.actions.hibernate(kernel_id, self.policy)
            except HardwareRequestError as exc:
                # Said on the event socket by the actions; here once, and not again
                # until the kernel is used (the attempt's own messages do not count).
                self._refused[kernel_id] = _settled()
                self.log.warning("kernel %s: stays awake: %s", kernel_id, exc)
            except Exception as exc:  # noqa: BLE001 (a bug: its traceback; the timer goes on)
                self._refused[kernel_id] = _settled()
                log_failure(self.log, exc, f"kernel {kernel_id}: hibernating failed")
            else:
                hibernated.append(kernel_id)
        return hibernated


__all__ = ["IdleHibernation"]
