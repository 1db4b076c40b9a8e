"""The relay of a kernel that hibernated under an earlier Jupyter server, made again
here, asleep, on the kernel's old local ports (see :mod:`.hibernating`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections.abc import Callable
from typing import Any

from jupyter_client.connect import KernelConnectionInfo

from ..agent_client.relay import KernelRelayClient


async def sleeping_relay(
    kernel_id: str,
    local_ports: dict[str, int],
    kernel_info: str | None,
    on_wake: Callable[[], None],
    log: logging.Logger,
) -> tuple[KernelRelayClient, dict[str, int], KernelConnectionInfo]:
    """A relay on ``local_ports``, asleep, with a new key (the old one was never written
    down): it answers kernel info with ``kernel_info`` and echoes heartbeats, and calls
    ``on_wake`` when a held request needs the kernel.

    Returns:
        The relay, the kernel's local ports, and its connection info here.
    """
    key = secrets.token_hex(32)
    connection = {"key": key, "signature_scheme": "hmac-sha256"}

    async def no_host() -> tuple[Any, Any]:
        await asyncio.Event().wait()  # asleep: never opened
        raise AssertionError("unreachable")

    relay = KernelRelayClient(kernel_id, connection, no_host, log)
    ports = await relay.start(local_ports)
    relay.hold(on_wake)
    await relay.sleep()
    relay.kernel_info = kernel_info.encode() if kernel_info is not None else None
    hb_port = int(local_ports.get("hb_port", 0)) or _free_port()
    await relay.echo_heartbeats(hb_port)
    ports = {**ports, "hb_port": hb_port}
    local = {"ip": "127.0.0.1", "transport": "tcp", **connection, **ports}
    local["key"] = key.encode()  # jupyter_client compares keys as bytes
    return relay, ports, KernelConnectionInfo(**local)  # type: ignore[typeddict-item]


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


__all__ = ["sleeping_relay"]
