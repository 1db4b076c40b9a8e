"""Our side of a kernel's relay: the ZMQ ports Jupyter clients use, and one stream to the host.

Clients connect to ports on 127.0.0.1 here as to any kernel: ROUTER sockets
for shell, control and stdin, a PUB socket for IOPub. What they send is
numbered and kept until the host's relay (:mod:`.agent.relay`) acknowledges
it; what the kernel sends arrives numbered over the stream, is handed to the
clients, and is acknowledged. When the stream breaks (the link is cut), the
ports stay open and keep what clients send; a new stream resumes from the
last message each side received, so nothing is lost or repeated however long
the link was down.

A relay also outlives its kernel while the kernel hibernates (see
:mod:`..hibernation`): :meth:`KernelRelayClient.hold` starts answering and holding
the requests of the clients connected so far (:class:`.sleeping.StandIn`) while
new clients (the save's or the restore's transfer client) still reach the
kernel; :meth:`~KernelRelayClient.sleep` ends the stream to the host, the ports
staying bound; :meth:`~KernelRelayClient.wake` opens a stream to the new kernel;
:meth:`~KernelRelayClient.release` hands the held requests to it, in their order.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import Session

from ..agent.relay_frames import (
    ACK,
    CHANNELS,
    AckSender,
    encode_data,
    read_frame,
)
from .sleeping import HeartbeatEcho, StandIn

StreamOpener = Callable[[], Awaitable[tuple[Any, Any]]]
"""Opens a new byte stream to the host agent's socket: a reader and a writer."""

#: Seconds between attempts to reopen a broken stream, growing to the last.
RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)

#: Bytes of client requests kept here while the host has not acknowledged them
#: (the link is down). Beyond this, the relay stops reading from clients: their
#: requests wait in their own queues, and a client whose queue is full blocks,
#: as against a busy kernel. Nothing is dropped.
REQUEST_LIMIT = 64 * 1024 * 1024

#: Client identities remembered, so that those connected when a kernel starts to
#: hibernate are held until it is back (the oldest are forgotten beyond this).
KNOWN_CLIENTS = 4096

_REPLIES = (CHANNELS.index("shell"), CHANNELS.index("control"))


class RelayRefusedError(Exception):
    """The host's agent refused the relay (the kernel is gone there)."""


