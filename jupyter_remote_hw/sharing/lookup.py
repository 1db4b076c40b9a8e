"""Find the kernel a share names: a kernel id (or its start) from the ledger, or a
machine that runs exactly one kernel."""

from __future__ import annotations

from ..agent_client import AgentError, AgentUnavailableError
from ..machines.manager import MachineManager, target_label
from ..providers import Machine, UnknownHardwareError
from ..transport import TransportError
from .roles import REFUSED, UNKNOWN, UNREACHABLE, ShareError


async def open_machine(manager: MachineManager, target_name: str) -> Machine:
    """The open machine of a target, reaching it if needed.

    Raises:
        ShareError: No such target (unknown), or it cannot be reached (unreachable).
    """
    try:
        target = manager.target(target_name)
        return await manager.machine(target, manager.steps(target_name, "share"))
    except UnknownHardwareError as exc:
        raise ShareError(str(exc), UNKNOWN) from None
    except (AgentUnavailableError, TransportError) as exc:
        where = target_label(manager, target_name)
        raise ShareError(f"cannot reach {where}: {exc}", UNREACHABLE) from None


async def find_kernel(manager: MachineManager, key: str) -> tuple[Machine, str]:
    """The machine and kernel id that ``key`` names.

    Args:
        manager: The machines and their ledger.
        key: A kernel id or its first characters (from the ledger), or the
            name of a machine running exactly one kernel.

    Raises:
        ShareError: ``key`` names no kernel or machine, several kernels, a
            hibernated kernel, or a machine that does not run exactly one kernel.
    """
    matches = [k for k in manager.ledger.kernels() if k.kernel_id.startswith(key)]
    if len(matches) > 1:
        raise ShareError(f"{key!r} names {len(matches)} kernels: give more of the id")
    if matches:
        kernel_id = matches[0].kernel_id
        if manager.hibernation_store.entry_path(kernel_id).is_dir():
            where = target_label(manager, matches[0].target)
            raise ShareError(
                f"the kernel on {where} hibernates: wake it (run a cell in it), then share it",
                REFUSED,
            )
        return await open_machine(manager, matches[0].target), kernel_id
    names = [t.name for t in manager.targets()]
    if key not in names:
        raise ShareError(
            f"no kernel {key!r} in the ledger {manager.ledger.path} and no "
            f"machine of that name (machines: {', '.join(names)})",
            UNKNOWN,
        )
    target = manager.target(key)
    if target.provider == "local":
        raise ShareError(
            f"{key} is {target.where}, not reached over SSH: only kernels on SSH "
            "or cloud hosts can be shared (teammates join through sshd)",
            REFUSED,
        )
    machine = await open_machine(manager, key)
    try:
        kernels = (await (await machine.agent()).call("list_kernels"))["kernels"]
    except AgentError as exc:
        raise ShareError(f"{key}: {exc}", UNREACHABLE) from None
    alive = [k["kernel_id"] for k in kernels if k.get("alive")]
    if len(alive) != 1:
        listed = ", ".join(alive) or "none"
        raise ShareError(f"{key} runs {len(alive)} kernels ({listed}): name the kernel id", REFUSED)
    return machine, str(alive[0])


__all__ = ["find_kernel", "open_machine"]
