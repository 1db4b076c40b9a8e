"""Copying named variables between two kernels of a Jupyter server.

Used to carry variables over when a notebook switches hardware: the bytes go
from the source kernel to the destination chunk by chunk through this
process, which holds only the chunks in flight. Both kernels must answer
transfer requests: every kernel started on a hardware target does, and any
IPython kernel does after ``%load_ext jupyter_remote_hw``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from jupyter_client.asynchronous.client import AsyncKernelClient
from jupyter_client.multikernelmanager import MultiKernelManager

from .kernel_link import KernelLink
from .transfer.client import Progress, TransferClient


@contextlib.asynccontextmanager
async def _transfer_client(kernel_manager: MultiKernelManager,
                           kernel_id: str) -> AsyncIterator[TransferClient]:
    manager = kernel_manager.get_kernel(kernel_id)
    client = manager.client()
    if not isinstance(client, AsyncKernelClient):
        raise TypeError(f"kernel {kernel_id}: an async kernel manager is needed")
    client.start_channels()
    try:
        async with KernelLink(client) as link:
            yield TransferClient(link, f"kernel {kernel_id} ({manager.kernel_name})")
    finally:
        client.stop_channels()


async def copy_variables(kernel_manager: MultiKernelManager, source_id: str,
                         destination_id: str, names: list[str], device: str | None = None,
                         progress: Progress | None = None) -> list[dict[str, Any]]:
    """Copy the named variables of one kernel into another: all of them, or none.

    Args:
        kernel_manager: The server's kernel manager.
        source_id: The kernel the variables come from.
        destination_id: The kernel they are assigned in.
        names: The variables.
        device: Where arriving tensors and modules go in the destination (``cuda``).
        progress: Called with (bytes done, bytes in all).

    Returns:
        ``{"name", "type"}`` of each variable assigned.

    Raises:
        KeyError: No kernel with one of the ids.
        TransferError: A kernel does not answer transfer requests, a variable
            is missing or cannot be serialized (named), or the copy failed;
            nothing was assigned in the destination.
    """
    async with _transfer_client(kernel_manager, source_id) as source, \
            _transfer_client(kernel_manager, destination_id) as destination:
        await source.hello()
        await destination.hello()
        return await source.copy_to(destination, names, device, progress)
