"""Kernel websockets are sent without Nagle delay, in both websocket protocols, unless the
user chose a connection class of their own."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from jupyter_server.services.kernels.connection.base import (
    deserialize_msg_from_ws_v1,
    serialize_msg_to_ws_v1,
)
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from tornado.websocket import WebSocketClientConnection

from jupyter_remote_hw.server.websocket import NoDelayWebsocketConnection

from ..kernelws import KernelChannels
from ..provisioner.conftest import StartKernel

V1 = "v1.kernel.websocket.jupyter.org"
Lines = Callable[[], list[str]]
STOCK = "jupyter_server.services.kernels.connection.channels.ZMQChannelsWebsocketConnection"


@pytest.fixture
def server_log(capfd: pytest.CaptureFixture[str]) -> Lines:
    """The lines the extension logs, caught from before the server is set up."""

    def lines() -> list[str]:
        return [
            line for line in capfd.readouterr().err.splitlines() if "RemoteHWExtension]" in line
        ]

    return lines


@pytest.fixture
def connection_class() -> str | None:
    """``ServerApp.kernel_websocket_connection_class`` as the user configured it."""
    return None


@pytest.fixture
def jp_server_config(server_log: Lines, connection_class: str | None) -> dict[str, Any]:
    server: dict[str, Any] = {"jpserver_extensions": {"jupyter_remote_hw": True}}
    if connection_class is not None:
        server["kernel_websocket_connection_class"] = connection_class
    return {"ServerApp": server}


def server_side(kernel_id: str) -> ZMQChannelsWebsocketConnection:
    """The server's connection for the one websocket open to ``kernel_id``."""
    # jupyter_server keeps every open kernel websocket connection in this set.
    found = [
        connection
        for connection in ZMQChannelsWebsocketConnection._open_sockets
        if connection.kernel_id == kernel_id and connection.websocket_handler is not None
    ]
    assert len(found) == 1
    return found[0]


def nodelay(connection: ZMQChannelsWebsocketConnection) -> bool:
    """Whether TCP_NODELAY is set on the server's socket of a kernel websocket."""
    ws_connection = connection.websocket_handler.ws_connection
    assert ws_connection is not None
    sock = ws_connection.stream.socket
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


async def execute_v1(ws: WebSocketClientConnection, code: str) -> str | None:
    """Run ``code`` over a v1-protocol websocket; its text/plain result once the kernel is
    idle again."""
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "msg_type": "execute_request",
        "username": "test",
        "session": uuid.uuid4().hex,
        "date": "2026-01-01T00:00:00Z",
        "version": "5.3",
    }
    content = {
        "code": code,
        "silent": False,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    parts = [json.dumps(part).encode() for part in (header, {}, {}, content)]
    await ws.write_message(serialize_msg_to_ws_v1(parts, "shell"), binary=True)
    result, replied, idle = None, False, False
    while not (replied and idle):
        raw = await ws.read_message()
        assert isinstance(raw, bytes)
        channel, msg_list = deserialize_msg_from_ws_v1(raw)
        reply_header, parent, _, reply_content = (json.loads(part) for part in msg_list[:4])
        if parent.get("msg_id") != msg_id:
            continue
        kind = reply_header["msg_type"]
        if kind == "execute_result":
            result = reply_content["data"]["text/plain"]
        elif kind == "status" and reply_content["execution_state"] == "idle":
            idle = True
        elif channel == "shell" and kind == "execute_reply":
            replied = True
    return result


@pytest.mark.parametrize("protocol", ["legacy", V1])
async def test_kernel_websockets_are_sent_without_nagle_delay(
    jp_serverapp: Any,
    jp_ws_fetch: Any,
    start_kernel: StartKernel,
    server_log: Lines,
    protocol: str,
) -> None:
    assert jp_serverapp.kernel_websocket_connection_class is NoDelayWebsocketConnection
    said = server_log()
    assert [line for line in said if line.endswith(" loaded")]  # the log is caught
    assert not [line for line in said if "kernel_websocket_connection_class" in line]
    kernel_id = await start_kernel("python3")
    subprotocols = [V1] if protocol == V1 else None
    ws = await jp_ws_fetch("api", "kernels", kernel_id, "channels", subprotocols=subprotocols)
    kc = KernelChannels(ws)
    try:
        if protocol == V1:
            assert ws.selected_subprotocol == V1
            assert await execute_v1(ws, "1+1") == "2"
        else:
            assert ws.selected_subprotocol is None
            await kc.wait_ready()
            assert (await kc.execute("1+1")).result == "2"
        connection = server_side(kernel_id)
        assert isinstance(connection, NoDelayWebsocketConnection)
        assert nodelay(connection)
    finally:
        await kc.close()


@pytest.mark.parametrize("connection_class", [STOCK])
async def test_a_connection_class_the_user_chose_is_kept(
    jp_serverapp: Any,
    jp_ws_fetch: Any,
    start_kernel: StartKernel,
    server_log: Lines,
) -> None:
    assert jp_serverapp.kernel_websocket_connection_class is ZMQChannelsWebsocketConnection
    said = [line for line in server_log() if "kernel_websocket_connection_class" in line]
    assert len(said) == 1
    assert said[0].endswith(
        f"] jupyter_remote_hw: ServerApp.kernel_websocket_connection_class is {STOCK}, so "
        "kernel websockets are sent as that class sends them (with Nagle delay unless it "
        "turns it off)"
    )
    kernel_id = await start_kernel("python3")
    kc = KernelChannels(await jp_ws_fetch("api", "kernels", kernel_id, "channels"))
    try:
        await kc.wait_ready()
        assert (await kc.execute("1+1")).result == "2"
        # jupyter_server's own class leaves Nagle's algorithm on: what ours changes.
        assert not nodelay(server_side(kernel_id))
    finally:
        await kc.close()
