"""What a kernel's relay does for its clients while the kernel is hibernated.

While a kernel hibernates, its ports here stay bound (its relay,
:class:`.relay.KernelRelayClient`, keeps them) but no kernel is behind them.
:class:`StandIn` answers what is harmless to answer without the kernel, as a
kernel would, and holds the rest for the kernel that wakes:

- ``kernel_info_request``: the last ``kernel_info_reply`` the kernel sent
  (:func:`kernel_info_of` picks it out of the relayed replies);
- ``comm_info_request``: no comms; ``list_subshell_request``: none;
  ``create_subshell_request``, ``delete_subshell_request``: an error (the
  ``kernel_info_reply`` leaves out ``kernel subshells`` meanwhile); ``interrupt_request``, ``shutdown_request``:
  ``ok``; ``complete_request``, ``inspect_request``, ``is_complete_request``,
  ``history_request``: empty answers; ``debug_request``: a failed response;
- ``comm_open``, ``comm_msg``, ``comm_close`` and ``input_reply``: held for the
  kernel, without waking it (a front end opens comms when it connects);
- ``execute_request`` and anything else: held, and the kernel is woken.

Each answer is framed by IOPub ``busy`` and ``idle`` statuses with the request
as their parent, and signed with the kernel's key, so a client cannot tell it
from the kernel's own. :class:`HeartbeatEcho` answers heartbeats on the
kernel's heartbeat port meanwhile.

A kernel whose hardware ended for good (its SLURM job ended) is dead instead
(:meth:`StandIn.end`): IOPub says ``dead``, and every ``execute_request`` its
clients sent and the kernel never answered, or send from now on, is answered at
once with an error saying why and how to get a new kernel. So that the unanswered
ones are known, the relay tells the stand-in what it sends (:meth:`StandIn.sent`)
and what the kernel answers (:meth:`StandIn.replied`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import Session

from ..agent.relay_frames import CHANNELS

_DELIMITER = b"<IDS|MSG>"
_IOPUB = CHANNELS.index("iopub")
_SHELL = CHANNELS.index("shell")

#: The ``supported_features`` entry of kernels with subshells (JEP 91).
SUBSHELLS = "kernel subshells"

#: Requests held for the kernel without waking it.
QUIET = frozenset({"comm_open", "comm_msg", "comm_close", "input_reply"})

#: The ``kernel_info_reply`` content used before the kernel ever sent one.
DEFAULT_KERNEL_INFO: dict[str, Any] = {
    "status": "ok",
    "protocol_version": "5.3",
    "implementation": "ipython",
    "implementation_version": "",
    "banner": "",
    "help_links": [],
    "debugger": False,
    "language_info": {"name": "python", "mimetype": "text/x-python", "file_extension": ".py"},
}


def _header(parts: list[bytes], word: bytes) -> dict[str, Any] | None:
    """The header of a message (ZMQ parts) whose header mentions ``word``, else None
    (only then is it read)."""
    try:
        raw = parts[parts.index(_DELIMITER) + 2]
        header = json.loads(raw) if word in raw else None
    except (ValueError, IndexError):
        return None
    return header if isinstance(header, dict) else None


def kernel_info_of(parts: list[bytes]) -> bytes | None:
    """The content of a ``kernel_info_reply`` among a kernel's relayed messages, or None
    for any other message (only its header is read)."""
    try:
        at = parts.index(_DELIMITER)
        header = parts[at + 2]
        if b"kernel_info_reply" not in header:
            return None
        if json.loads(header).get("msg_type") != "kernel_info_reply":
            return None
        return bytes(parts[at + 5])
    except (ValueError, IndexError):
        return None


def _local_content(
    msg_type: str, content: dict[str, Any], kernel_info: dict[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The reply a hibernated kernel's stand-in sends to a request, or None."""
    if msg_type == "kernel_info_request":
        # No subshells while asleep: a front end that sees them asks for one as it
        # connects, which would wake the kernel only to open a notebook.
        features = [f for f in kernel_info.get("supported_features") or [] if f != SUBSHELLS]
        return "kernel_info_reply", {**kernel_info, "supported_features": features}
    if msg_type == "list_subshell_request":
        return "list_subshell_reply", {"status": "ok", "subshell_id": []}
    if msg_type in ("create_subshell_request", "delete_subshell_request"):
        return msg_type.replace("_request", "_reply"), {
            "status": "error",
            "ename": "KernelHibernated",
            "evalue": "the kernel is hibernated: subshells can be made once a cell wakes it",
            "traceback": [],
        }
    if msg_type == "comm_info_request":
        return "comm_info_reply", {"status": "ok", "comms": {}}
    if msg_type == "interrupt_request":
        return "interrupt_reply", {"status": "ok"}
    if msg_type == "shutdown_request":
        return "shutdown_reply", {"status": "ok", "restart": bool(content.get("restart"))}
    if msg_type == "complete_request":
        cursor = content.get("cursor_pos")
        cursor = cursor if isinstance(cursor, int) else 0
        return "complete_reply", {
            "status": "ok",
            "matches": [],
            "cursor_start": cursor,
            "cursor_end": cursor,
            "metadata": {},
        }
    if msg_type == "inspect_request":
        return "inspect_reply", {"status": "ok", "found": False, "data": {}, "metadata": {}}
    if msg_type == "is_complete_request":
        return "is_complete_reply", {"status": "unknown"}
    if msg_type == "history_request":
        return "history_reply", {"status": "ok", "history": []}
    if msg_type == "debug_request":
        return "debug_reply", {
            "type": "response",
            "request_seq": content.get("seq", 0),
            "success": False,
            "command": content.get("command", ""),
            "body": {},
            "message": "the kernel is hibernated: it wakes when a cell runs",
        }
    return None


