"""KernelLink on channels just opened: a cell run once the link sees IOPub keeps its
outputs, and a kernel that never answers fails the wait instead of hanging it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from jupyter_remote_hw.transfer.kernel_link import KernelLink


@pytest.fixture
async def manager() -> AsyncIterator[AsyncKernelManager]:
    """A plain ``python3`` kernel, started without waiting for it to answer."""
    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel()
    yield manager
    await manager.shutdown_kernel(now=True)


async def printed(manager: AsyncKernelManager, code: str, ready: bool) -> str:
    """What ``code`` printed, run on a link opened for it alone."""
    client = manager.client()
    client.start_channels()
    outputs: list[dict[str, Any]] = []
    try:
        async with KernelLink(client) as link:
            if ready:
                await link.outputs_ready(timeout=30)
            async with asyncio.timeout(10):
                reply = await link.execute(code, outputs.append)
    finally:
        client.stop_channels()
    assert reply["status"] == "ok", reply
    return "".join(o["content"]["text"] for o in outputs if o["msg_type"] == "stream")


async def test_a_cell_on_a_link_just_opened_keeps_its_outputs_once_ready(
    manager: AsyncKernelManager,
) -> None:
    # The first link meets a kernel still starting; the next ones a warm kernel,
    # where a subscription not yet in place loses what the cell prints.
    for n in range(12):
        assert await printed(manager, f"print({n})", ready=True) == f"{n}\n"


async def test_waiting_for_outputs_of_a_kernel_that_never_answers_times_out(
    manager: AsyncKernelManager,
) -> None:
    assert await printed(manager, "print('up')", ready=True) == "up\n"
    pid = manager.provisioner.pid  # type: ignore[union-attr]
    os.kill(pid, signal.SIGSTOP)
    try:
        client = manager.client()
        client.start_channels()
        try:
            async with KernelLink(client) as link:
                with pytest.raises(TimeoutError):
                    await link.outputs_ready(timeout=1.5, resend=0.2)
                # Nothing is left waiting on the link for the requests it sent.
                assert link._replies == {} and link._outputs == {}
        finally:
            client.stop_channels()
    finally:
        os.kill(pid, signal.SIGCONT)
    assert await printed(manager, "print('back')", ready=True) == "back\n"


async def test_a_look_at_events_scheduled_before_a_link_closed_touches_no_later_socket(
    manager: AsyncKernelManager, caplog: pytest.LogCaptureFixture
) -> None:
    """A stream schedules a look at its socket's events when some are pending; one still
    queued when its link closes must not read the socket after the client closed it (or
    the next link's, which may reuse its memory and then miss its wake-up)."""
    for n in range(6):
        client = manager.client()
        client.start_channels()
        try:
            async with KernelLink(client) as link:
                await link.outputs_ready(timeout=30)
                for stream in link._streams:
                    # What ZMQStream._update_handler schedules for pending events.
                    stream.io_loop.add_callback(
                        lambda stream=stream: stream._handle_events(stream.socket, 0)
                    )
        finally:
            client.stop_channels()
        assert await printed(manager, f"print({n})", ready=True) == f"{n}\n"
    assert [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")] == []
