"""The kernel side of a transfer's bulk stream: connections for one transfer's bytes.

A large transfer's bytes do not go through the kernel's shell channel, where
each chunk is a message the kernel has to parse. Instead the kernel listens,
in a thread of its own, on a UNIX socket in its own owner-only directory (a
kernel whose channels are UNIX sockets) or else on an ephemeral port of
127.0.0.1, and reads the segments straight into their buffers (or writes them
straight from the variables' memory). The client reaches it through its SSH
connection to the host (a ``direct-streamlocal`` or ``direct-tcpip``
channel), so on the wire the bytes take the same path as ``ssh host cat``.

One SSH channel carries at most its window per round trip (sshd's is 2 MiB
for bytes sent to the host), so over a long link a large transfer is split
into *parts*: contiguous ranges of the segments laid end to end
(:func:`part_ranges`), each over a connection (and channel) of its own, all at
once. The client asks for at most some number of parts; the kernel decides
how many (:func:`part_count`) and answers it.

The socket's path (or port) is announced in the reply to the transfer's
``receive`` or ``send`` request, with a one-time token and the number of parts. The first line the
client sends on each connection is that token, followed by a space and the
part's index when there are several parts; a connection that sends anything
else is dropped and the listener waits for the next (another user of the
host may reach 127.0.0.1 too, so the token, not the port, is what grants
access). After the token:

receive
    The client sends the part's bytes in order, then half-closes; the
    kernel answers one line, the number of bytes it received on that
    connection, and closes.
send
    The kernel sends the part's bytes in order and closes.

The stream is done when every part is; if any part fails, every connection
is closed and the stream is not done.

Python 3.8 syntax and the standard library only (this module runs in kernels
on any host).
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

#: Seconds the kernel waits for the client to connect and send its token.
CONNECT_TIMEOUT = 60.0
#: Seconds a connection may stay silent in the middle of a transfer.
IDLE_TIMEOUT = 120.0
#: Bytes asked of one socket read or write.
IO_SIZE = 4 * 1024 * 1024
#: Transfers smaller than this go in one part (a part costs a channel open).
PARTS_FROM = 16 * 1024 * 1024
#: Bytes a part carries at least.
PART_MIN = 4 * 1024 * 1024
#: The most parts one stream is split into, whatever the client asks.
MAX_PARTS = 16

_TOKEN_BYTES = 32
#: Longest " <index>" after the token.
_INDEX_CHARS = 8


def part_count(total: int, asked: int) -> int:
    """How many parts a stream of ``total`` bytes is split into, the client asking ``asked``."""
    if total < PARTS_FROM:
        return 1
    return max(1, min(asked, MAX_PARTS, total // PART_MIN))


def part_ranges(total: int, parts: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each part of ``total`` bytes, in order, as equal as can be."""
    size, extra = divmod(total, parts)
    ranges = []
    start = 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        ranges.append((start, end))
        start = end
    return ranges


def part_views(segments: Sequence[Any], start: int, end: int) -> Iterator[memoryview]:
    """Byte views of ``segments`` laid end to end, from ``start`` up to ``end``."""
    base = 0
    for segment in segments:
        view = memoryview(segment).cast("B")
        first, last = max(start, base), min(end, base + view.nbytes)
        if first < last:
            yield view[first - base : last - base]
        base += view.nbytes
        if base >= end:
            return


