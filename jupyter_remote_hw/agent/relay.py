"""The host side of kernel relays: each kernel's messages, kept until our side has them.

A relay connects to its kernel's shell, control and stdin ports (DEALER
sockets sharing one routing identity, so that input requests find their way
back) and to its IOPub port (SUB). Everything the kernel sends is numbered and
kept until the Jupyter server's side acknowledges it; what that side sends is
delivered to the kernel exactly once, in order. A stream from that side
attaches with the last number it received, and the relay resends from there:
a link cut of any length loses nothing (mosh's model).

What is kept is bounded per kernel. When a long cut overflows the bound, the
oldest output (IOPub messages other than status) is dropped, and one notice in
its place tells the user on stderr how much, in the cell that lost it.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from .connection import channel_url
from .messaging import DELIMITER, PROTOCOL_VERSION, Signer, is_welcome
from .protocol import BAD_REQUEST, AgentError
from .relay_frames import (
    ACK,
    CHANNELS,
    AckSender,
    RelayProtocolError,
    encode_data,
    read_frame,
)
from .zmqcompat import zmq_module

if TYPE_CHECKING:
    import zmq.asyncio

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 256 * 1024 * 1024
"""Bytes of unacknowledged kernel messages a relay keeps by default."""

SUBSCRIBE_WAIT = 1.0
"""Seconds the first request waits for the kernel's IOPub to reach a new relay."""

_IOPUB = CHANNELS.index("iopub")
_MIB = 1024 * 1024


class _Entry:
    """One kernel message waiting for our side's acknowledgement."""

    __slots__ = ("channel", "dropped", "dropped_bytes", "parent", "parts", "seq", "size")

    def __init__(self, seq: int, channel: int, parts: list[bytes] | None) -> None:
        self.seq = seq
        self.channel = channel
        self.parts = parts
        self.size = sum(len(p) for p in parts) if parts else 0
        # A notice (parts None): how many messages it stands for, and their cell.
        self.dropped = 0
        self.dropped_bytes = 0
        self.parent = b"{}"


def _droppable(entry: _Entry) -> bool:
    """Output that may go when the relay overflows: IOPub, but never a status."""
    if entry.channel != _IOPUB or entry.parts is None:
        return False
    try:
        header = entry.parts[entry.parts.index(DELIMITER) + 2]
        return bool(json.loads(header).get("msg_type") != "status")
    except (ValueError, IndexError, AttributeError):
        return False


def _parent_of(parts: list[bytes]) -> bytes:
    try:
        return parts[parts.index(DELIMITER) + 3]
    except (ValueError, IndexError):
        return b"{}"


