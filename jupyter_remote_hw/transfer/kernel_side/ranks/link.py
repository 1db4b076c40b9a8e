"""Large values between the ``%%ranks`` controller and its engines, over TCP.

The channel of :mod:`.wire` is the step's standard input and output, which SLURM
relays at tens of MB/s; a value whose pickle is larger than :data:`THRESHOLD` goes
over a TCP connection instead, and its message carries ``{"bulk": id}`` in its
place. Each engine opens one connection to its controller, which listens on the
first node (the notebook kernel's) on a port of its own.

Trust: the world's key (32 random bytes) reaches each engine in its environment,
which SLURM gives only to a step of the job's owner, and leaves it at once. A
connection proves it knows the key (an HMAC of a nonce the controller sends) before
a byte of it is read as a frame, and every frame carries an HMAC of its id, its
direction and its bytes, checked before the frame is kept: nothing unpickles what
did not come from this world. Where the connection cannot be made (a firewall
between nodes), the values go over the channel as before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
import threading
import time
from typing import IO

#: Pickles larger than this go over the connection rather than the channel.
THRESHOLD = 64 * 1024

#: The environment variable that gives an engine ``host:port:key`` (hex).
ADDRESS_ENV = "JRHW_RANKS_BULK"

#: Seconds a new connection has to prove it knows the key.
PROOF_TIMEOUT = 5.0

_NONCE = 16
_ACCEPTED = b"\x01"
_HEADER_MAX = 512


class BulkError(Exception):
    """A value did not come over the connection (it closed, or took too long)."""


def _mac(key: bytes, direction: bytes, ident: str, payload: bytes) -> str:
    digest = hmac.new(key, direction + b"\0" + ident.encode() + b"\0", hashlib.sha256)
    digest.update(payload)
    return digest.hexdigest()


def _read(rfile: IO[bytes], count: int) -> bytes:
    data = rfile.read(count)
    if len(data) != count:
        raise ConnectionError("the connection closed")
    return data


def _close(sock: socket.socket, rfile: IO[bytes]) -> None:
    """End the connection (its descriptor stays open while a reader of it does)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    rfile.close()
    sock.close()


