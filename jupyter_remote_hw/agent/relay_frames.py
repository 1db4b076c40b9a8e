"""The relay link's framing: numbered kernel messages and acknowledgements, both ways.

After the attach line and its answer, a relay stream carries only frames:

- ``DATA``: one kernel message (its ZMQ parts) on one channel, with its
  sequence number in the sender's direction;
- ``ACK``: the highest sequence number the sender has delivered, so that the
  other side can forget everything up to it.

Each side numbers what it sends from 1 and keeps it until acknowledged, so a
message reaches the other side exactly once and in order, whatever happens to
the streams in between (mosh's model, with ZMQ messages as the state).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Callable, NamedTuple, Sequence

CHANNELS = ("shell", "iopub", "stdin", "control")
"""The kernel channels a relay carries, by their number on the link (heartbeats are
not relayed: they must fail while the link is down)."""

DATA = 1
ACK = 2

_HEAD = struct.Struct("!BBQI")
"""kind, channel, sequence number, number of parts (ACK: 0, its number, 0)."""
_PART = struct.Struct("!I")

MAX_PARTS = 4096
"""Parts in one message beyond which a stream is taken as corrupt."""
MAX_PART_BYTES = 1 << 31
"""Bytes in one part beyond which a stream is taken as corrupt."""


class RelayProtocolError(Exception):
    """The stream carried something that is not a relay frame."""


class Frame(NamedTuple):
    """One frame read from a relay stream."""

    kind: int
    channel: int
    seq: int
    parts: list[bytes]


def encode_data(channel: int, seq: int, parts: Sequence[bytes]) -> bytes:
    """The bytes of a ``DATA`` frame."""
    chunks = [_HEAD.pack(DATA, channel, seq, len(parts))]
    for part in parts:
        chunks.append(_PART.pack(len(part)))
        chunks.append(bytes(part))
    return b"".join(chunks)


def encode_ack(seq: int) -> bytes:
    """The bytes of an ``ACK`` frame."""
    return _HEAD.pack(ACK, 0, seq, 0)


async def read_frame(reader: asyncio.StreamReader) -> Frame:
    """Read one frame.

    Raises:
        asyncio.IncompleteReadError: The stream ended (cleanly between frames:
            ``partial`` is empty).
        RelayProtocolError: The bytes are not a frame.
    """
    kind, channel, seq, count = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    if kind == ACK:
        return Frame(ACK, 0, seq, [])
    if kind != DATA or channel >= len(CHANNELS) or count > MAX_PARTS:
        raise RelayProtocolError(
            f"not a relay frame (kind {kind}, channel {channel}, {count} parts)"
        )
    parts = []
    for _ in range(count):
        (size,) = _PART.unpack(await reader.readexactly(_PART.size))
        if size > MAX_PART_BYTES:
            raise RelayProtocolError(f"a message part of {size} bytes")
        parts.append(await reader.readexactly(size))
    return Frame(DATA, channel, seq, parts)


class AckSender:
    """Acknowledges what a stream's reader delivered: one ``ACK`` per event-loop turn,
    however many messages arrived in it.

    Args:
        writer: The stream's write side.
        received: The highest sequence number delivered so far.
    """

    def __init__(self, writer: Any, received: Callable[[], int]) -> None:
        self._writer = writer
        self._received = received
        self._pending = False

    def schedule(self) -> None:
        """Send an acknowledgement soon (once for everything delivered until then)."""
        if not self._pending:
            self._pending = True
            asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        self._pending = False
        if not self._writer.is_closing():
            self._writer.write(encode_ack(self._received()))
