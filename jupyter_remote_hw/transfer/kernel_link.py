"""KernelLink: requests to one kernel and their replies, and its outputs by request.

One reader per channel, so requests can be pipelined (transfer chunks) and a
cell's outputs reach whoever ran it as they arrive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Self

import zmq
from jupyter_client.asynchronous.client import AsyncKernelClient
from zmq.eventloop.zmqstream import ZMQStream

OutputHandler = Callable[[dict[str, Any]], None]


class KernelDiedError(Exception):
    """The kernel's channels closed while a request was waiting for its reply."""


class KernelLink:
    """Drives one kernel through an :class:`AsyncKernelClient` with started channels.

    Use as an async context manager, or call :meth:`start` and :meth:`close`.

    Args:
        client: The kernel's client; its shell and IOPub channels must be
            read by this link alone.
        log: Where to log.
    """

    def __init__(self, client: AsyncKernelClient, log: logging.Logger | None = None) -> None:
        self.client = client
        self.log = log or logging.getLogger(__name__)
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._outputs: dict[str, OutputHandler] = {}
        self._streams: list[ZMQStream] = []
        self._shell: ZMQStream | None = None

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def start(self) -> None:
        """Start reading the shell and IOPub channels."""
        if self._streams:
            return
        # ZMQStreams over plain sockets sharing the client's: they handle the
        # sockets' edge-triggered readiness across interleaved sends and
        # receives, where awaiting recv on the asyncio socket while sending on
        # it can miss a reply and wait forever.
        shell: zmq.Socket[bytes] = zmq.Socket.shadow(self.client.shell_channel.socket.underlying)
        iopub: zmq.Socket[bytes] = zmq.Socket.shadow(self.client.iopub_channel.socket.underlying)
        self._shell = ZMQStream(shell)
        self._iopub = ZMQStream(iopub)
        self._streams = [self._shell, self._iopub]
        self._shell.on_recv(self._on_shell, copy=False)
        self._iopub.on_recv(self._on_iopub, copy=False)

    async def close(self) -> None:
        """Stop reading; pending requests fail with :class:`KernelDiedError`."""
        streams, self._streams = self._streams, []
        for stream in streams:
            stream.stop_on_recv()
            stream.flush()
            # Unregister from the event loop without closing: the socket is the
            # client's (closing a shadow closes it). Left registered, its file
            # descriptor, reused by the next kernel's sockets, would be "added twice".
            if stream.socket is not None and not stream.socket.closed:
                stream.io_loop.remove_handler(stream.socket)
        if streams:
            # A stream schedules a look at its socket's events when some were pending
            # (edge-triggered readiness). Let those looks run while the socket is still
            # open, then let go of it: run after the client closes its sockets, such a
            # look would read the events of whatever socket reuses that memory next (the
            # next link's, which then misses its wake-up and waits forever).
            await asyncio.sleep(0)
            for stream in streams:
                stream.socket = None  # type: ignore[assignment]
        self._shell = None
        self._fail_pending(KernelDiedError("the link to the kernel was closed"))

    def _fail_pending(self, error: Exception) -> None:
        for future in self._replies.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # a caller that has gone does not need to see it
        self._replies.clear()

    def _deserialize(self, parts: list[Any]) -> dict[str, Any]:
        # Frames are not copied: large buffers stay views of what zmq received.
        _, message = self.client.session.feed_identities(parts, copy=False)
        msg: dict[str, Any] = self.client.session.deserialize(message, content=True, copy=False)
        return msg

    def _on_shell(self, parts: list[Any]) -> None:
        msg = self._deserialize(parts)
        future = self._replies.pop(msg["parent_header"].get("msg_id"), None)
        if future is not None and not future.done():
            future.set_result(msg)

    def _on_iopub(self, parts: list[Any]) -> None:
        msg = self._deserialize(parts)
        handler = self._outputs.get(msg["parent_header"].get("msg_id"))
        if handler is not None:
            handler(msg)

    def _shell_stream(self) -> ZMQStream:
        if self._shell is None:
            raise KernelDiedError("the link to the kernel is not started")
        return self._shell

    def send(
        self, msg_type: str, content: dict[str, Any], buffers: list[Any] | None = None
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a shell request now; the future resolves to its reply message."""
        return self._send(self.client.session.msg(msg_type, content), buffers)

    def _send(
        self,
        msg: dict[str, Any],
        buffers: list[Any] | None = None,
        on_output: OutputHandler | None = None,
    ) -> asyncio.Future[dict[str, Any]]:
        msg_id = msg["header"]["msg_id"]
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[msg_id] = future
        if on_output is not None:
            self._outputs[msg_id] = on_output
        self.client.session.send(self._shell_stream(), msg, buffers=buffers or [])
        return future

    async def request(
        self, msg_type: str, content: dict[str, Any], buffers: list[Any] | None = None
    ) -> dict[str, Any]:
        """Send a shell request and wait for its reply message."""
        return await self.send(msg_type, content, buffers)

    async def request_or_ignored(
        self,
        msg_type: str,
        content: dict[str, Any],
        grace: float = 0.1,
        resend: float = 0.5,
    ) -> dict[str, Any] | None:
        """Send a shell request; its reply, or None when the kernel ignored it.

        A kernel that does not know ``msg_type`` goes busy and idle again
        without replying (ipykernel logs "Unknown message type"): once it is
        idle and no reply has come within ``grace`` seconds, the answer is None.
        Channels just opened may miss that status (IOPub subscriptions take a
        moment), so with neither a reply nor the status after ``resend``
        seconds the request is sent again; the first reply to any copy counts.
        Bound the wait with a timeout: a kernel running a cell answers after it.
        """
        idle = asyncio.get_running_loop().create_future()

        def route(output: dict[str, Any]) -> None:
            if (
                output["msg_type"] == "status"
                and not idle.done()
                and output["content"].get("execution_state") == "idle"
            ):
                idle.set_result(None)

        sent: dict[str, asyncio.Future[dict[str, Any]]] = {}
        try:
            while True:
                msg = self.client.session.msg(msg_type, content)
                sent[msg["header"]["msg_id"]] = self._send(msg, on_output=route)
                waiting: list[asyncio.Future[Any]] = [*sent.values(), idle]
                await asyncio.wait(waiting, timeout=resend, return_when=asyncio.FIRST_COMPLETED)
                if idle.done() and not any(r.done() for r in sent.values()):
                    await asyncio.wait(
                        list(sent.values()), timeout=grace, return_when=asyncio.FIRST_COMPLETED
                    )
                for reply in sent.values():
                    if reply.done():
                        return reply.result()
                if idle.done():
                    return None
        finally:
            for msg_id, reply in sent.items():
                self._outputs.pop(msg_id, None)
                if not reply.done():
                    self._replies.pop(msg_id, None)
                    reply.cancel()

    async def outputs_ready(self, timeout: float = 30.0, resend: float = 0.5) -> None:
        """Wait until this link receives the kernel's IOPub messages.

        An IOPub subscription takes a moment to reach the kernel: what the kernel
        publishes before then is lost, so a cell run at once on channels just
        opened may lose its outputs and its closing ``idle`` status. This sends
        ``kernel_info_request`` (again every ``resend`` seconds) until one of
        them is seen going idle on IOPub.

        Raises:
            TimeoutError: Nothing came back within ``timeout`` seconds.
        """
        idle = asyncio.get_running_loop().create_future()

        def route(output: dict[str, Any]) -> None:
            if output["msg_type"] == "status" and not idle.done():
                idle.set_result(None)

        sent: list[str] = []
        try:
            async with asyncio.timeout(timeout):
                while not idle.done():
                    msg = self.client.session.msg("kernel_info_request", {})
                    sent.append(msg["header"]["msg_id"])
                    self._send(msg, on_output=route)
                    await asyncio.wait([idle], timeout=resend)
        finally:
            for msg_id in sent:
                self._outputs.pop(msg_id, None)
                reply = self._replies.pop(msg_id, None)
                if reply is not None and not reply.done():
                    reply.cancel()

    async def evaluate(self, expressions: dict[str, str]) -> dict[str, Any]:
        """Evaluate expressions in the kernel quietly: no execution count, no
        outputs to other clients, nothing left in the namespace.

        Returns:
            The ``user_expressions`` of the reply: per name, ``{"status": "ok",
            "data": {...}}`` or ``{"status": "error", "ename", "evalue"}``.
        """
        msg = self.client.session.msg(
            "execute_request",
            {
                "code": "",
                "silent": True,
                "store_history": False,
                "user_expressions": expressions,
                "allow_stdin": False,
                "stop_on_error": False,
            },
        )
        reply = await self._send(msg)
        result: dict[str, Any] = reply["content"].get("user_expressions") or {}
        return result

    async def execute(
        self, code: str, on_output: OutputHandler, user_expressions: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Run ``code``; every IOPub message it causes goes to ``on_output`` as it arrives.

        On channels just opened, await :meth:`outputs_ready` first: otherwise
        the outputs, and the ``idle`` this waits for, may be lost.

        Returns:
            The ``execute_reply`` content, once the kernel has also gone idle
            (so every output has been handed over).
        """
        idle = asyncio.get_running_loop().create_future()

        def route(output: dict[str, Any]) -> None:
            if output["msg_type"] == "status":
                if output["content"].get("execution_state") == "idle" and not idle.done():
                    idle.set_result(None)
                return
            on_output(output)

        msg = self.client.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": user_expressions or {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        try:
            reply = await self._send(msg, on_output=route)
            await idle
        finally:
            self._outputs.pop(msg["header"]["msg_id"], None)
            self._replies.pop(msg["header"]["msg_id"], None)
        content: dict[str, Any] = reply["content"]
        return content
