"""The server's transfer clients of its kernels (``transfer.variables``)."""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from jupyter_client.channels import HBChannel
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.transfer.variables import transfer_client

REPO = str(Path(__file__).resolve().parents[2])

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def kernels() -> AsyncIterator[AsyncMultiKernelManager]:
    """A server's kernel manager with one plain ``python3`` kernel."""
    manager = AsyncMultiKernelManager()
    await manager.start_kernel(kernel_name="python3", env={**os.environ, "PYTHONPATH": REPO})
    yield manager
    await manager.shutdown_all(now=True)


def heartbeats() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if isinstance(t, HBChannel) and t.is_alive()]


async def test_a_transfer_client_opened_and_closed_at_once_starts_no_heartbeat(
    kernels: AsyncMultiKernelManager,
) -> None:
    """A save that fails at once opens and closes a client within a moment. A heartbeat
    thread stopped before it first ran spins making sockets until the server has no file
    descriptors left (found by the lifecycle soak): the client starts none, and asks the
    manager whether the kernel lives."""
    (kernel_id,) = kernels.list_kernel_ids()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        async with transfer_client(kernels, kernel_id) as client:
            assert not heartbeats()
            assert await client.link.client.is_alive()
    assert not heartbeats()
    # Closed sockets are released by libzmq's own thread a moment later; none pile up.
    assert len(os.listdir("/proc/self/fd")) < before + 40
