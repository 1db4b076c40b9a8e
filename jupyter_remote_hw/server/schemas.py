"""What the REST API accepts: the JSON Schema of each request body and path part.

docs/rest-api.yaml documents the same schemas (a test checks that they agree); the
handlers check every request against them with :mod:`jsonschema` before anything
else reads it, so a bad request is answered 400 naming the field, whatever it holds.
"""

from __future__ import annotations

from typing import Any

from ..validation import HOST, KERNEL_ID, NAME, PATTERN_WORDS, SHARE_ID, validator

#: A notebook session's id (Jupyter's are UUIDs).
SESSION_ID = KERNEL_ID
#: A share's lifetime: ``30m``, ``8h``, ``1h30m``.
DURATION = r"^([0-9]{1,6}(\.[0-9]{1,3})?[smhdw]){1,5}$"
#: One line of text: no control characters (no newline to forge a log line).
LINE = r"^[^\x00-\x1f\x7f]+$"
#: A Python name (a variable or the name a module is bound to).
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,254}$"
#: A SHA256 host key fingerprint as ``ssh-keygen -l`` prints it.
FINGERPRINT = r"^SHA256:[A-Za-z0-9+/]{43}=?$"
#: A public key: one line (a final newline allowed, as in a .pub file).
PUBLIC_KEY = r"^[^\x00-\x1f\x7f]+\n?$"
#: A torch device.
DEVICE = r"^[a-z]{1,16}(:[0-9]{1,4})?$"

PATTERN_WORDS.update(
    {
        DURATION: "a duration such as 30m, 8h, 2d or 1h30m",
        LINE: "one line of text",
        IDENTIFIER: "a Python name (letters, digits, '_')",
        FINGERPRINT: "the SHA256 fingerprint you were shown (SHA256:... as `ssh-keygen -l` "
        "prints it)",
        PUBLIC_KEY: "the teammate's public key, one line such as 'ssh-ed25519 AAAA... name' "
        "(never a private key)",
        DEVICE: "a device such as cuda or cuda:1",
    }
)

_NAME = {"type": "string", "pattern": NAME}

REQUESTS: dict[str, dict[str, Any]] = {
    "launch": {
        "type": "object",
        "required": ["hardware"],
        "additionalProperties": False,
        "properties": {
            "hardware": _NAME,
            "path": {"type": "string", "pattern": LINE, "maxLength": 4096},
        },
    },
    "switch": {
        "type": "object",
        "required": ["hardware"],
        "additionalProperties": False,
        "properties": {
            "hardware": _NAME,
            "carry": {
                "oneOf": [
                    {
                        "type": "array",
                        "maxItems": 10000,
                        "items": {"type": "string", "pattern": IDENTIFIER},
                    },
                    {"type": "string", "enum": ["all"]},
                ]
            },
            "device": {"type": "string", "pattern": DEVICE},
            "keep_old": {"type": "boolean"},
        },
    },
    "share": {
        "type": "object",
        "required": ["kernel", "public_key", "role"],
        "additionalProperties": False,
        "properties": {
            "kernel": _NAME,
            "public_key": {"type": "string", "pattern": PUBLIC_KEY, "maxLength": 16384},
            "role": {"type": "string", "enum": ["viewer", "collaborator"]},
            "expires": {"type": "string", "pattern": DURATION},
            "address": {"type": "string", "pattern": HOST},
        },
    },
    "join": {
        "type": "object",
        "required": ["share_file"],
        "additionalProperties": False,
        "properties": {
            "share_file": {"type": "object"},
            "identity": {"type": "string", "pattern": LINE, "maxLength": 4096},
        },
    },
    "hibernate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"policy": {"type": "string", "enum": ["partial", "refuse"]}},
    },
    "hibernate_after": {
        "type": "object",
        "required": ["seconds"],
        "additionalProperties": False,
        "properties": {
            "seconds": {"type": ["number", "null"], "minimum": 0, "maximum": 604800},
        },
    },
    "wake": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"target": _NAME},
    },
    "trust": {
        "type": "object",
        "required": ["fingerprint"],
        "additionalProperties": False,
        "properties": {"fingerprint": {"type": "string", "pattern": FINGERPRINT}},
    },
}
"""Each request body's schema, by the name the handlers use."""

PATH_PARTS: dict[str, str] = {
    "name": NAME,
    "session_id": SESSION_ID,
    "kernel_id": KERNEL_ID,
    "share_id": SHARE_ID,
    "host": HOST,
}
"""The pattern of each path part, by its name in the routes."""

#: The values of ``GET /shares?all=``.
ALL_VALUES = ("0", "1", "false", "true")

CHECKERS = {name: validator(schema) for name, schema in REQUESTS.items()}
"""A validator per request body schema, built once."""

__all__ = ["ALL_VALUES", "CHECKERS", "PATH_PARTS", "REQUESTS"]
