"""The messages between the ``%%ranks`` controller and an engine: one JSON object per
line; values as base64 of their pickle (cloudpickle, protocol 5, buffers in band)."""

from __future__ import annotations

import base64
import json
import threading
from typing import IO, Any, Dict  # noqa: UP035 (Dict: see Message)

from ..pickling import cloudpickle  # type: ignore[attr-defined]

Message = Dict[str, Any]  # noqa: UP006 (evaluated: hosts may run Python 3.8)


def encode_value(value: object) -> str:
    """``value`` as text for a message.

    Raises:
        Exception: ``value`` cannot be pickled (whatever cloudpickle raised).
    """
    return base64.b64encode(cloudpickle.dumps(value, protocol=5)).decode("ascii")


def decode_value(text: str) -> object:
    """The value :func:`encode_value` made ``text`` of."""
    return cloudpickle.loads(base64.b64decode(text))


def decode(line: bytes) -> Message | None:
    """One message, or None for a line that is not one (noise on the channel)."""
    try:
        found = json.loads(line)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class Channel:
    """Writes whole messages to a stream, one line each, from any thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: Message) -> bool:
        """Write ``message``; False when the other side has gone."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                return False
        return True
