"""Real ipykernels that answer transfer requests (the extension the agent loads)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from jupyter_remote_hw.transfer.client import TransferClient, open_local_stream
from jupyter_remote_hw.transfer.kernel_link import KernelLink

REPO = str(Path(__file__).resolve().parents[2])
EXTENSION = "--IPKernelApp.extra_extensions=jupyter_remote_hw.transfer.kernel_side.kernel_handler"

#: Small chunks, so a few megabytes already take many chunk messages.
CHUNK = 64 * 1024


async def run(link: KernelLink, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Execute ``code``; its reply content and its outputs."""
    outputs: list[dict[str, Any]] = []
    reply = await link.execute(code, outputs.append)
    return reply, outputs


async def evaluate(link: KernelLink, expression: str) -> str:
    """``repr`` of ``expression`` in the kernel (via user_expressions)."""
    outputs: list[dict[str, Any]] = []
    reply = await link.execute("", outputs.append, user_expressions={"value": expression})
    value = reply["user_expressions"]["value"]
    assert value["status"] == "ok", value
    return str(value["data"]["text/plain"])


StartKernel = Callable[..., Awaitable[TransferClient]]


#: Bytes of large transfers go over a bulk stream, or as chunk messages.
MODES = pytest.mark.parametrize("streams", [True, False], ids=["bulk-stream", "chunk-messages"])


@pytest.fixture
async def start_kernel() -> AsyncIterator[StartKernel]:
    """Start real ipykernels with the transfer extension; all are shut down afterwards."""
    started: list[tuple[AsyncKernelManager, KernelLink]] = []

    async def start(
        chunk_size: int = CHUNK, window: int = 4, streams: bool = False
    ) -> TransferClient:
        manager = AsyncKernelManager(kernel_name="python3")
        env = {**os.environ, "PYTHONPATH": REPO}
        await manager.start_kernel(extra_arguments=[EXTENSION], env=env)
        client = manager.client()
        client.start_channels()
        await client.wait_for_ready(timeout=60)
        link = KernelLink(client)
        link.start()
        started.append((manager, link))
        return TransferClient(
            link,
            f"kernel {len(started)}",
            chunk_size=chunk_size,
            window=window,
            opener=open_local_stream if streams else None,
        )

    yield start
    for manager, link in started:
        await link.close()
        link.client.stop_channels()
        await manager.shutdown_kernel(now=True)
