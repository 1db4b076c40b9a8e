"""Real ipykernel processes under an async kernel manager, and a store in a temporary
directory."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import HibernationStore
from jupyter_remote_hw.transfer.variables import transfer_client

REPO = str(Path(__file__).resolve().parents[2])

StartKernel = Callable[..., Awaitable[str]]


@pytest.fixture
async def kernels() -> AsyncIterator[AsyncMultiKernelManager]:
    """The kernel manager a Jupyter server has; every kernel is shut down afterwards."""
    manager = AsyncMultiKernelManager()
    yield manager
    await manager.shutdown_all(now=True)


@pytest.fixture
def start_kernel(kernels: AsyncMultiKernelManager, tmp_path: Path) -> StartKernel:
    """Start a plain ``python3`` ipykernel (it is made to answer transfers when asked),
    in ``tmp_path/home``; its id."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)

    async def start() -> str:
        env = {**os.environ, "PYTHONPATH": REPO}
        kernel_id = str(await kernels.start_kernel(kernel_name="python3", env=env, cwd=str(home)))
        client = kernels.get_kernel(kernel_id).client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
        finally:
            client.stop_channels()
        return kernel_id

    return start


@pytest.fixture
def store(tmp_path: Path) -> HibernationStore:
    """A store under ``tmp_path`` with no cap."""
    return HibernationStore(root=str(tmp_path / "hibernated"), max_bytes=0, min_free_bytes=0)


async def run(kernels: Any, kernel_id: str, code: str) -> str:
    """Run ``code`` in the kernel; what it printed. Fails the test on an error."""
    outputs: list[dict[str, Any]] = []
    async with transfer_client(kernels, kernel_id) as client:
        await client.link.outputs_ready()
        reply = await client.link.execute(code, outputs.append)
    assert reply["status"] == "ok", (reply.get("ename"), reply.get("evalue"), outputs)
    return "".join(o["content"]["text"] for o in outputs if o["msg_type"] == "stream")


def leftovers(store: HibernationStore) -> list[str]:
    """What is in the store's directory besides entries and its lock."""
    return sorted(
        p.name for p in store.path.iterdir() if p.name.startswith(".") and p.name != ".lock"
    )