class Store:
    """Frames received and checked, by id, until taken."""

    def __init__(self) -> None:
        self._frames: dict[str, bytes] = {}
        self._changed = threading.Condition()
        self.closed: str | None = None
        """Why no more frames will come, once none will."""

    def put(self, ident: str, payload: bytes) -> None:
        with self._changed:
            self._frames[ident] = payload
            self._changed.notify_all()

    def close(self, why: str) -> None:
        with self._changed:
            self.closed = why
            self._changed.notify_all()

    def clear(self) -> None:
        """Drop the frames not taken (those of a cell that failed)."""
        with self._changed:
            self._frames.clear()

    def take(self, ident: str, timeout: float) -> bytes:
        """The frame ``ident``, once it has come.

        Raises:
            BulkError: It did not come within ``timeout`` seconds, or the
                connection closed first.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while ident not in self._frames:
                if self.closed is not None:
                    raise BulkError(f"value {ident} did not come: {self.closed}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BulkError(f"value {ident} did not come within {timeout:g} s")
                self._changed.wait(left)
            return self._frames.pop(ident)


class Link:
    """One connection's two directions: frames sent, and frames read into ``store``.

    Args:
        sock: The connection, its proof done.
        rfile: The connection's reading end, as the proof read it.
        key: The world's key.
        sent: This side's direction (``b"c"`` the controller, ``b"e"`` an engine);
            frames read must carry the other one.
        store: Where checked frames go.
    """

    def __init__(
        self, sock: socket.socket, rfile: IO[bytes], key: bytes, sent: bytes, store: Store
    ) -> None:
        self.sock = sock
        self._rfile = rfile
        self.key = key
        self.sent = sent
        self.heard = b"e" if sent == b"c" else b"c"
        self.store = store
        self._lock = threading.Lock()
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._read, name="bulk-reader", daemon=True).start()

    def send(self, ident: str, payload: bytes) -> None:
        """Send one frame (whole, before any other of this side's).

        The frame is written by a thread of its own, so that an interrupt of the
        caller (the user's, during a large ``--in``) stops the wait, never the frame:
        a frame cut in the middle would fail its check at the other end and end
        the link.

        Raises:
            OSError: The connection failed while the frame was written.
        """
        header = {"id": ident, "n": len(payload), "mac": _mac(self.key, self.sent, ident, payload)}
        failed: list[OSError] = []

        def write() -> None:
            with self._lock:
                try:
                    self.sock.sendall(json.dumps(header).encode() + b"\n")
                    self.sock.sendall(payload)
                except OSError as exc:
                    failed.append(exc)

        writer = threading.Thread(target=write, name="bulk-writer", daemon=True)
        writer.start()
        writer.join()
        if failed:
            raise failed[0]

    def close(self) -> None:
        _close(self.sock, self._rfile)

    def _read(self) -> None:
        why = "the connection closed"
        try:
            while True:
                line = self._rfile.readline(_HEADER_MAX)
                if not line.endswith(b"\n"):
                    raise ConnectionError("the connection closed, or a header was too long")
                header = json.loads(line)
                ident, count = str(header["id"]), int(header["n"])
                payload = _read(self._rfile, count)
                expected = _mac(self.key, self.heard, ident, payload)
                if not hmac.compare_digest(expected, str(header["mac"])):
                    why = f"a frame failed its check ({ident}): the connection was closed"
                    break
                self.store.put(ident, payload)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            why = f"the connection closed ({exc})"
        self.store.close(why)
        self.close()


class Server:
    """The controller's end: listens on ``host``, and keeps one link per rank whose
    connection proved it knows the key, each with its own store.

    Args:
        host: The address the engines reach this node at.
    """

    def __init__(self, host: str) -> None:
        self.key = os.urandom(32)
        self.links: dict[int, Link] = {}
        self._linked = threading.Condition()
        self._sock = socket.create_server((host, 0))
        self.address = f"{host}:{self._sock.getsockname()[1]}:{self.key.hex()}"
        threading.Thread(target=self._accept, name="bulk-accept", daemon=True).start()

    def link(self, rank: int, timeout: float = 0.0) -> Link | None:
        """Rank ``rank``'s link, waiting up to ``timeout`` s for it; None without one."""
        deadline = time.monotonic() + timeout
        with self._linked:
            while rank not in self.links and time.monotonic() < deadline:
                self._linked.wait(max(0.0, deadline - time.monotonic()))
            return self.links.get(rank)

    def close(self) -> None:
        self._sock.close()
        for link in list(self.links.values()):
            link.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._prove, args=(sock,), daemon=True).start()

    def _prove(self, sock: socket.socket) -> None:
        rfile = sock.makefile("rb")
        try:
            sock.settimeout(PROOF_TIMEOUT)
            nonce = os.urandom(_NONCE)
            sock.sendall(nonce)
            answer = _read(rfile, 4 + 32)
            (rank,) = struct.unpack("!I", answer[:4])
            expected = hmac.new(self.key, nonce + answer[:4], hashlib.sha256).digest()
            if not hmac.compare_digest(expected, answer[4:]):
                raise ConnectionError("wrong proof")
        except (OSError, struct.error):
            _close(sock, rfile)
            return
        link = Link(sock, rfile, self.key, b"c", Store())
        with self._linked:  # known before the engine is told, so before it says so
            old = self.links.get(rank)
            self.links[rank] = link
            self._linked.notify_all()
        if old is not None:
            old.close()
        try:
            sock.sendall(_ACCEPTED)
        except OSError:
            link.close()


def connect(address: str, rank: int, store: Store, timeout: float = 5.0) -> Link:
    """An engine's link to its controller at ``address`` (``host:port:key``).

    Raises:
        OSError: The controller cannot be reached, or refused the proof.
    """
    host, port, key_hex = address.rsplit(":", 2)
    key = bytes.fromhex(key_hex)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    rfile = sock.makefile("rb")
    try:
        nonce = _read(rfile, _NONCE)
        number = struct.pack("!I", rank)
        sock.sendall(number + hmac.new(key, nonce + number, hashlib.sha256).digest())
        if rfile.read(1) != _ACCEPTED:
            raise ConnectionRefusedError(f"the controller at {host}:{port} refused this rank")
    except OSError:
        _close(sock, rfile)
        raise
    return Link(sock, rfile, key, b"e", store)