class BulkStream:
    """A one-shot listener on 127.0.0.1 that moves one transfer's segments.

    Start it with :meth:`start`; the thread accepts one client connection with
    the right token per part, moves the bytes and ends. :meth:`wait` returns
    once it has ended.

    Args:
        segments: The buffers: filled when receiving, read when sending.
        sending: True to send ``segments`` to the client, False to receive them.
        parts: Connections the bytes are split over (see :func:`part_ranges`).
        directory: An owner-only directory to listen in on a UNIX socket (the
            kernel's own, when its channels are UNIX sockets), or None for a
            port of 127.0.0.1.

    Attributes:
        port: The port listened on (0 on a UNIX socket).
        path: The UNIX socket listened on, or None on a port.
    """

    def __init__(
        self, segments: Sequence[Any], sending: bool, parts: int = 1, directory: str | None = None
    ) -> None:
        self.segments = segments
        self.sending = sending
        self.token = secrets.token_hex(_TOKEN_BYTES)
        self.total = sum(memoryview(s).nbytes for s in segments)
        self.parts = max(1, min(parts, MAX_PARTS))
        self.error: str | None = None
        self._ranges = part_ranges(self.total, self.parts)
        self._moved = [0] * self.parts
        self.path: str | None = None
        self.port = 0
        if directory is not None:
            self.path = os.path.join(directory, "b" + self.token[:8])
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(self.path)
        else:
            self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._listener.bind(("127.0.0.1", 0))
            self.port = self._listener.getsockname()[1]
        self._listener.listen(self.parts + 4)
        self._clients: list[socket.socket] = []
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="remote-hw-bulk", daemon=True)

    def start(self) -> BulkStream:
        """Start listening in a thread of its own."""
        self._thread.start()
        return self

    @property
    def moved(self) -> int:
        """Bytes moved so far, over every part."""
        return sum(self._moved)

    @property
    def done(self) -> bool:
        """Whether every byte has moved."""
        return self.error is None and self.moved == self.total and not self._thread.is_alive()

    def wait(self, timeout: float) -> bool:
        """Wait for the thread to end; return whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop listening and drop every connection; the threads end soon after."""
        self._closed.set()
        with self._lock:
            for sock in (self._listener, *self._clients):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            if self.path is not None:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass

    # ------------------------------------------------------------------ threads

    def _fail(self, reason: str) -> None:
        """Record the first failure and end every part (the stream can no longer be done)."""
        with self._lock:
            if self.error is None and not self._closed.is_set():
                self.error = reason
        self.close()

    def _run(self) -> None:
        workers: list[threading.Thread] = []
        claimed: set[int] = set()
        try:
            while len(claimed) < self.parts:
                accepted = self._accept(claimed)
                if accepted is None:
                    return
                claimed.add(accepted[0])
                worker = threading.Thread(
                    target=self._serve, args=accepted, name="remote-hw-bulk-part", daemon=True
                )
                worker.start()
                workers.append(worker)
        except OSError as exc:
            self._fail(f"the transfer's listener broke: {exc}")
        finally:
            if len(claimed) < self.parts:  # not every part came: end those that did
                self.close()
            for worker in workers:
                worker.join()
            self.close()

    def _accept(self, claimed: set[int]) -> tuple[int, socket.socket] | None:
        """The next connection that presents the token and a part not yet claimed."""
        deadline = time.monotonic() + CONNECT_TIMEOUT
        expected = self.token.encode()
        while not self._closed.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                which = f" ({len(claimed)} of {self.parts} parts had)" if claimed else ""
                self._fail(f"no client connected within {CONNECT_TIMEOUT:g} s{which}")
                return None
            self._listener.settimeout(remaining)
            try:
                client, _ = self._listener.accept()
            except socket.timeout:  # noqa: UP041 (not TimeoutError before Python 3.10)
                continue
            client.settimeout(min(10.0, remaining))
            try:
                got = _read_exactly(client, len(expected))
                index = _read_index(client) if hmac.compare_digest(got, expected) else None
            except OSError:
                index = None
            if index is not None and 0 <= index < self.parts and index not in claimed:
                with self._lock:
                    if self._closed.is_set():
                        client.close()
                        return None
                    self._clients.append(client)
                return index, client
            client.close()
        return None

    def _serve(self, index: int, client: socket.socket) -> None:
        try:
            with client:
                client.settimeout(IDLE_TIMEOUT)
                if self.sending:
                    self._send(index, client)
                else:
                    self._receive(index, client)
        except OSError as exc:
            self._fail(
                f"the transfer's connection broke after {self.moved} of {self.total} bytes: {exc}"
            )

    def _receive(self, index: int, client: socket.socket) -> None:
        start, end = self._ranges[index]
        for view in part_views(self.segments, start, end):
            position = 0
            while position < view.nbytes:
                count = client.recv_into(view[position:], min(IO_SIZE, view.nbytes - position))
                if count == 0:
                    self._fail(
                        f"the client closed the transfer after {self.moved} of {self.total} bytes"
                    )
                    return
                position += count
                self._moved[index] += count
        client.sendall(b"%d\n" % self._moved[index])

    def _send(self, index: int, client: socket.socket) -> None:
        start, end = self._ranges[index]
        for view in part_views(self.segments, start, end):
            for offset in range(0, view.nbytes, IO_SIZE):
                piece = view[offset : offset + IO_SIZE]
                client.sendall(piece)
                self._moved[index] += piece.nbytes
        client.shutdown(socket.SHUT_WR)
        # Wait for the client to close its side, so no byte is cut off.
        client.recv(1)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        data = sock.recv(size)
        if not data:
            break
        parts.append(data)
        size -= len(data)
    return b"".join(parts)


def _read_index(sock: socket.socket) -> int | None:
    """The part index ending the token line: nothing (part 0), or a space and digits."""
    line = b""
    while True:
        char = sock.recv(1)
        if char == b"\n":
            break
        if not char or len(line) >= _INDEX_CHARS:
            return None
        line += char
    if not line:
        return 0
    digits = line[1:]
    return int(digits) if line[:1] == b" " and digits.isdigit() else None
