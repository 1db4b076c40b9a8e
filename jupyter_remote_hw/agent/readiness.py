"""Decide when a freshly started kernel is ready: it answers kernel_info on its shell."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from .connection import PORT_NAMES, channel_url, open_channel
from .messaging import AGENT_SESSION, Signer, build, parse
from .zmqcompat import zmq_module

if TYPE_CHECKING:
    import zmq.asyncio

log = logging.getLogger(__name__)

READY = "ready"
DIED = "died"
TIMEOUT = "timeout"

_POLL_INTERVAL = 0.05


async def _accepts(connection: dict[str, Any], name: str) -> bool:
    """Whether something accepts connections on one of the kernel's channels."""
    try:
        _, writer = await asyncio.wait_for(open_channel(connection, name), 1.0)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


async def _wait_listening(
    connection: dict[str, Any], is_alive: Callable[[], bool], deadline: float
) -> str:
    """Wait until all five kernel channels accept connections."""
    while True:
        if not is_alive():
            return DIED
        results = [await _accepts(connection, name) for name in PORT_NAMES]
        if all(results):
            return READY
        if time.monotonic() >= deadline:
            return TIMEOUT
        await asyncio.sleep(_POLL_INTERVAL)


async def _wait_kernel_info(
    connection: dict[str, Any],
    context: zmq.asyncio.Context,
    is_alive: Callable[[], bool],
    deadline: float,
) -> str:
    """Send one kernel_info_request on the shell channel and wait for its reply.

    The socket only accepts the request once its connection to the kernel is
    complete (``IMMEDIATE``), so exactly one request reaches the kernel, which
    answers it when it is ready (or, for a busy kernel, after its current cell).
    """
    zmq = zmq_module
    signer = Signer(
        str(connection["key"]).encode(), str(connection.get("signature_scheme", "hmac-sha256"))
    )
    sock = context.socket(zmq.DEALER)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.setsockopt(zmq.RECONNECT_IVL, 20)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
        sock.connect(channel_url(connection, "shell_port"))
        request_id: str | None = None
        while True:
            if not is_alive():
                return DIED
            if time.monotonic() >= deadline:
                return TIMEOUT
            if request_id is None:
                msg_id, frames = build(signer, "kernel_info_request", {}, AGENT_SESSION)
                try:
                    await sock.send_multipart(frames, flags=zmq.NOBLOCK)
                    request_id = msg_id
                except zmq.Again:
                    pass  # not connected yet
            events = await sock.poll(timeout=int(_POLL_INTERVAL * 1000))
            while events:
                reply = parse(await sock.recv_multipart(), signer)
                if (
                    reply is not None
                    and reply.msg_type == "kernel_info_reply"
                    and reply.parent_header.get("msg_id") == request_id
                ):
                    return READY
                events = await sock.poll(timeout=0)
    finally:
        sock.close(linger=0)


async def wait_until_ready(
    connection: dict[str, Any],
    context: zmq.asyncio.Context | None,
    is_alive: Callable[[], bool],
    timeout: float,
) -> str:
    """Wait until the kernel answers, its process dies, or time runs out.

    With pyzmq the kernel must answer a ``kernel_info_request`` on its shell
    channel (so it is ready to execute); without pyzmq, all five of its
    channels must accept connections.

    Args:
        connection: The kernel's connection dict.
        context: A zmq asyncio context, or None without pyzmq.
        is_alive: Returns False once the kernel process has exited.
        timeout: Seconds to wait.

    Returns:
        :data:`READY`, :data:`DIED` or :data:`TIMEOUT`.
    """
    deadline = time.monotonic() + timeout
    if context is None:
        return await _wait_listening(connection, is_alive, deadline)
    return await _wait_kernel_info(connection, context, is_alive, deadline)
