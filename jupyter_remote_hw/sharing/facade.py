"""A viewer's kernel endpoint: the owner's outputs live, and a clear refusal to run code.

A viewer's share reaches only the kernel's output stream. Jupyter still wants
five channels, so this facade binds them on 127.0.0.1: it republishes the
owner's IOPub messages as they come, answers ``kernel_info`` so that clients
see a ready kernel, and answers every request that would run or change
something with a "read-only share" error (shown in the cell, published on
IOPub and in the reply). A shutdown request only detaches: it is answered
here and never reaches the owner's kernel. Messages are unsigned (the viewer
has no key), so the key of the facade's connection info is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import Session

from ..agent.messaging import is_welcome

UPSTREAM_WAIT = 3.0
"""Seconds a viewer's kernel waits for the owner's kernel to welcome its subscription."""

REPLY_OK_EMPTY = {"comm_info_request": {"status": "ok", "comms": {}}}
"""Requests a frontend sends on its own, answered as if by an idle kernel."""


def read_only_message(owner: str) -> str:
    """The message a viewer gets for any attempt to run code."""
    return (
        f"read-only share: {owner} shared this kernel with you as a viewer. "
        "You see its outputs as they happen but cannot run code here; ask "
        f"{owner} for a collaborator share to run code."
    )


class ReadOnlyKernel:
    """The five channels of a viewer's kernel, on 127.0.0.1.

    Args:
        upstream_iopub: The local port that reaches the owner's IOPub (a forward).
        owner: Who shared the kernel.
        log: Where to log.
    """

    def __init__(
        self,
        upstream_iopub: int,
        owner: str,
        log: logging.Logger | None = None,
        on_detach: Callable[[], None] | None = None,
    ) -> None:
        self.upstream_iopub = upstream_iopub
        self.on_detach = on_detach
        self.message = read_only_message(owner)
        self.log = log or logging.getLogger(__name__)
        self.session = Session(key=b"", username="viewer")
        self.ports: dict[str, int] = {}
        self._context = zmq.asyncio.Context()
        self._sockets: list[zmq.asyncio.Socket] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._pub: zmq.asyncio.Socket | None = None
        self.implementation = "jupyter-remote-hw-viewer"

    def _bind(self, kind: int, name: str) -> zmq.asyncio.Socket:
        sock = self._context.socket(kind)
        sock.linger = 0
        self.ports[name] = sock.bind_to_random_port("tcp://127.0.0.1")
        self._sockets.append(sock)
        return sock

    async def start(self) -> None:
        """Bind every channel and start relaying and answering."""
        self._pub = self._bind(zmq.PUB, "iopub_port")
        shell = self._bind(zmq.ROUTER, "shell_port")
        control = self._bind(zmq.ROUTER, "control_port")
        self._bind(zmq.ROUTER, "stdin_port")
        heartbeat = self._bind(zmq.REP, "hb_port")
        upstream = self._context.socket(zmq.SUB)
        upstream.linger = 0
        upstream.setsockopt(zmq.SUBSCRIBE, b"")
        upstream.connect(f"tcp://127.0.0.1:{self.upstream_iopub}")
        self._sockets.append(upstream)
        await self._subscribed(upstream)
        self._tasks = [
            asyncio.create_task(self._relay(upstream)),
            asyncio.create_task(self._answer(shell)),
            asyncio.create_task(self._answer(control)),
            asyncio.create_task(self._echo(heartbeat)),
        ]

    def connection_info(self) -> dict[str, Any]:
        """Connection info for a Jupyter client of this facade."""
        return {
            "ip": "127.0.0.1",
            "transport": "tcp",
            "key": "",
            "signature_scheme": self.session.signature_scheme,
            **self.ports,
        }

    async def _subscribed(self, upstream: zmq.asyncio.Socket) -> None:
        """Wait until the owner's kernel has taken this side's subscription, so that
        the viewer misses nothing it prints from the moment the kernel reads ready.

        The kernel welcomes each subscriber (JEP 65); one that does not is taken
        as subscribed on its first output, or after :data:`UPSTREAM_WAIT` seconds.
        """
        assert self._pub is not None
        try:
            async with asyncio.timeout(UPSTREAM_WAIT):
                frames = await upstream.recv_multipart(copy=True)
        except TimeoutError:
            self.log.debug(
                "viewer facade: no welcome from the owner's kernel in %g s", UPSTREAM_WAIT
            )
            return
        if not is_welcome(frames):
            await self._pub.send_multipart(frames)

    async def _relay(self, upstream: zmq.asyncio.Socket) -> None:
        assert self._pub is not None
        while True:
            frames = await upstream.recv_multipart(copy=True)
            if not is_welcome(frames):  # another subscriber's, or ours again
                await self._pub.send_multipart(frames)

    async def _echo(self, heartbeat: zmq.asyncio.Socket) -> None:
        while True:
            await heartbeat.send(await heartbeat.recv())

    async def _publish(
        self, msg_type: str, content: dict[str, Any], parent: dict[str, Any]
    ) -> None:
        assert self._pub is not None
        msg = self.session.msg(msg_type, content, parent=parent)
        await self._pub.send_multipart(self.session.serialize(msg, ident=[msg_type.encode()]))

    async def _answer(self, sock: zmq.asyncio.Socket) -> None:
        async for _, idents, request in _requests(sock, self.session, self.log, "viewer facade"):
            msg_type = str(request["header"]["msg_type"])
            reply_type = msg_type.replace("_request", "_reply")
            await self._publish("status", {"execution_state": "busy"}, request)
            content = self._reply(msg_type, request)
            if msg_type == "execute_request":
                await self._publish(
                    "error", {k: content[k] for k in ("ename", "evalue", "traceback")}, request
                )
            reply = self.session.msg(reply_type, content, parent=request)
            await sock.send_multipart(self.session.serialize(reply, ident=idents))
            await self._publish("status", {"execution_state": "idle"}, request)

    def _reply(self, msg_type: str, request: dict[str, Any]) -> dict[str, Any]:
        if msg_type == "kernel_info_request":
            return {
                "status": "ok",
                "protocol_version": "5.3",
                "implementation": self.implementation,
                "implementation_version": "1",
                "language_info": {
                    "name": "python",
                    "mimetype": "text/x-python",
                    "file_extension": ".py",
                },
                "banner": self.message,
                "help_links": [],
            }
        if msg_type == "shutdown_request":
            # Detaching: the owner's kernel keeps running.
            if self.on_detach is not None:
                self.on_detach()
            return {"status": "ok", "restart": bool(request["content"].get("restart"))}
        if msg_type in REPLY_OK_EMPTY:
            return dict(REPLY_OK_EMPTY[msg_type])
        error: dict[str, Any] = {
            "status": "error",
            "ename": "ReadOnlyShare",
            "evalue": self.message,
            "traceback": [self.message],
        }
        if msg_type == "execute_request":
            error["execution_count"] = None
        return error

    async def close(self) -> None:
        """Stop relaying and answering; close every socket."""
        await _stop(self._tasks, self._sockets, self._context)


class ControlGuard:
    """A collaborator's control channel: relayed to the owner's kernel, except shutdown.

    Jupyter sends ``shutdown_request`` on the control channel when a kernel is
    shut down or restarted; for an attached kernel that means "detach", so it
    is answered here (signed with the kernel's key) and never reaches the
    owner's kernel. Every other control message (interrupt, debug) is relayed.

    Args:
        upstream_control: The local port that reaches the kernel's control port.
        key: The kernel's key.
        signature_scheme: How its messages are signed.
        on_detach: Called when a shutdown request is answered here.
    """

    def __init__(
        self,
        upstream_control: int,
        key: str,
        signature_scheme: str,
        on_detach: Callable[[], None] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.upstream_control = upstream_control
        self.session = Session(
            key=key.encode(), signature_scheme=signature_scheme, username="collaborator"
        )
        self.on_detach = on_detach
        self.log = log or logging.getLogger(__name__)
        self.port = 0
        self._context = zmq.asyncio.Context()
        self._sockets: list[zmq.asyncio.Socket] = []
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Bind the local control port and start relaying."""
        front = self._context.socket(zmq.ROUTER)
        front.linger = 0
        self.port = front.bind_to_random_port("tcp://127.0.0.1")
        back = self._context.socket(zmq.DEALER)
        back.linger = 0
        back.connect(f"tcp://127.0.0.1:{self.upstream_control}")
        self._sockets = [front, back]
        self._tasks = [
            asyncio.create_task(self._forward(front, back)),
            asyncio.create_task(self._backward(back, front)),
        ]

    async def _forward(self, front: zmq.asyncio.Socket, back: zmq.asyncio.Socket) -> None:
        async for frames, idents, request in _requests(
            front, self.session, self.log, "control guard"
        ):
            if request["header"]["msg_type"] == "shutdown_request":
                content = {"status": "ok", "restart": bool(request["content"].get("restart"))}
                reply = self.session.msg("shutdown_reply", content, parent=request)
                await front.send_multipart(self.session.serialize(reply, ident=idents))
                if self.on_detach is not None:
                    self.on_detach()
                continue
            await back.send_multipart(frames)

    async def _backward(self, back: zmq.asyncio.Socket, front: zmq.asyncio.Socket) -> None:
        while True:
            await front.send_multipart(await back.recv_multipart(copy=True))

    async def close(self) -> None:
        """Stop relaying; close the sockets."""
        await _stop(self._tasks, self._sockets, self._context)


async def _stop(tasks: list[asyncio.Task[None]], sockets: list[Any], context: Any) -> None:
    """Cancel the relaying tasks and wait for them; close the sockets and their context."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for sock in sockets:
        sock.close(linger=0)
    context.term()


async def _requests(
    sock: zmq.asyncio.Socket, session: Any, log: logging.Logger, who: str
) -> AsyncIterator[tuple[list[bytes], list[bytes], dict[str, Any]]]:
    """Each message arriving on ``sock``: its frames, routing identities and parsed request.

    A message that cannot be read (or whose signature fails) is dropped and logged.
    """
    while True:
        frames = await sock.recv_multipart(copy=True)
        try:
            idents, rest = session.feed_identities(frames, copy=True)
            request = session.deserialize(rest, content=True, copy=True)
        except (ValueError, KeyError, TypeError) as exc:
            log.debug("%s: unreadable message dropped (%s)", who, exc)
            continue
        yield frames, idents, request
