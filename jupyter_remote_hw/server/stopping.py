"""The server's kernels at its stop: settled, ours shut down, and nothing left that
jupyter_server's own stop cannot end.

jupyter_server stops its event loop only once every extension has stopped and its
kernel manager's ``shutdown_all`` has returned; if either raises, the loop runs on:
the server no longer accepts connections but never exits (a service manager then
kills it, leaving remote kernels behind). ``shutdown_all`` raises for a kernel whose
start failed (jupyter_client keeps its id among the kernels starting: "Kernel does
not exist") and for one being started, restarted or shut down at that moment (its
``ready`` future is not done: "Exception is not set"). So the extension's stop
waits until no kernel is between two states, shuts its own kernels down, then leaves
jupyter_server only kernels it can shut down.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import log_failure

#: Seconds between looks at kernels still starting, restarting or shutting down.
POLL = 0.05


def _starting(kernel_manager: Any) -> dict[str, Any]:
    """jupyter_client's kernels being started (or shut down): id to its task."""
    starting = getattr(kernel_manager, "_pending_kernels", None)
    return starting if isinstance(starting, dict) else {}


def unsettled(kernel_manager: Any) -> list[str]:
    """The kernels being started, restarted or shut down right now."""
    ids = []
    for kernel_id in kernel_manager.list_kernel_ids():
        if not kernel_manager.get_kernel(kernel_id).ready.done():
            ids.append(kernel_id)
    for kernel_id, task in list(_starting(kernel_manager).items()):
        if not task.done() and kernel_id not in ids:
            ids.append(kernel_id)
    return ids


async def settle(kernel_manager: Any, timeout: float, log: logging.Logger) -> list[str]:
    """Wait, up to ``timeout`` seconds, until no kernel is being started, restarted or
    shut down (a restart asked for just before the stop ends first).

    Returns:
        The kernels still between two states when the time ran out.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    waiting = unsettled(kernel_manager)
    if waiting:
        log.info(
            "jupyter_remote_hw: waiting up to %.0f s for %d kernel(s) starting, restarting "
            "or shutting down: %s",
            timeout,
            len(waiting),
            ", ".join(waiting),
        )
    while waiting and loop.time() < deadline:
        await asyncio.sleep(POLL)
        waiting = unsettled(kernel_manager)
    return waiting


async def shut_down(kernel_manager: Any, kernel_ids: list[str], log: logging.Logger) -> None:
    """Shut ``kernel_ids`` down together; one that a client shut down meanwhile is
    skipped, one that fails is logged (one line for a user error)."""
    present = [kernel_id for kernel_id in kernel_ids if kernel_id in kernel_manager]
    results = await asyncio.gather(
        *(kernel_manager.shutdown_kernel(kernel_id) for kernel_id in present),
        return_exceptions=True,
    )
    for kernel_id, result in zip(present, results, strict=True):
        if not isinstance(result, BaseException):
            continue
        if kernel_id not in kernel_manager:
            log.debug("jupyter_remote_hw: kernel %s was shut down meanwhile", kernel_id)
        elif isinstance(result, Exception):
            log_failure(log, result, f"jupyter_remote_hw: kernel {kernel_id} did not shut down")
        else:
            raise result


def leave_to_server(kernel_manager: Any, ours: list[str], log: logging.Logger) -> None:
    """Leave jupyter_server's ``shutdown_all`` only kernels it can shut down.

    The ids of kernels whose start failed are dropped from those starting. Our
    kernels still listed (their shutdown failed, or they did not settle in time) are
    dropped from the kernel manager, named in a warning: their links close with the
    machines, and jupyter_server could only fail on them.
    """
    starting = _starting(kernel_manager)
    for kernel_id, task in list(starting.items()):
        if task.done() and kernel_id not in kernel_manager:
            starting.pop(kernel_id, None)
            log.debug("jupyter_remote_hw: kernel %s never started; forgotten", kernel_id)
    for kernel_id in ours:
        if kernel_id not in kernel_manager and kernel_id not in starting:
            continue
        kernel_manager.remove_kernel(kernel_id)
        starting.pop(kernel_id, None)
        log.warning(
            "jupyter_remote_hw: kernel %s could not be shut down; it may still run on its host",
            kernel_id,
        )


__all__ = ["leave_to_server", "settle", "shut_down", "unsettled"]
