"""Switching a notebook's kernel to other hardware: what could be carried, and the
switch itself (a mixin of :class:`..hardware_actions.HardwareActions`)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from ...provisioner import RemoteHWProvisioner
from ...provisioner.operations import SWITCH, KernelOperations, OperationConflictError
from ...transfer import TransferError
from ...transfer.variables import ranks_phrase
from ..request_errors import HardwareRequestError
from .carry import CARRY_ALL, CarryError, carry, kernel_namespace, mark_missing_modules

if TYPE_CHECKING:
    from ...machines.manager import MachineManager
    from ...providers import Target
    from ..hardware_events import EventHub


class SwitchingHost(Protocol):
    """What the switching actions use of the class that mixes them in."""

    machines: MachineManager
    kernel_manager: Any
    session_manager: Any
    events: EventHub

    def target(self, name: Any, field: str = "hardware") -> Target:
        """The target called ``name`` (a 400 or 404 naming ``field`` otherwise)."""

    async def session(self, session_id: str) -> dict[str, Any]:
        """The session's model (a 404 otherwise)."""

    async def start_kernel(self, name: Any, path: Any = None) -> str:
        """Start a kernel on target ``name``; its id."""


class SessionSwitching:
    """The switching actions, mixed into :class:`..hardware_actions.HardwareActions`,
    whose managers and target, session and kernel-start actions they use."""

    async def kernel_variables(
        self: SwitchingHost, kernel_id: str, hardware: Any = None
    ) -> dict[str, Any]:
        """What a switch could carry from a kernel, for the carry dialog: its
        ``variables`` (name, type, nbytes, whether carriable and why not) and the
        ``modules`` bound to names (re-imported in the new kernel). With the
        ``hardware`` switched to, when its machine is open, each module also says
        whether it is installed there.

        Raises:
            HardwareRequestError: 400/404 for a bad ``hardware``; 409 at once when
                the kernel cannot answer (it is running a cell, or cannot load the
                transfer handler).
        """
        target = self.target(hardware) if hardware is not None else None
        _check_awake(self.kernel_manager, kernel_id)
        try:
            listing = await kernel_namespace(self.kernel_manager, kernel_id)
        except TransferError as exc:
            raise HardwareRequestError(409, str(exc)) from None
        if target is not None:
            await mark_missing_modules(self.machines, target.name, listing["modules"])
        return listing

    # ------------------------------------------------------------------ switching

    async def switch_session(
        self: SwitchingHost,
        session_id: str,
        hardware: Any,
        carry_names: Any = None,
        device: Any = None,
        keep_old: Any = False,
    ) -> dict[str, Any]:
        """Give a notebook's session a kernel on other hardware, carrying variables over.

        A new kernel starts on ``hardware``; the modules bound to names in
        ``carry_names`` are imported in it and the variables copied into it;
        the session then uses it and the old kernel is shut down (unless
        ``keep_old``). A failed launch, or an old kernel that cannot be read (it died,
        its link is down), leaves the session as it was. Each step
        is published as a ``switch`` event (the copy with bytes and rate). While it
        runs, the old kernel neither hibernates nor wakes (a 409 says a switch is
        under way); a switch asked for while one of those runs is refused so.

        Args:
            session_id: The notebook's session.
            hardware: The target's name.
            carry_names: Variable and module names, :data:`CARRY_ALL`, or None/[] for none.
            device: Where arriving tensors go (``cuda``), or None.
            keep_old: Keep the old kernel running.

        Returns:
            ``session_id``, ``kernel_id``, ``previous_kernel_id``, ``hardware``,
            ``carried`` (name, type), ``imported`` (name, module) and
            ``not_carried`` (name, reason).
        """
        names = _carry_names(carry_names)
        if device is not None and not isinstance(device, str):
            raise HardwareRequestError(400, "'device' must be a string such as 'cuda'", "device")
        if not isinstance(keep_old, bool):
            raise HardwareRequestError(400, "'keep_old' must be true or false", "keep_old")
        target = self.target(hardware)
        session = await self.session(session_id)
        old_id = session["kernel"]["id"]
        _check_awake(self.kernel_manager, old_id)
        operations = _operations_of(self.kernel_manager, old_id)

        def progress(state: str, **fields: Any) -> None:
            self.events.publish(
                "switch", session_id=session_id, hardware=target.name, state=state, **fields
            )

        try:
            operations.begin(SWITCH)
        except OperationConflictError as exc:
            raise HardwareRequestError(409, str(exc), "session_id") from exc
        try:
            progress("starting kernel")
            try:
                new_id = await self.start_kernel(target.name, session.get("path"))
            except HardwareRequestError as exc:
                progress("failed", message=str(exc), step=exc.step, hint=exc.hint)
                raise
            try:
                try:
                    carried = await carry(
                        self.kernel_manager, old_id, new_id, names, device, progress
                    )
                except CarryError as exc:
                    raise HardwareRequestError(409, str(exc), "session_id") from None
                if why := operations.ended(f"it switched to {target.label}"):
                    notebook = session.get("path") or "this session"
                    raise HardwareRequestError(
                        409, f"the kernel of {notebook} was not switched: {why}", "session_id"
                    )
                progress("switching session", kernel_id=new_id)
                await self.session_manager.update_session(session_id, kernel_id=new_id)
            except BaseException as exc:
                progress("failed", message=str(exc) or type(exc).__name__)
                with contextlib.suppress(Exception):
                    await self.kernel_manager.shutdown_kernel(new_id)
                raise
        finally:
            operations.end(SWITCH)  # before its own shutdown of the old kernel
        if not keep_old and old_id in self.kernel_manager:
            progress("stopping the old kernel", kernel_id=old_id)
            await self.kernel_manager.shutdown_kernel(old_id)
        if carried.ranks:
            carried.not_carried.append(_ranks_left(carried.ranks, keep_old))
        progress(
            "done",
            kernel_id=new_id,
            carried=[c["name"] for c in carried.carried],
            imported=[m["name"] for m in carried.imported],
            not_carried=carried.not_carried,
        )
        return {
            "session_id": session_id,
            "kernel_id": new_id,
            "previous_kernel_id": old_id,
            "hardware": target.name,
            "carried": carried.carried,
            "imported": carried.imported,
            "not_carried": carried.not_carried,
        }


