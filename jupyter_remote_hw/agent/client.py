"""A minimal blocking client, used to ask whether an agent already serves a socket."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from .protocol import MAX_LINE_BYTES, AgentError, encode


class AgentUnavailable(Exception):
    """Nothing (or nothing that speaks the protocol) answers on the socket."""


def request_sync(
    socket_path: str, op: str, args: dict[str, Any] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """Send one request to an agent and wait for its response.

    Args:
        socket_path: The agent's unix socket.
        op: Operation name.
        args: Operation arguments.
        timeout: Seconds for the whole exchange.

    Returns:
        The result of a successful response.

    Raises:
        AgentUnavailable: No agent answered properly in time.
        AgentError: The agent answered with an error.
    """
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall(encode({"id": 1, "op": op, "args": args or {}}))
        buffer = b""
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AgentUnavailable(f"no answer from {socket_path} within {timeout} s")
            sock.settimeout(remaining)
            chunk = sock.recv(65536)
            if not chunk:
                raise AgentUnavailable(f"{socket_path} closed the connection without answering")
            buffer += chunk
            if len(buffer) > MAX_LINE_BYTES:
                raise AgentUnavailable(f"{socket_path} sent an overlong line")
    except OSError as exc:
        raise AgentUnavailable(f"cannot talk to an agent at {socket_path}: {exc}") from exc
    finally:
        sock.close()
    try:
        response = json.loads(buffer.split(b"\n", 1)[0])
    except ValueError as exc:
        raise AgentUnavailable(f"{socket_path} answered with something not JSON") from exc
    if not isinstance(response, dict) or response.get("id") != 1:
        raise AgentUnavailable(f"{socket_path} answered with something not an agent response")
    if not response.get("ok"):
        raise AgentError(str(response.get("kind", "")), str(response.get("error", "")))
    result = response.get("result")
    return result if isinstance(result, dict) else {}
