"""The kernel side of a transfer's bulk stream: one TCP connection for one transfer's bytes.

A large transfer's bytes do not go through the kernel's shell channel, where
each chunk is a message the kernel has to parse. Instead the kernel listens on
an ephemeral port of 127.0.0.1 for one connection, in a thread of its own,
and reads the segments straight into their buffers (or writes them straight
from the variables' memory). The client reaches the port through its SSH
connection to the host (a ``direct-tcpip`` channel), so on the wire the bytes
take the same path as ``ssh host cat``.

The port is announced in the reply to the transfer's ``receive`` or ``send``
request, with a one-time token. The first line the client sends is that token;
a connection that sends anything else is dropped and the listener waits for
the next (another user of the host may reach 127.0.0.1 too, so the token, not
the port, is what grants access). After the token:

receive
    The client sends every segment's bytes in order, then half-closes; the
    kernel answers one line, the number of bytes it received, and closes.
send
    The kernel sends every segment's bytes in order and closes.

Python 3.8 syntax and the standard library only (this module runs in kernels
on any host).
"""

from __future__ import annotations

import hmac
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

#: Seconds the kernel waits for the client to connect and send its token.
CONNECT_TIMEOUT = 60.0
#: Seconds a connection may stay silent in the middle of a transfer.
IDLE_TIMEOUT = 120.0
#: Bytes asked of one socket read or write.
IO_SIZE = 4 * 1024 * 1024

_TOKEN_BYTES = 32


class BulkStream:
    """A one-shot listener on 127.0.0.1 that moves one transfer's segments.

    Start it with :meth:`start`; the thread accepts one client with the right
    token, moves the bytes and ends. :meth:`wait` returns once it has ended.

    Args:
        segments: The buffers: filled when receiving, read when sending.
        sending: True to send ``segments`` to the client, False to receive them.
    """

    def __init__(self, segments: Sequence[Any], sending: bool) -> None:
        self.segments = segments
        self.sending = sending
        self.token = secrets.token_hex(_TOKEN_BYTES)
        self.total = sum(memoryview(s).nbytes for s in segments)
        self.moved = 0
        self.error: str | None = None
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(4)
        self.port: int = self._listener.getsockname()[1]
        self._client: socket.socket | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="remote-hw-bulk", daemon=True)

    def start(self) -> BulkStream:
        """Start listening in a thread of its own."""
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        """Whether every byte has moved."""
        return self.error is None and self.moved == self.total and not self._thread.is_alive()

    def wait(self, timeout: float) -> bool:
        """Wait for the thread to end; return whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop listening and drop the connection; the thread ends soon after."""
        self._closed.set()
        with self._lock:
            for sock in (self._listener, self._client):
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    sock.close()

    # ------------------------------------------------------------------ thread

    def _run(self) -> None:
        try:
            client = self._accept()
            if client is None:
                return
            with client:
                client.settimeout(IDLE_TIMEOUT)
                if self.sending:
                    self._send(client)
                else:
                    self._receive(client)
        except OSError as exc:
            if not self._closed.is_set():
                self.error = f"the transfer's connection broke after {self.moved} of " \
                             f"{self.total} bytes: {exc}"
        finally:
            self.close()

    def _accept(self) -> socket.socket | None:
        deadline = time.monotonic() + CONNECT_TIMEOUT
        expected = self.token.encode() + b"\n"
        while not self._closed.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.error = f"no client connected within {CONNECT_TIMEOUT:g} s"
                return None
            self._listener.settimeout(remaining)
            try:
                client, _ = self._listener.accept()
            except socket.timeout:  # noqa: UP041 (not TimeoutError before Python 3.10)
                continue
            client.settimeout(min(10.0, remaining))
            try:
                got = _read_exactly(client, len(expected))
            except OSError:
                got = b""
            if hmac.compare_digest(got, expected):
                with self._lock:
                    if self._closed.is_set():
                        client.close()
                        return None
                    self._client = client
                return client
            client.close()
        return None

    def _receive(self, client: socket.socket) -> None:
        for segment in self.segments:
            view = memoryview(segment).cast("B")
            position = 0
            while position < view.nbytes:
                count = client.recv_into(view[position:], min(IO_SIZE, view.nbytes - position))
                if count == 0:
                    self.error = f"the client closed the transfer after {self.moved} of " \
                                 f"{self.total} bytes"
                    return
                position += count
                self.moved += count
        client.sendall(b"%d\n" % self.moved)

    def _send(self, client: socket.socket) -> None:
        for segment in self.segments:
            view = memoryview(segment).cast("B")
            for start in range(0, view.nbytes, IO_SIZE):
                part = view[start:start + IO_SIZE]
                client.sendall(part)
                self.moved += part.nbytes
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
