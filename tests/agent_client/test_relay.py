"""Our side of a kernel's relay while the link to the host is down: what clients send is
kept up to a bound, then they wait; nothing is dropped."""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

import pytest
import zmq
import zmq.asyncio

from jupyter_remote_hw.agent_client.relay import KernelRelayClient

MESSAGE = 100 * 1024


async def test_requests_beyond_the_bound_make_clients_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link_up = asyncio.Event()

    async def no_link() -> tuple[Any, Any]:
        await link_up.wait()  # the link never comes back in this test
        raise OSError("unreachable")

    relay = KernelRelayClient(
        "k-bound",
        {"key": secrets.token_hex(16)},
        no_link,
        logging.getLogger("relay-test"),
        request_limit=1024 * 1024,
    )
    ports = await relay.start()
    context = zmq.asyncio.Context()
    client = context.socket(zmq.DEALER)
    client.setsockopt(zmq.SNDHWM, 2)
    client.setsockopt(zmq.LINGER, 0)
    client.connect(f"tcp://127.0.0.1:{ports['shell_port']}")
    sent = 0
    try:
        with caplog.at_level(logging.WARNING, "relay-test"):
            for _ in range(400):
                try:
                    await client.send_multipart([b"x" * MESSAGE], flags=zmq.NOBLOCK)
                except zmq.Again:
                    await asyncio.sleep(0.2)  # the relay may still be reading
                    try:
                        await client.send_multipart([b"x" * MESSAGE], flags=zmq.NOBLOCK)
                    except zmq.Again:
                        break
                sent += 1
                await asyncio.sleep(0)
            # The relay kept its bound; the rest waits with the client, which is blocked.
            assert sent < 400, "the relay read everything: its memory has no bound"
            assert relay._kept_bytes <= 1024 * 1024 + MESSAGE
            assert "requests wait for the link to the host" in caplog.text
    finally:
        client.close(linger=0)
        context.destroy(linger=0)
        await relay.close()
