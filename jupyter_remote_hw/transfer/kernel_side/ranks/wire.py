"""The messages between the ``%%ranks`` controller and an engine: one JSON object per
line; values as base64 of their pickle (cloudpickle, protocol 5, buffers in band), or,
for large ones, a reference to a frame sent over the link of :mod:`.link`."""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from typing import IO, Any, Dict  # noqa: UP035 (Dict: see Message)

from ..pickling import cloudpickle  # type: ignore[attr-defined]
from .link import THRESHOLD, BulkError, Link

Message = Dict[str, Any]  # noqa: UP006 (evaluated: hosts may run Python 3.8)


def dumps(value: object) -> bytes:
    """``value``'s pickle, as every message carries it.

    Raises:
        Exception: ``value`` cannot be pickled (whatever cloudpickle raised).
    """
    return bytes(cloudpickle.dumps(value, protocol=5))


def pack_value(value: object, ident: str = "", link: Link | None = None) -> str | Message:
    """``value`` for a message: its pickle in the message (base64), or, when larger than
    :data:`.link.THRESHOLD` and ``link`` is there, sent over it as frame ``ident`` and
    ``{"bulk": ident}`` in the message (in the message after all if the send fails).

    Raises:
        Exception: ``value`` cannot be pickled (whatever cloudpickle raised).
    """
    return pack_pickle(dumps(value), ident, link)


def pack_pickle(data: bytes, ident: str, link: Link | None = None) -> str | Message:
    """:func:`pack_value` of a value already pickled (one pickle for every rank)."""
    if link is not None and len(data) > THRESHOLD:
        try:
            link.send(ident, data)
            return {"bulk": ident, "n": len(data)}
        except OSError:
            pass
    return base64.b64encode(data).decode("ascii")


def raw_pickle(field: object, link: Link | None = None, timeout: float = 60.0) -> bytes:
    """The pickle :func:`pack_value` made ``field`` of, not loaded (a frame is taken
    from ``link``).

    Raises:
        BulkError: The frame did not come (or there is no link for it).
    """
    if isinstance(field, dict):
        if link is None:
            raise BulkError(f"value {field.get('bulk')} was sent over a link this side lacks")
        return link.store.take(str(field.get("bulk")), timeout)
    return base64.b64decode(str(field))


def unpack_value(field: object, link: Link | None = None, timeout: float = 60.0) -> object:
    """The value :func:`pack_value` made ``field`` of (a frame is taken from ``link``).

    Raises:
        BulkError: The frame did not come (or there is no link for it).
        Exception: The pickle cannot be loaded here (whatever cloudpickle raised).
    """
    return cloudpickle.loads(raw_pickle(field, link, timeout))


def decode(line: bytes) -> Message | None:
    """One message, or None for a line that is not one (noise on the channel)."""
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class Channel:
    """Writes whole messages to a stream, one line each, from any thread.

    With ``linger``, messages are written by a thread of the channel's own, which
    waits that many seconds after the first of a burst and writes the burst at once:
    a step's output reaches ``srun`` over TCP, where a second small write waits for
    the first one's acknowledgement (Nagle's rule; 40 ms measured here between a
    line a cell printed and the cell's end).
    """

    def __init__(self, stream: IO[bytes], linger: float = 0.0) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._linger = linger
        self._gone = False
        self._queue: queue.Queue[bytes] = queue.Queue()
        if linger:
            threading.Thread(target=self._write_bursts, name="channel-writer", daemon=True).start()

    def send(self, message: Message) -> bool:
        """Write ``message``; False when the other side has gone."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        if self._linger:
            self._queue.put(data)
            return not self._gone
        return self._write(data)

    def _write(self, data: bytes) -> bool:
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                self._gone = True
                return False
        return True

    def _write_bursts(self) -> None:
        while True:
            burst = [self._queue.get()]
            time.sleep(self._linger)
            while not self._queue.empty():
                burst.append(self._queue.get_nowait())
            self._write(b"".join(burst))