def _ranks_left(ranks: list[dict[str, Any]], kept: bool) -> dict[str, str]:
    """The old kernel's ``%%ranks`` engines, among what a switch did not carry."""
    fate = (
        "keep running with it (it was kept)"
        if kept
        else "ended with it, and their variables with them"
    )
    return {
        "name": "%%ranks",
        "reason": f"the old kernel's {ranks_phrase(ranks)} {fate}; `%%ranks --out NAME` "
        "gathers a variable into the notebook's kernel, which a switch carries",
    }


def _operations_of(kernel_manager: Any, kernel_id: str) -> KernelOperations:
    """The operations under way on one of the server's kernels (a kernel that is not on
    hardware has none of ours: a guard of its own for the switch)."""
    kernel = kernel_manager.get_kernel(kernel_id) if kernel_id in kernel_manager else None
    provisioner = getattr(kernel, "provisioner", None)
    if isinstance(provisioner, RemoteHWProvisioner):
        return provisioner.operations
    return KernelOperations(lambda: kernel_id)


def _check_awake(kernel_manager: Any, kernel_id: str) -> None:
    """Refuse at once to read a hibernated kernel (which would wake it on its old
    hardware): waking it on the new hardware brings all its state.

    Raises:
        HardwareRequestError: 409 for a hibernated kernel.
    """
    known = kernel_id in kernel_manager
    kernel = kernel_manager.get_kernel(kernel_id) if known else None
    provisioner = getattr(kernel, "provisioner", None)
    if isinstance(provisioner, RemoteHWProvisioner) and provisioner.hibernation.hibernated:
        raise HardwareRequestError(
            409,
            f"{provisioner.named} hibernates: wake it on the hardware you want instead "
            f'(POST /jupyter-remote-hw/api/wake/{kernel_id} with {{"target": ...}}, or '
            "pick the hardware in the notebook's toolbar); it brings all its variables",
            "kernel_id",
        )


def _carry_names(carry: Any) -> list[str] | str:
    if carry is None:
        return []
    if carry == CARRY_ALL:
        return CARRY_ALL
    if not isinstance(carry, list) or not all(
        isinstance(n, str) and n.isidentifier() for n in carry
    ):
        raise HardwareRequestError(
            400, "'carry' must be a list of variable and module names, or \"all\"", "carry"
        )
    return list(dict.fromkeys(carry))


__all__ = ["SessionSwitching", "SwitchingHost"]
