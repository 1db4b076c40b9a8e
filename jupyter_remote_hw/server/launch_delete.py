"""``DELETE /api/kernels/<id>`` of a kernel whose launch is under way (a SLURM job
waiting in the queue) cancels that launch and answers 204.

jupyter_server lists a kernel only once its start has finished, so its own DELETE
of a kernel still launching answered 404 and left the launch (and the job it
queued) going. Every client stops a kernel through that route, so the server's
kernel manager is given a ``shutdown_kernel`` that first cancels a launch under way
(what it started is undone: a queued job is cancelled), waits until it has ended,
and only then hands anything else to jupyter_server's own.

A shutdown of a kernel being restarted (a DELETE, or the end of a hardware switch,
arriving while a restart runs) first waits for the restart to end: jupyter_client's
own shutdown reads the kernel's ``ready`` future, which fails (``Exception is not
set``, a 500) while a restart has it pending. A shutdown of a kernel that switches
hardware first makes the switch give up and waits for it (jupyter_client tells the
kernel to stop before anything of ours is asked, which would cut the switch's copy
of the variables short): the notebook is closed, so nothing is moved, and the new
kernel is stopped too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..machines.manager import MachineManager
from ..provisioner import RemoteHWProvisioner
from ..provisioner.operations import SHUTDOWN

#: Seconds a DELETE waits for a cancelled launch to undo what it started (or for a
#: restart under way to end).
CANCEL_WAIT = 30.0

Shutdown = Callable[..., Awaitable[Any]]


def cancel_launches_on_delete(
    kernel_manager: Any, machines: MachineManager, log: logging.Logger
) -> None:
    """Make ``kernel_manager.shutdown_kernel`` cancel a launch under way first.

    Args:
        kernel_manager: The Jupyter server's kernel manager.
        machines: The machine manager that runs the launches.
        log: Where to say that a launch was cancelled.
    """
    own: Shutdown = kernel_manager.shutdown_kernel

    async def shutdown_kernel(kernel_id: str, *args: Any, **kwargs: Any) -> Any:
        if kernel_id in kernel_manager:
            kernel = kernel_manager.get_kernel(kernel_id)
            provisioner = getattr(kernel, "provisioner", None)
            if isinstance(provisioner, RemoteHWProvisioner):
                await provisioner.operations.end_switch(SHUTDOWN)
            await _restarted(kernel, log)
            if kernel_id not in kernel_manager:
                return None  # the restart failed, and the kernel went with it
            return await own(kernel_id, *args, **kwargs)
        entry = machines.launches.get(kernel_id)
        if entry is None or not machines.cancel_launch(kernel_id):
            return await own(kernel_id, *args, **kwargs)  # jupyter_server's 404
        log.info("kernel %s: its launch is cancelled (the kernel was shut down)", kernel_id)
        task = entry[0]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT
        while not task.done() and loop.time() < deadline:
            await asyncio.sleep(0.05)
        return None

    setattr(kernel_manager, "shutdown_kernel", shutdown_kernel)  # noqa: B010 (an instance's)


async def _restarted(kernel: Any, log: logging.Logger) -> None:
    """Wait, up to :data:`CANCEL_WAIT` seconds, until the kernel is not being restarted
    (its ``ready`` future is done; a failed restart counts as ended). A restart makes
    a new future for its stop and another for its start, so each is waited for."""
    if kernel.ready.done():
        return
    log.info("kernel %s: its shutdown waits for its restart to end", kernel.kernel_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT
    while not (ready := kernel.ready).done() and (left := deadline - loop.time()) > 0:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(ready)), left)


__all__ = ["CANCEL_WAIT", "cancel_launches_on_delete"]