class KernelRelay:
    """Relays one kernel's messages between its ports and our side's streams.

    Args:
        kernel_id: The kernel.
        connection: Its connection dict (where its channels are, key, scheme).
        context: The agent's zmq asyncio context.
        limit: Bytes of unacknowledged messages kept before output is dropped.
    """

    def __init__(
        self,
        kernel_id: str,
        connection: dict[str, Any],
        context: zmq.asyncio.Context,
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        self.kernel_id = kernel_id
        self.connection = connection
        self.limit = limit
        self.epoch = uuid.uuid4().hex
        self._signer = Signer(
            str(connection.get("key", "")).encode(),
            str(connection.get("signature_scheme", "hmac-sha256")),
        )
        self._kept: collections.deque[_Entry] = collections.deque()
        self._kept_bytes = 0
        self._seq = 0
        self._sent = 0
        self._received = 0
        self._acked = 0
        self._near_epoch: str | None = None
        self._notice: _Entry | None = None
        self._wake = asyncio.Event()
        self._subscribed = asyncio.Event()
        self._link: asyncio.StreamWriter | None = None
        self._link_task: asyncio.Future[None] | None = None
        self._context = context
        self._process = 0
        """How many times the kernel's process was replaced (see :meth:`new_process`)."""
        self._sockets: list[Any] = []
        self._readers: list[asyncio.Future[None]] = []
        self._open_kernel_sockets()

    # ------------------------------------------------------------------ kernel side

    def _open_kernel_sockets(self) -> None:
        """Connect to the kernel's channels and read them."""
        zmq = zmq_module
        identity = ("relay-" + uuid.uuid4().hex).encode()
        self._sockets = []
        for name in CHANNELS:
            kind = zmq.SUB if name == "iopub" else zmq.DEALER
            sock = self._context.socket(kind)
            sock.setsockopt(zmq.LINGER, 0)
            # Our own bound, not libzmq's, decides what is dropped.
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.SNDHWM, 0)
            if kind == zmq.SUB:
                sock.setsockopt(zmq.SUBSCRIBE, b"")
            else:
                sock.setsockopt(zmq.IDENTITY, identity)
            sock.connect(channel_url(self.connection, name + "_port"))
            self._sockets.append(sock)
        self._readers = [asyncio.ensure_future(self._read_kernel(i)) for i in range(len(CHANNELS))]

    async def _close_kernel_sockets(self) -> None:
        for task in self._readers:
            task.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        for sock in self._sockets:
            sock.close(linger=0)

    async def new_process(self) -> None:
        """The kernel's process is being replaced on the same ports (a restart): what our
        side sent to the old one and is still here (a restart's own ``shutdown_request``,
        sent to a process that had died, held by libzmq or waiting for the old process's
        IOPub) is dropped, not handed to the new one, which it would end at once. What
        the old one said is kept."""
        log.info(
            "kernel %s: a new process; what was sent to the old one is dropped", self.kernel_id
        )
        self._process += 1
        await self._close_kernel_sockets()
        self._subscribed.clear()  # the new process's IOPub, before the next request
        self._open_kernel_sockets()

    async def _read_kernel(self, channel: int) -> None:
        sock = self._sockets[channel]
        while True:
            parts = await sock.recv_multipart()
            self._keep(channel, parts)

    def _keep(self, channel: int, parts: list[bytes]) -> None:
        if channel == _IOPUB:
            self._subscribed.set()
            if is_welcome(parts):
                return  # the kernel welcoming this relay; our side welcomes its own clients
        self._seq += 1
        entry = _Entry(self._seq, channel, parts)
        self._kept.append(entry)
        self._kept_bytes += entry.size
        if self._kept_bytes > self.limit:
            self._drop_oldest_output()
        self._wake.set()

    def _drop_oldest_output(self) -> None:
        """Drop the oldest output until a tenth of the bound is free again."""
        target = self.limit * 9 // 10
        kept: collections.deque[_Entry] = collections.deque()
        notice = self._notice
        while self._kept:
            entry = self._kept.popleft()
            if self._kept_bytes <= target or not _droppable(entry):
                kept.append(entry)
                continue
            self._kept_bytes -= entry.size
            assert entry.parts is not None
            if notice is None or notice.seq <= self._acked:
                # The notice takes the first dropped message's place (and number).
                notice = _Entry(entry.seq, _IOPUB, None)
                notice.parent = _parent_of(entry.parts)
                kept.append(notice)
                log.warning(
                    "kernel %s: over the relay's %d MiB while our side is away: "
                    "dropping the oldest output",
                    self.kernel_id,
                    self.limit // _MIB,
                )
            notice.dropped += 1
            notice.dropped_bytes += entry.size
        self._kept = kept
        self._notice = notice

    def _notice_parts(self, notice: _Entry) -> list[bytes]:
        text = (
            f"[jupyter-remote-hw] {notice.dropped_bytes / _MIB:.1f} MiB of output "
            f"({notice.dropped} messages) was dropped while the link to this kernel's host "
            f"was down: more than the {self.limit // _MIB} MiB the host keeps "
            "(c.Provider.relay_buffer_mib).\n"
        )
        header = json.dumps(
            {
                "msg_id": uuid.uuid4().hex,
                "msg_type": "stream",
                "username": "jupyter-remote-hw",
                "session": self.epoch,
                "version": PROTOCOL_VERSION,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            }
        ).encode()
        frames = [
            header,
            notice.parent,
            b"{}",
            json.dumps({"name": "stderr", "text": text}).encode(),
        ]
        topic = f"kernel.{self.kernel_id}.stream".encode()
        return [topic, DELIMITER, self._signer.sign(frames), *frames]

    def _forget_upto(self, seq: int) -> None:
        self._acked = max(self._acked, seq)
        while self._kept and self._kept[0].seq <= seq:
            self._kept_bytes -= self._kept.popleft().size

    # ------------------------------------------------------------------ our side

    async def attach(
        self,
        args: dict[str, Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answer: Any,
    ) -> None:
        """Serve one stream from our side until it ends or a newer one attaches.

        Args:
            args: The attach request's arguments: ``near`` (our side's epoch),
                ``epoch`` (this relay's epoch as our side knows it, or none) and
                ``received`` (the last message number our side got from it).
            reader: The stream's read side, positioned after the request line.
            writer: The stream's write side.
            answer: Coroutine function that writes the attach answer line.
        """
        near = str(args.get("near") or "")
        if near != self._near_epoch:
            # Another process on our side: its numbering starts again at 1.
            self._near_epoch = near
            self._received = 0
        received = args.get("received")
        if args.get("epoch") != self.epoch or not isinstance(received, int):
            received = 0  # it never heard from this relay: send everything kept
        self._forget_upto(received)
        if self._link is not None:
            # The newest stream wins; the old one is dead or dying, and closing it
            # politely would wait for its peer to read what it still holds.
            self._link.transport.abort()
        if self._link_task is not None:
            self._link_task.cancel()
            await asyncio.gather(self._link_task, return_exceptions=True)
        self._link = writer
        self._sent = received
        await answer({"epoch": self.epoch, "received": self._received})
        sender = asyncio.ensure_future(self._send_kept(writer))
        self._link_task = sender
        self._wake.set()
        try:
            await self._read_link(reader, writer)
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
            if self._link is writer:
                self._link = None
            writer.close()

    async def _send_kept(self, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                for entry in list(self._kept):
                    if entry.seq <= self._sent:
                        continue
                    parts = entry.parts if entry.parts is not None else self._notice_parts(entry)
                    writer.write(encode_data(entry.channel, entry.seq, parts))
                    self._sent = entry.seq
                    await writer.drain()
        except (ConnectionError, OSError):
            writer.close()

    async def _read_link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        acks = AckSender(writer, lambda: self._received)
        while True:
            try:
                frame = await read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                return
            except RelayProtocolError as exc:
                log.warning("kernel %s: relay stream closed: %s", self.kernel_id, exc)
                return
            if frame.kind == ACK:
                self._forget_upto(frame.seq)
                continue
            if frame.seq <= self._received:
                continue  # sent again after a reconnect: delivered already
            if frame.channel == _IOPUB:
                continue  # nothing is sent to a kernel's IOPub
            self._received = frame.seq
            process = self._process
            if not self._subscribed.is_set():
                await self._wait_subscribed()
            if process == self._process:  # else it was for a process that is gone
                await self._sockets[frame.channel].send_multipart(frame.parts)
            acks.schedule()

    async def _wait_subscribed(self) -> None:
        """Hold the first request until the kernel's IOPub reaches this relay.

        A request delivered before the subscription would have its busy and
        idle status published to nobody. A kernel that welcomes subscribers
        (JEP 65) says when; for one that does not, any output or a short wait
        has to do.
        """
        try:
            async with asyncio.timeout(SUBSCRIBE_WAIT):
                await self._subscribed.wait()
        except TimeoutError:
            self._subscribed.set()

    async def close(self) -> None:
        """Stop relaying: close the stream, the kernel sockets, and forget what is kept."""
        if self._link is not None:
            self._link.transport.abort()
        if self._link_task is not None:
            self._link_task.cancel()
            await asyncio.gather(self._link_task, return_exceptions=True)
        await self._close_kernel_sockets()
        self._kept.clear()


class KernelRelays:
    """The agent's relays, one per kernel, made when our side first attaches.

    Args:
        context: The agent's zmq asyncio context (None without pyzmq).
        connection_of: The connection dict of a kernel by id; raises
            :class:`AgentError` for an unknown kernel.
    """

    def __init__(self, context: zmq.asyncio.Context | None, connection_of: Any) -> None:
        self._context = context
        self._connection_of = connection_of
        self._relays: dict[str, KernelRelay] = {}

    async def attach(
        self,
        args: dict[str, Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        answer: Any,
    ) -> None:
        """Serve a ``relay`` stream (see :meth:`KernelRelay.attach`).

        Raises:
            AgentError: An unknown kernel, or no pyzmq on this host.
        """
        kernel_id = args.get("kernel_id")
        if not isinstance(kernel_id, str):
            raise AgentError(BAD_REQUEST, "relay: 'kernel_id' must be a string")
        connection = self._connection_of(kernel_id)
        relay = self._relays.get(kernel_id)
        if relay is not None and relay.connection != connection:
            # A kernel started again under the same id (woken from hibernation) has
            # channels of its own: the old relay's sockets lead nowhere.
            log.info("kernel %s: a new process, so a new relay", kernel_id)
            await self.drop(kernel_id)
            relay = None
        if relay is None:
            if self._context is None:
                raise AgentError(BAD_REQUEST, "relay: pyzmq is not importable on this host")
            limit = args.get("limit")
            relay = KernelRelay(
                kernel_id,
                connection,
                self._context,
                limit if isinstance(limit, int) and limit > 0 else DEFAULT_LIMIT,
            )
            self._relays[kernel_id] = relay
        await relay.attach(args, reader, writer, answer)

    async def new_process(self, kernel_id: str) -> None:
        """The kernel's process is being replaced on the same ports (see
        :meth:`KernelRelay.new_process`)."""
        relay = self._relays.get(kernel_id)
        if relay is not None:
            await relay.new_process()

    async def drop(self, kernel_id: str) -> None:
        """The kernel ended: close its relay."""
        relay = self._relays.pop(kernel_id, None)
        if relay is not None:
            await relay.close()

    async def close(self) -> None:
        """Close every relay (the agent is stopping)."""
        for kernel_id in list(self._relays):
            await self.drop(kernel_id)
