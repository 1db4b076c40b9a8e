"""Run code in a kernel through jupyter_server's websocket, as JupyterLab does."""

from __future__ import annotations

import asyncio
import datetime
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tornado.websocket import WebSocketClientConnection


@dataclass
class Execution:
    """What one execute_request produced."""

    status: str = ""
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    ename: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)


class KernelChannels:
    """The kernel's channels over one open websocket (JSON messages, no subprotocol).

    Args:
        ws: A connected ``/api/kernels/<id>/channels`` websocket.
    """

    def __init__(self, ws: WebSocketClientConnection) -> None:
        self.ws = ws
        self.session = uuid.uuid4().hex

    def _message(
        self, msg_type: str, content: dict[str, Any], channel: str, msg_id: str | None = None
    ) -> dict[str, Any]:
        return {
            "header": {
                "msg_id": msg_id or uuid.uuid4().hex,
                "msg_type": msg_type,
                "username": "test",
                "session": self.session,
                "date": datetime.datetime.now(datetime.UTC).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }

    async def send(
        self,
        msg_type: str,
        content: dict[str, Any],
        channel: str = "shell",
        msg_id: str | None = None,
    ) -> str:
        """Send one message (with ``msg_id`` when given); return its msg_id."""
        message = self._message(msg_type, content, channel, msg_id)
        await self.ws.write_message(json.dumps(message))
        return str(message["header"]["msg_id"])

    async def _next(self, timeout: float) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            raw = await self.ws.read_message()
        if raw is None:
            raise ConnectionError("the kernel websocket closed")
        return dict(json.loads(raw))

    async def collect(self, msg_id: str, timeout: float = 60.0) -> Execution:
        """Gather a request's outputs until its shell reply and its idle status arrived."""
        return (await self.collect_all([msg_id], timeout))[0]

    async def collect_all(self, msg_ids: list[str], timeout: float = 60.0) -> list[Execution]:
        """Gather several requests' outputs until each has its reply and its idle status."""
        found = {msg_id: Execution() for msg_id in msg_ids}
        ended: dict[str, set[str]] = {msg_id: set() for msg_id in msg_ids}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(len(parts) < 2 for parts in ended.values()):
            message = await self._next(max(0.1, deadline - loop.time()))
            msg_id = message.get("parent_header", {}).get("msg_id")
            if msg_id not in found:
                continue
            done = found[msg_id]
            done.messages.append(message)
            kind = message["header"]["msg_type"]
            content = message["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    done.stdout += content["text"]
                else:
                    done.stderr += content["text"]
            elif kind == "execute_result":
                done.result = content["data"].get("text/plain")
            elif kind == "error":
                done.ename = content["ename"]
            elif kind == "status" and content["execution_state"] in ("idle", "dead"):
                # A dead kernel's answer ends with ``dead`` where a live one says idle.
                ended[msg_id].add("idle")
            elif message.get("channel") == "shell" and kind.endswith("_reply"):
                done.status = content["status"]
                ended[msg_id].add("reply")
        return [found[msg_id] for msg_id in msg_ids]

    async def wait_printed(self, msg_id: str, text: str, timeout: float = 30.0) -> None:
        """Read messages until the request ``msg_id`` has printed ``text`` on stdout (what
        the request sends after that, its reply included, is left to :meth:`collect`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            message = await self._next(max(0.1, deadline - loop.time()))
            if (
                message.get("parent_header", {}).get("msg_id") == msg_id
                and message["header"]["msg_type"] == "stream"
                and text in message["content"]["text"]
            ):
                return

    async def start(self, code: str) -> str:
        """Send ``code`` as a cell without waiting for it; return its msg_id."""
        return await self.send(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )

    async def execute(self, code: str, timeout: float = 60.0) -> Execution:
        """Run ``code``; return its outputs once the kernel is idle again."""
        return await self.collect(await self.start(code), timeout)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the kernel answers a kernel_info_request."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msg_id = await self.send("kernel_info_request", {})
            try:
                await self.collect(msg_id, timeout=min(5.0, max(0.1, deadline - loop.time())))
                return
            except TimeoutError:
                if loop.time() >= deadline:
                    raise

    async def close(self) -> None:
        """Close the websocket and wait until the server has closed it too."""
        self.ws.close()
        try:
            async with asyncio.timeout(5):
                while await self.ws.read_message() is not None:
                    pass
        except TimeoutError:
            pass