class StandIn:
    """Answers a hibernated kernel's clients, and holds what only the kernel can answer.

    Args:
        kernel_id: The kernel.
        session: Signs messages with the kernel's key.
        sockets: The relay's client-facing sockets, by channel number.
        log: Where to log.
    """

    def __init__(
        self,
        kernel_id: str,
        session: Session,
        sockets: list[zmq.asyncio.Socket],
        log: logging.Logger,
    ) -> None:
        self.kernel_id = kernel_id
        self.session = session
        self.sockets = sockets
        self.log = log
        #: The last ``kernel_info_reply`` content the kernel sent (JSON), if any.
        self.kernel_info: bytes | None = None
        #: Requests held for the kernel, in arrival order: (channel, ZMQ parts, header).
        self.held: list[tuple[int, list[bytes], dict[str, Any]]] = []
        #: Called once when a held request should wake the kernel (see :meth:`arm`).
        self.on_wake: Callable[[], None] | None = None
        #: What to show in the next cell (see :meth:`note`), if anything.
        self.pending_note: str | None = None
        self._woken = False
        #: Why the kernel is dead (see :meth:`end`); None while it lives or sleeps.
        self.ended: str | None = None
        #: The ``execute_request``s sent to the kernel and not answered yet, by msg_id.
        self._unanswered: dict[str, tuple[int, list[bytes], dict[str, Any]]] = {}

    def sent(self, channel: int, parts: list[bytes]) -> None:
        """A client's request went to the kernel: an ``execute_request`` is kept until
        the kernel answers it."""
        header = _header(parts, b"execute_request") if channel == _SHELL else None
        if header is not None and header.get("msg_type") == "execute_request":
            self._unanswered[str(header.get("msg_id"))] = (channel, parts, header)

    def replied(self, parts: list[bytes]) -> None:
        """The kernel sent a reply (ZMQ parts): an ``execute_reply`` answers its request;
        a ``kernel_info_reply`` is what a client asking while the kernel is away gets."""
        info = kernel_info_of(parts)
        if info is not None:
            self.kernel_info = info
            return
        if _header(parts, b"execute_reply") is None:
            return
        with contextlib.suppress(ValueError, IndexError, TypeError, AttributeError):
            parent = json.loads(parts[parts.index(_DELIMITER) + 3])
            self._unanswered.pop(str(parent.get("msg_id")), None)

    def arm(self, on_wake: Callable[[], None] | None) -> None:
        """Call ``on_wake`` (once) the next time a request needs the kernel."""
        self.on_wake = on_wake
        self._woken = False

    async def handle(self, channel: int, parts: list[bytes]) -> None:
        """Answer one request from a client, or hold it (and wake the kernel when it
        needs the kernel). A message whose signature is wrong is dropped, as the
        kernel would drop it."""
        try:
            idents, rest = self.session.feed_identities(parts, copy=True)
            message = self.session.deserialize(rest, content=True, copy=True)
        except Exception as exc:  # noqa: BLE001 (a bad signature, not JSON, too few parts)
            self.log.warning(
                "kernel %s: a request that is not a valid message was dropped "
                "while the kernel hibernates: %s",
                self.kernel_id,
                exc,
            )
            return
        header = dict(message["header"])
        msg_type = str(header.get("msg_type", ""))
        content = message.get("content") or {}
        kernel_info = json.loads(self.kernel_info) if self.kernel_info else DEFAULT_KERNEL_INFO
        answer = _local_content(msg_type, content, kernel_info)
        if answer is not None:
            await self._answer(channel, idents, header, *answer)
            return
        if self.ended is not None:
            if msg_type == "execute_request":
                await self._refuse_dead(channel, idents, header)
            else:
                self.log.debug("kernel %s is dead: %s dropped", self.kernel_id, msg_type)
            return
        self.held.append((channel, parts, header))
        if msg_type in QUIET:
            return
        self.log.info(
            "kernel %s: %s arrived while it hibernates: waking it", self.kernel_id, msg_type
        )
        self._wake()

    def _wake(self) -> None:
        if self._woken or self.on_wake is None:
            return
        self._woken = True
        try:
            self.on_wake()
        except Exception:  # a bug of the caller must not stop the relay
            self.log.exception("kernel %s: waking it failed", self.kernel_id)

    def hold_first(self, requests: list[tuple[int, list[bytes]]]) -> None:
        """Hold ``requests`` (channel, ZMQ parts) before those held already: requests
        sent to a kernel that went before answering them."""
        ahead = []
        for channel, parts in requests:
            try:
                header = json.loads(parts[parts.index(_DELIMITER) + 2])
            except (ValueError, IndexError):
                continue
            ahead.append((channel, parts, dict(header)))
        self.held[:0] = ahead

    async def note(self, requests: list[tuple[int, list[bytes]]], text: str | None) -> None:
        """Show ``text`` on stderr in the cell of the first ``execute_request`` among
        ``requests`` (channel, ZMQ parts), as output of that cell before the kernel's own;
        when there is none, in the cell of the next one sent (:meth:`note_pending`)."""
        self.pending_note = text
        for channel, parts in requests:
            await self.note_pending(channel, parts)

    async def note_pending(self, channel: int, parts: list[bytes]) -> None:
        """Show the note waiting for a cell (:meth:`note`) in this request's cell, when it
        is an ``execute_request``."""
        if self.pending_note is None or channel != CHANNELS.index("shell"):
            return
        try:
            header = json.loads(parts[parts.index(_DELIMITER) + 2])
        except (ValueError, IndexError):
            return
        if isinstance(header, dict) and header.get("msg_type") == "execute_request":
            text, self.pending_note = self.pending_note, None
            await self._publish("stream", {"name": "stderr", "text": text}, header)

    def take(self) -> list[tuple[int, list[bytes]]]:
        """Every held request, in arrival order, and hold none any more."""
        held, self.held = self.held, []
        return [(channel, parts) for channel, parts, _ in held]

    async def refuse(self, reason: str, retry: bool = True) -> None:
        """The kernel could not be woken: answer each held ``execute_request`` with an
        error naming ``reason`` (and, with ``retry``, that running the cell again
        retries; without, ``reason`` says what to do); keep the other held requests for
        the next wake. The next request that needs the kernel wakes it again."""
        kept: list[tuple[int, list[bytes], dict[str, Any]]] = []
        for channel, parts, header in self.held:
            if header.get("msg_type") != "execute_request":
                kept.append((channel, parts, header))
                continue
            text = (
                f"The kernel is hibernated and could not be woken: {reason}. Its saved "
                "state is kept; run the cell again to retry."
                if retry
                else f"The kernel is hibernated and cannot be woken: {reason}."
            )
            await self._fail(channel, parts, header, "KernelWakeError", text)
        self.held = kept
        self._woken = False

    async def end(self, reason: str) -> None:
        """The kernel ended for good (its hardware ended): say ``dead`` on IOPub, and
        answer every ``execute_request`` that it never answered, held or sent to it, and
        every one to come, with an error saying ``reason`` and how to get a new kernel.
        Requests that only the kernel could answer are dropped; it never wakes."""
        self.ended = reason
        self.arm(None)
        held = {str(header.get("msg_id")) for _, _, header in self.held}
        unanswered = [r for msg_id, r in self._unanswered.items() if msg_id not in held]
        self._unanswered.clear()
        requests, self.held = unanswered + self.held, []
        await self._publish("status", {"execution_state": "dead"}, {})
        for channel, parts, header in requests:
            if header.get("msg_type") == "execute_request":
                idents, _ = self.session.feed_identities(parts, copy=True)
                await self._refuse_dead(channel, idents, header)

    async def restarted(self) -> None:
        """The kernel was started anew before it answered some ``execute_request``s sent
        to it: answer each with an error saying so."""
        requests = list(self._unanswered.values())
        self._unanswered.clear()
        text = (
            "The kernel restarted before it answered this cell: its variables are gone. "
            "Run the cell again."
        )
        for channel, parts, header in requests:
            await self._fail(channel, parts, header, "KernelRestarted", text)

    async def _fail(
        self, channel: int, parts: list[bytes], header: dict[str, Any], ename: str, text: str
    ) -> None:
        """Answer the ``execute_request`` ``parts`` with the error ``ename``: ``text``."""
        idents, _ = self.session.feed_identities(parts, copy=True)
        error = {"ename": ename, "evalue": text, "traceback": [text]}
        await self._answer(
            channel,
            idents,
            header,
            "execute_reply",
            {"status": "error", "execution_count": None, **error},
            output=("error", error),
        )

    async def _refuse_dead(self, channel: int, idents: list[bytes], parent: dict[str, Any]) -> None:
        """Answer an ``execute_request`` of a dead kernel with an error, and say ``dead``
        again with it as parent (Jupyter's listing takes the kernel's state from it)."""
        text = (
            f"The kernel is dead: {self.ended}. Its variables are lost: start a new "
            "kernel to run cells again."
        )
        error = {"ename": "KernelDead", "evalue": text, "traceback": [text]}
        await self._publish("error", error, parent)
        content = {"status": "error", "execution_count": None, **error}
        reply = self.session.msg("execute_reply", content, parent=parent)
        await self.sockets[channel].send_multipart(self.session.serialize(reply, ident=idents))
        await self._publish("status", {"execution_state": "dead"}, parent)

    async def _answer(
        self,
        channel: int,
        idents: list[bytes],
        parent: dict[str, Any],
        msg_type: str,
        content: dict[str, Any],
        output: tuple[str, dict[str, Any]] | None = None,
    ) -> None:
        """Send a reply to ``parent`` on ``channel``, with IOPub busy and idle around it
        (and ``output`` on IOPub before it)."""
        await self._publish("status", {"execution_state": "busy"}, parent)
        if output is not None:
            await self._publish(*output, parent)
        reply = self.session.msg(msg_type, content, parent=parent)
        await self.sockets[channel].send_multipart(self.session.serialize(reply, ident=idents))
        await self._publish("status", {"execution_state": "idle"}, parent)

    async def _publish(
        self, msg_type: str, content: dict[str, Any], parent: dict[str, Any]
    ) -> None:
        message = self.session.msg(msg_type, content, parent=parent)
        topic = f"kernel.{self.kernel_id}.{msg_type}".encode()
        await self.sockets[_IOPUB].send_multipart([topic, *self.session.serialize(message)])


class HeartbeatEcho:
    """Echoes heartbeats on a kernel's heartbeat port while no kernel is behind it.

    Args:
        context: The zmq context to use.
        port: The port on 127.0.0.1.
        log: Where to log.
    """

    def __init__(self, context: zmq.asyncio.Context, port: int, log: logging.Logger) -> None:
        self.port = port
        self.log = log
        self._socket = context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> bool:
        """Bind the port and echo; False (logged) when the port is taken."""
        try:
            self._socket.bind(f"tcp://127.0.0.1:{self.port}")
        except zmq.ZMQError as exc:
            self.log.warning(
                "heartbeat port %d cannot be answered while the kernel hibernates: %s",
                self.port,
                exc,
            )
            self._socket.close(linger=0)
            return False
        self._task = asyncio.ensure_future(self._echo())
        return True

    async def _echo(self) -> None:
        while True:
            await self._socket.send_multipart(await self._socket.recv_multipart())

    async def close(self) -> None:
        """Stop echoing and free the port."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._socket.close(linger=0)


__all__ = ["DEFAULT_KERNEL_INFO", "QUIET", "HeartbeatEcho", "StandIn", "kernel_info_of"]