class KernelRelayClient:
    """Binds a kernel's client-facing ports here and relays them through the host.

    IOPub is an XPUB socket that welcomes each new subscriber as ipykernel's
    does (JEP 65), since subscriptions end here and never reach the kernel.

    Args:
        kernel_id: The kernel.
        connection: The kernel's connection info (its key signs the welcomes).
        open_stream: Opens a stream to the host's agent (waiting for the link).
        log: Where to log.
        limit: Bytes the host's relay keeps while this side is away.
        request_limit: Bytes of client requests kept here while the host has not
            acknowledged them (see :data:`REQUEST_LIMIT`).
    """

    def __init__(
        self,
        kernel_id: str,
        connection: dict[str, Any],
        open_stream: StreamOpener,
        log: logging.Logger | None = None,
        limit: int = 0,
        request_limit: int = REQUEST_LIMIT,
    ) -> None:
        self.kernel_id = kernel_id
        self._session = Session(
            key=str(connection.get("key", "")).encode(),
            signature_scheme=str(connection.get("signature_scheme", "hmac-sha256")),
        )
        self.log = log or logging.getLogger(__name__)
        self.limit = limit
        self._open_stream = open_stream
        self._context = zmq.asyncio.Context()
        self._sockets: list[zmq.asyncio.Socket] = []
        self.ports: dict[str, int] = {}
        self._epoch = uuid.uuid4().hex
        self._host_epoch: str | None = None
        self._received = 0
        self._kept: collections.deque[tuple[int, int, list[bytes]]] = collections.deque()
        self._kept_bytes = 0
        self.request_limit = request_limit
        self._room = asyncio.Event()
        self._room.set()
        self._seq = 0
        self._sent = 0
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._attach: asyncio.Task[None] | None = None
        self._closed = False
        self._stand_in = StandIn(kernel_id, self._session, self._sockets, self.log)
        self._clients: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self._held_clients: set[bytes] = set()
        self._holding = False
        self._asleep = False
        self._heartbeat: HeartbeatEcho | None = None

    async def start(self, wanted: dict[str, int] | None = None) -> dict[str, int]:
        """Bind the ports (``wanted`` ones where free) and start relaying.

        Returns:
            The bound ports by connection key (``shell_port``, ...).
        """
        wanted = wanted or {}
        for name in CHANNELS:
            sock = self._context.socket(zmq.XPUB if name == "iopub" else zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 0)
            # Messages libzmq reads ahead per client while this side reads none
            # (over the request limit): then the client itself waits.
            sock.setsockopt(zmq.RCVHWM, 64)
            if name == "iopub":
                sock.setsockopt(zmq.XPUB_VERBOSE, 1)  # every client's subscription, welcomed
            else:
                # A client reconnecting under its identity replaces its old connection.
                sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
            port = wanted.get(f"{name}_port", 0)
            bound = False
            if port:
                with contextlib.suppress(zmq.ZMQError):
                    sock.bind(f"tcp://127.0.0.1:{port}")
                    bound = True
            if not bound:
                port = sock.bind_to_random_port("tcp://127.0.0.1")
            self.ports[f"{name}_port"] = port
            self._sockets.append(sock)
        for channel, name in enumerate(CHANNELS):
            reader = self._welcome if name == "iopub" else self._read_clients
            self._tasks.append(asyncio.create_task(reader(channel)))
        self._attach = asyncio.create_task(self._keep_attached())
        return dict(self.ports)

    # ------------------------------------------------------------------ clients

    async def _read_clients(self, channel: int) -> None:
        sock = self._sockets[channel]
        while True:
            if not self._room.is_set():
                self.log.warning(
                    "kernel %s: %d MiB of requests wait for the link to the host; "
                    "clients wait until it is back",
                    self.kernel_id,
                    self._kept_bytes >> 20,
                )
                await self._room.wait()
            parts = await sock.recv_multipart()
            client = parts[0]
            if self._holding and (self._asleep or client in self._held_clients):
                self._held_clients.add(client)
                await self._stand_in.handle(channel, parts)
                continue
            if not self._holding:
                self._remember(client)
            await self._stand_in.note_pending(channel, parts)
            self._keep(channel, parts)

    def _remember(self, client: bytes) -> None:
        self._clients[client] = None
        self._clients.move_to_end(client)
        if len(self._clients) > KNOWN_CLIENTS:
            self._clients.popitem(last=False)

    def _keep(self, channel: int, parts: list[bytes]) -> None:
        """Number a client's request and keep it until the host acknowledges it."""
        self._seq += 1
        self._kept.append((self._seq, channel, parts))
        self._stand_in.sent(channel, parts)
        self._kept_bytes += sum(len(p) for p in parts)
        if self._kept_bytes >= self.request_limit:
            self._room.clear()
        self._wake.set()

    async def _welcome(self, channel: int) -> None:
        sock = self._sockets[channel]
        while True:
            for frame in await sock.recv_multipart():
                if frame[:1] != b"\x01":
                    continue  # an unsubscription
                topic = frame[1:]
                message = self._session.msg(
                    "iopub_welcome", {"subscription": topic.decode(errors="replace")}
                )
                parts = self._session.serialize(message)
                await sock.send_multipart([topic, *parts] if topic else parts)

    # ------------------------------------------------------------------ the host

    async def _keep_attached(self) -> None:
        """Open a stream to the host's relay; open a new one whenever it breaks."""
        failures = 0
        while not self._closed:
            try:
                reader, writer = await self._open_stream()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (the link is down: try again)
                delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                failures += 1
                self.log.debug(
                    "kernel %s: relay stream not opened (%s); again in %.1f s",
                    self.kernel_id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            sender: asyncio.Task[None] | None = None
            try:
                # The attach line and what is kept go out together, without
                # waiting for the answer: the host drops what it already has.
                self._send_attach(writer)
                sender = asyncio.create_task(self._send_kept(writer))
                await self._read_answer(reader)
                failures = 0
                await self._receive(reader, writer)
            except RelayRefusedError as exc:
                self.log.warning("kernel %s: the host refused its relay: %s", self.kernel_id, exc)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (asyncssh's, OSError, EOF, bad frames)
                self.log.debug("kernel %s: relay stream broke: %r", self.kernel_id, exc)
            finally:
                # Closed before anything is awaited: a close() of the relay cancels this
                # task, also here, and the stream must not outlive it.
                writer.close()
                if sender is not None:
                    sender.cancel()
                    await asyncio.gather(sender, return_exceptions=True)
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            if not self._closed:
                self.log.info(
                    "kernel %s: relay stream to the host closed; reopening", self.kernel_id
                )
                await asyncio.sleep(RETRY_DELAYS[0])

    def _send_attach(self, writer: Any) -> None:
        request = {
            "id": 1,
            "op": "relay",
            "args": {
                "kernel_id": self.kernel_id,
                "near": self._epoch,
                "epoch": self._host_epoch,
                "received": self._received,
                "limit": self.limit,
            },
        }
        writer.write(json.dumps(request).encode() + b"\n")
        self._sent = 0  # everything still kept goes again on this stream
        self._wake.set()

    async def _read_answer(self, reader: Any) -> None:
        line = await reader.readline()
        if not line:
            raise EOFError("the agent closed the stream before answering")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise RelayRefusedError(str(answer.get("error")))
        result = answer["result"]
        if self._host_epoch is not None and result["epoch"] != self._host_epoch:
            self.log.warning(
                "kernel %s: the host's agent was restarted; output the kernel sent while it "
                "was down and our side was away may be missing",
                self.kernel_id,
            )
        if result["epoch"] != self._host_epoch:
            self._received = 0  # a new relay numbers from 1
        self._host_epoch = str(result["epoch"])
        self._forget_upto(int(result["received"]))

    def _forget_upto(self, seq: int) -> None:
        """The host has everything up to ``seq``: stop keeping it."""
        while self._kept and self._kept[0][0] <= seq:
            _, _, parts = self._kept.popleft()
            self._kept_bytes -= sum(len(p) for p in parts)
        if self._kept_bytes < self.request_limit:
            self._room.set()

    async def _send_kept(self, writer: Any) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            for seq, channel, parts in list(self._kept):
                if seq <= self._sent:
                    continue
                writer.write(encode_data(channel, seq, parts))
                self._sent = seq
                await writer.drain()

    async def _receive(self, reader: Any, writer: Any) -> None:
        acks = AckSender(writer, lambda: self._received)

        while True:
            try:
                frame = await read_frame(reader)
            except asyncio.IncompleteReadError as exc:
                raise EOFError("the relay stream ended") from exc
            if frame.kind == ACK:
                self._forget_upto(frame.seq)
                continue
            if frame.seq <= self._received:
                continue
            if frame.channel in _REPLIES:
                self._stand_in.replied(frame.parts)
            await self._sockets[frame.channel].send_multipart(frame.parts)
            self._received = frame.seq
            acks.schedule()

    # ------------------------------------------------------------------ hibernation

    @property
    def holding(self) -> bool:
        """Whether the requests of the clients connected before :meth:`hold` are held."""
        return self._holding

    @property
    def asleep(self) -> bool:
        """Whether the relay has no stream to a kernel (:meth:`sleep`)."""
        return self._asleep

    @property
    def kernel_info(self) -> bytes | None:
        """The content (JSON) of the last ``kernel_info_reply`` the kernel sent; what a
        client asking while the kernel hibernates is answered."""
        return self._stand_in.kernel_info

    @kernel_info.setter
    def kernel_info(self, content: bytes | None) -> None:
        self._stand_in.kernel_info = content

    @property
    def held(self) -> int:
        """How many requests are held for the kernel."""
        return len(self._stand_in.held)

    def hold(self, on_wake: Callable[[], None] | None) -> None:
        """From now on, answer the requests of every client seen so far here where that
        is harmless, and hold the others (see :mod:`.sleeping`); call ``on_wake`` once
        when a held request needs the kernel. Clients that connect later still reach
        the kernel while there is one (a save's or a restore's transfer client)."""
        if not self._holding:
            self._held_clients = set(self._clients)
            self._holding = True
        self._stand_in.arm(on_wake)

    async def sleep(self) -> None:
        """End the stream to the host, for good: the kernel is about to go. The ports
        stay; every client's requests are answered or held from now on.

        Requests of held clients that the host has not acknowledged are held again
        for the next kernel, in their order; the host's numbering is forgotten (the
        next kernel has a relay of its own).
        """
        if not self._holding:
            self.hold(self._stand_in.on_wake)
        self._asleep = True
        if self._attach is not None:
            self._attach.cancel()
            await asyncio.gather(self._attach, return_exceptions=True)
            self._attach = None
        unacked = [
            (channel, parts) for _, channel, parts in self._kept if parts[0] in self._held_clients
        ]
        self._stand_in.hold_first(unacked)
        self._forget_host()

    def _forget_host(self) -> None:
        """Drop what is kept for the host's relay and its numbering: the next stream goes
        to a new kernel's relay."""
        self._kept.clear()
        self._kept_bytes = 0
        self._room.set()
        self._host_epoch = None
        self._received = 0
        self._sent = 0

    @property
    def attached(self) -> bool:
        """Whether it relays to the host, or keeps trying to; False once the host refused
        it (the kernel was gone there) and after :meth:`sleep` or :meth:`close`."""
        return self._attach is not None and not self._attach.done()

    async def attach_again(self) -> None:
        """Relay to the host's kernel again after the host refused it: a restart started
        the kernel anew while the relay found none there.

        What was kept for the kernel that ended is dropped, as a restart drops what was
        queued for the old process (a restart's own ``shutdown_request`` would otherwise
        end the new one), and each cell it never answered gets an error saying so.
        """
        if self._closed or self._asleep or self.attached:
            return
        self._forget_host()
        await self._stand_in.restarted()
        self._attach = asyncio.create_task(self._keep_attached())

    async def echo_heartbeats(self, port: int) -> None:
        """Answer heartbeats on ``port`` (the kernel's, here) while asleep."""
        if self._heartbeat is None and port:
            echo = HeartbeatEcho(self._context, port, self.log)
            if echo.start():
                self._heartbeat = echo

    async def _stop_heartbeats(self) -> None:
        if self._heartbeat is not None:
            await self._heartbeat.close()
            self._heartbeat = None

    async def wake(self, open_stream: StreamOpener) -> None:
        """Relay to a new kernel through ``open_stream`` (a new host relay: its numbering
        starts again). Held requests stay held until :meth:`release`, so that the
        restore reaches the kernel first."""
        await self._stop_heartbeats()
        if self._attach is not None:
            self._attach.cancel()
            await asyncio.gather(self._attach, return_exceptions=True)
        self._open_stream = open_stream
        self._asleep = False
        self._attach = asyncio.create_task(self._keep_attached())

    async def release(self, notice: str | None = None) -> None:
        """Hand the held requests to the kernel in their order, each from its client,
        and stop holding; ``notice`` is shown in the cell of the first held
        ``execute_request``, else of the next one (see :meth:`.sleeping.StandIn.note`).

        Raises:
            RuntimeError: The relay is asleep (no kernel to hand them to).
        """
        if self._asleep:
            raise RuntimeError(f"kernel {self.kernel_id}: no kernel to release requests to")
        held = self._stand_in.take()
        await self._stand_in.note(held, notice)
        for channel, parts in held:
            self._keep(channel, parts)
        self._holding = False
        self._held_clients.clear()
        self._stand_in.arm(None)

    async def refuse_held(self, reason: str, retry: bool = True, dead: bool = False) -> None:
        """The kernel could not be woken: each held ``execute_request`` gets an error
        reply saying ``reason`` (and, with ``retry``, that running the cell again
        retries); the next request that needs the kernel wakes it again. ``dead``: it
        ended for good, and so do the cells it never answered (:meth:`.sleeping.StandIn.end`)."""
        await (self._stand_in.end(reason) if dead else self._stand_in.refuse(reason, retry))

    async def close(self) -> None:
        """Stop relaying and close the ports (the host's relay keeps what is unsent)."""
        self._closed = True
        await self._stop_heartbeats()
        if self._attach is not None:
            self._tasks.append(self._attach)
            self._attach = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for sock in self._sockets:
            sock.close(linger=0)
        self._context.destroy(linger=0)
