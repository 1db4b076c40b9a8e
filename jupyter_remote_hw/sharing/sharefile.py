"""The share file: what a teammate needs to reach a shared kernel, and nothing more.

It names the host (address, port, login user) and the host's public key, so
the teammate verifies the host; the ports to forward and what each one is;
the kernel, role and expiry. The kernel's HMAC key is in it only for a
collaborator, who signs requests with it. It never holds a password, a
private key or a cloud credential.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..agent.connection import write_private_json
from ..providers.base import PORT_NAMES
from ..validation import (
    HOST,
    KERNEL_ID,
    SHARE_ID,
    InvalidInputError,
    check_identifier,
    check_json,
    quote,
    validator,
)
from .roles import COLLABORATOR, ROLE_CHANNELS, VIEWER, ShareError, check_role

FORMAT = "jupyter-remote-hw-share"
"""The share file's ``format`` field."""
VERSION = 1
"""The share file's ``version`` field."""

_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_LINE = {"type": "string", "pattern": r"^[^\x00-\x1f\x7f]*$"}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "format",
        "version",
        "share_id",
        "role",
        "kernel_id",
        "host",
        "port",
        "user",
        "host_key",
        "ports",
        "purposes",
        "expires",
        "owner",
    ],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "share_id": {"type": "string", "pattern": SHARE_ID},
        "role": {"enum": [VIEWER, COLLABORATOR]},
        "kernel_id": {"type": "string", "pattern": KERNEL_ID},
        "host": {"type": "string", "pattern": HOST},
        "port": _PORT,
        "user": {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"},
        "host_key": {**_LINE, "minLength": 1, "maxLength": 16384},
        "ports": {
            "type": "object",
            "minProperties": 1,
            "maxProperties": len(PORT_NAMES),
            "propertyNames": {"enum": list(PORT_NAMES)},
            "additionalProperties": _PORT,
        },
        "purposes": {
            "type": "object",
            "propertyNames": {"enum": list(PORT_NAMES)},
            "additionalProperties": {**_LINE, "maxLength": 200},
        },
        "expires": {"type": "number"},
        "owner": {**_LINE, "maxLength": 256},
        "signature_scheme": {"type": "string", "pattern": r"^hmac-[a-z0-9]{1,16}$"},
        "key": {"type": "string", "pattern": r"^[\x21-\x7e]{0,1024}$"},
    },
}
"""What a share file may hold: every field a teammate's tools use is checked before
it touches a path (the share id names files), a command line or a log."""
_CHECK = validator(SCHEMA)


@dataclass(frozen=True)
class ShareFile:
    """A share as the teammate receives it.

    Attributes:
        share_id: The share's id (in the host's key line too).
        role: ``viewer`` or ``collaborator``.
        kernel_id: The owner's kernel.
        host: The address the teammate connects to.
        port: sshd's port there.
        user: The login user (the owner's account on the host).
        host_key: The host's public key (``ssh-ed25519 AAAA...``), checked on connecting.
        ports: The port to forward on the host's 127.0.0.1, per kernel channel.
        purposes: What each channel is.
        expires: When the share ends (epoch seconds; sshd refuses the key after).
        owner: Who shared it (``user@machine``).
        signature_scheme: How kernel messages are signed.
        key: The kernel's HMAC key (collaborators only; empty otherwise).
    """

    share_id: str
    role: str
    kernel_id: str
    host: str
    port: int
    user: str
    host_key: str
    ports: dict[str, int]
    purposes: dict[str, str]
    expires: float
    owner: str
    signature_scheme: str = "hmac-sha256"
    key: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        try:
            check_identifier(self.share_id, SHARE_ID, "share id")
        except InvalidInputError as exc:
            raise ShareError(str(exc)) from None
        check_role(self.role)
        if self.key and self.role != COLLABORATOR:
            raise ShareError(
                f"share {self.share_id}: only a collaborator's share file carries the kernel's key"
            )
        allowed = set(ROLE_CHANNELS[self.role])
        if not self.ports or not set(self.ports) <= allowed:
            raise ShareError(
                f"share {self.share_id}: a {self.role} reaches "
                f"{sorted(allowed)}, not {sorted(self.ports)}"
            )

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object (``key`` only when there is one)."""
        data: dict[str, Any] = {"format": FORMAT, "version": VERSION, **asdict(self)}
        if not self.key:
            del data["key"]
        return data

    def write(self, path: Path) -> Path:
        """Write the file (0600: a collaborator's file holds the kernel's key)."""
        path = Path(path).expanduser()
        write_private_json(str(path), self.to_json())
        return path

    @classmethod
    def load(cls, path: Path) -> ShareFile:
        """Read a share file.

        Raises:
            ShareError: It is missing, not JSON, or not a share file of this version.
        """
        path = Path(path).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ShareError(f"no share file at {path}: ask the owner to send it") from None
        except (OSError, ValueError) as exc:
            raise ShareError(f"{path} is not a share file ({exc})") from None
        return cls.from_json(data, str(path))

    @classmethod
    def from_json(cls, data: Any, source: str = "the share file") -> ShareFile:
        """A share file from its JSON object (``source`` names it in errors).

        Raises:
            ShareError: It is not a share file of this version, misses a field or has one
                that is not what it may be (the message names the field).
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ShareError(f"{source} is not a jupyter-remote-hw share file")
        if data.get("version") != VERSION:
            raise ShareError(
                f"{source} is a share file of version {quote(data.get('version'))}"
                f"; this jupyter-remote-hw reads version {VERSION}: upgrade it"
            )
        try:
            check_json(data, _CHECK)
        except InvalidInputError as exc:
            raise ShareError(
                f"{source} is not a valid share file: {exc}; ask the owner for a new one",
                field=exc.field,
            ) from None
        fields = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**fields)
