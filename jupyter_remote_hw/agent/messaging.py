"""Just enough of the Jupyter messaging wire format, with only the standard library.

A message on the wire is a list of frames: routing identities, the delimiter
``<IDS|MSG>``, the HMAC signature (hex), then the JSON header, parent header,
metadata and content, then optional binary buffers. The signature is the HMAC
of the four JSON frames, in that order, with the connection file's key.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

DELIMITER = b"<IDS|MSG>"
PROTOCOL_VERSION = "5.3"

AGENT_SESSION = uuid.uuid4().hex
"""Session id of the agent's own requests to kernels, so that the busy/idle
status they cause can be told apart from users' activity."""


class Signer:
    """Signs and verifies message frames with a connection's key.

    Args:
        key: The connection file's key; an empty key disables signing.
        scheme: The connection file's signature scheme, e.g. ``hmac-sha256``.

    Raises:
        ValueError: The scheme is not ``hmac-<hash>`` with a hash hashlib knows.
    """

    def __init__(self, key: bytes, scheme: str = "hmac-sha256") -> None:
        prefix, _, digest = scheme.partition("-")
        if prefix != "hmac" or digest not in hashlib.algorithms_available:
            raise ValueError(f"unsupported signature scheme {scheme!r}")
        self._key = key
        self._digest = digest

    def sign(self, frames: Sequence[bytes]) -> bytes:
        """Return the hex signature of header, parent header, metadata and content.

        Args:
            frames: The four JSON frames, in wire order.

        Returns:
            The ASCII hex digest, or ``b""`` when there is no key.
        """
        if not self._key:
            return b""
        mac = hmac.new(self._key, digestmod=self._digest)
        for frame in frames:
            mac.update(frame)
        return mac.hexdigest().encode()

    def verify(self, signature: bytes, frames: Sequence[bytes]) -> bool:
        """Check a received signature in constant time.

        Args:
            signature: The signature frame as received.
            frames: The four JSON frames that follow it.

        Returns:
            True when the signature matches (or signing is disabled).
        """
        if not self._key:
            return True
        return hmac.compare_digest(signature, self.sign(frames))


@dataclass
class Message:
    """A received message, decoded.

    Attributes:
        header: The message header (``msg_type``, ``msg_id``, ...).
        parent_header: The header of the request that caused it, or ``{}``.
        content: The message content.
        topic: The first routing frame (the IOPub topic on SUB sockets), or b"".
    """

    header: dict[str, Any]
    parent_header: dict[str, Any]
    content: dict[str, Any]
    topic: bytes = b""

    @property
    def msg_type(self) -> str:
        """The header's message type, or ``""`` when missing."""
        value = self.header.get("msg_type", "")
        return value if isinstance(value, str) else ""


def is_welcome(parts: list[bytes]) -> bool:
    """Whether a message's frames are an IOPub welcome (JEP 65)."""
    try:
        return b'"iopub_welcome"' in parts[parts.index(DELIMITER) + 2]
    except (ValueError, IndexError):
        return False


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def build(
    signer: Signer, msg_type: str, content: dict[str, Any], session: str
) -> tuple[str, list[bytes]]:
    """Build the frames of a request to send on a DEALER socket.

    Args:
        signer: Signs the message with the kernel's key.
        msg_type: E.g. ``kernel_info_request``.
        content: The request content.
        session: The sender's session id.

    Returns:
        The new message's id and its frames, starting with the delimiter.
    """
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "msg_type": msg_type,
        "username": "jupyter-remote-hw-agent",
        "session": session,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": PROTOCOL_VERSION,
    }
    parts = [_dumps(header), _dumps({}), _dumps({}), _dumps(content)]
    return msg_id, [DELIMITER, signer.sign(parts), *parts]


def parse(frames: Sequence[bytes], signer: Signer | None) -> Message | None:
    """Decode received frames.

    Args:
        frames: All frames of one multipart message.
        signer: Verifies the signature when given; messages that fail are dropped.

    Returns:
        The decoded message, or None when the frames are malformed or the
        signature does not match.
    """
    try:
        index = list(frames).index(DELIMITER)
    except ValueError:
        return None
    if len(frames) < index + 6:
        return None
    signature = frames[index + 1]
    parts = list(frames[index + 2 : index + 6])
    if signer is not None and not signer.verify(signature, parts):
        return None
    try:
        header, parent, _metadata, content = (json.loads(part) for part in parts)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict) or not isinstance(content, dict):
        return None
    if not isinstance(parent, dict):
        parent = {}
    topic = frames[0] if index > 0 else b""
    return Message(header=header, parent_header=parent, content=content, topic=topic)
