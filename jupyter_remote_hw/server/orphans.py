"""Kernels that ``%%remote`` started from a local kernel that has since died.

A local kernel shuts its ``%%remote`` kernels down when it exits, but not when
it is killed (SIGKILL, out of memory, a crashed machine). Those kernels stay
in the ledger with the owner ``magic:<host>:<pid>``. :func:`reap_orphans` finds
the ones of this machine whose process is gone and shuts them down on their
host, so a GPU is not held by a kernel nobody can reach. The Jupyter server
runs it periodically.

Only hardware that is already owned (SSH hosts, this machine) is reaped here:
cloud machines stop themselves when idle (their agent's lifetime policy), and
reaching a stopped one must never start it.
"""

from __future__ import annotations

import logging
import socket

from ..agent.protocol import UNKNOWN_KERNEL
from ..agent_client import AgentError, AgentUnavailableError
from ..ledger.records import magic_owner_process
from ..ledger.store import KernelRecord
from ..machines.manager import MachineManager
from ..processes import process_alive
from ..providers import Target, UnknownHardwareError
from ..providers.launch_steps import LaunchError, LaunchSteps
from ..transport import TransportError

#: Providers whose kernels are reaped here (cloud machines stop themselves when idle).
REAPED_PROVIDERS = ("ssh", "local")


def orphaned_kernels(manager: MachineManager, host: str | None = None) -> list[KernelRecord]:
    """The ``%%remote`` kernels of this machine whose local kernel process is gone."""
    host = host or socket.gethostname()
    found = []
    for record in manager.ledger.kernels():
        process = magic_owner_process(record.owner)
        if process is not None and process[0] == host and not process_alive(process[1]):
            found.append(record)
    return found


async def reap_orphans(manager: MachineManager, log: logging.Logger | None = None) -> list[str]:
    """Shut down orphaned ``%%remote`` kernels on SSH hosts and this machine.

    A kernel its host no longer has is forgotten; one whose host cannot be
    reached now is kept for the next round.

    Returns:
        The ids of the kernels shut down or forgotten.
    """
    log = log or manager.log
    reaped = []
    for record in orphaned_kernels(manager):
        try:
            target = manager.target(record.target)
        except UnknownHardwareError:
            continue  # no longer configured: nothing here can reach it
        if target.provider not in REAPED_PROVIDERS:
            continue
        detail = await shut_down_on_host(manager, target, record, log)
        if detail is None:
            continue
        log.info(
            "kernel %s on %s, started by %%remote in %s which has ended: %s",
            record.kernel_id,
            target.name,
            record.owner,
            detail,
        )
        reaped.append(record.kernel_id)
    return reaped


async def shut_down_on_host(
    manager: MachineManager, target: Target, record: KernelRecord, log: logging.Logger
) -> str | None:
    """Shut a recorded kernel down on its host, and forget it.

    Returns:
        ``"shut down"`` or ``"already gone"`` (the host no longer had it); None
        when the host cannot be reached now or refused (the record is kept).
    """
    try:
        # Reaching the host is logged, not shown in JupyterLab as a kernel launch.
        steps = LaunchSteps(target.name, record.kernel_id, log)
        machine = await manager.machine(target, steps)
        agent = await machine.agent()
        await agent.call("shutdown_kernel", kernel_id=record.kernel_id, now=True)
        detail = "shut down"
    except AgentError as exc:
        if exc.kind != UNKNOWN_KERNEL:
            log.warning("kernel %s on %s: %s", record.kernel_id, target.name, exc)
            return None
        detail = "already gone"
    except (TimeoutError, AgentUnavailableError, TransportError, LaunchError, OSError) as exc:
        log.info(
            "kernel %s on %s: host not reachable now (%s); trying later",
            record.kernel_id,
            target.name,
            exc,
        )
        return None
    manager.ledger.remove_kernel(record.kernel_id)
    return detail


__all__ = ["orphaned_kernels", "reap_orphans", "shut_down_on_host"]
