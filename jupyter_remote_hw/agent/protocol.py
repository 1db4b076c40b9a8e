"""Wire format between the local side and the agent: newline-delimited JSON.

Each request is one line ``{"id": <int>, "op": "<name>", "args": {...}}`` and
is answered by one line carrying the same id, either
``{"id": ..., "ok": true, "result": {...}}`` or
``{"id": ..., "ok": false, "error": "<message>", "kind": "<code>"}``.
Requests on one connection may be answered out of order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, cast

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest request line the agent reads; longer lines close the connection."""

# Error kinds: short machine codes that the local side switches on.
BAD_REQUEST = "bad_request"
"""The request was malformed, named an unknown op, or had bad arguments."""
UNKNOWN_KERNEL = "unknown_kernel"
"""No kernel with the given id is known to this agent."""
KERNEL_EXISTS = "kernel_exists"
"""start_kernel named a kernel id that is already in use."""
NO_IPYKERNEL = "no_ipykernel"
"""The python that would run the kernel cannot import ipykernel."""
START_FAILED = "start_failed"
"""The kernel process could not be started at all (missing executable, bad cwd)."""
KERNEL_DIED = "kernel_died"
"""The kernel process exited before it answered."""
KERNEL_TIMEOUT = "kernel_timeout"
"""The kernel process did not answer within the timeout and was stopped."""
INTERNAL = "internal"
"""An unexpected failure inside the agent; its log has the traceback."""


class AgentError(Exception):
    """A failure to report to the client as ``{"ok": false, ...}``.

    Attributes:
        kind: Short machine code, one of the module's kind constants.
        message: Human message naming the thing at fault and what to do.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class Request:
    """One parsed request line.

    Attributes:
        id: The client's request id, echoed in the response.
        op: Operation name.
        args: Operation arguments (always a dict).
    """

    id: int
    op: str
    args: dict[str, Any] = field(default_factory=dict)


class RequestParseError(AgentError):
    """A request line that could not be understood.

    Attributes:
        request_id: The id from the line when one could be read, else None,
            so that the error response can still be matched by the client.
    """

    def __init__(self, message: str, request_id: int | None = None) -> None:
        super().__init__(BAD_REQUEST, message)
        self.request_id = request_id


def parse_request(line: bytes) -> Request:
    """Parse one request line.

    Args:
        line: The raw line, with or without its trailing newline.

    Returns:
        The parsed request.

    Raises:
        RequestParseError: The line is not a JSON object with an integer
            ``id``, a string ``op`` and an object ``args``.
    """
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestParseError(f"request is not valid JSON ({exc}); send one JSON object per line")
    if not isinstance(data, dict):
        raise RequestParseError("request must be a JSON object with id, op and args")
    request_id = data.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise RequestParseError("request needs an integer 'id'")
    op = data.get("op")
    if not isinstance(op, str) or not op:
        raise RequestParseError("request needs a string 'op'", request_id)
    args = data.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise RequestParseError(f"'args' of {op} must be a JSON object", request_id)
    return Request(id=request_id, op=op, args=args)


def encode(message: dict[str, Any]) -> bytes:
    """Serialize one message as a JSON line.

    Args:
        message: A JSON-serializable dict.

    Returns:
        Compact UTF-8 JSON followed by a newline.
    """
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def ok_response(request_id: int | None, result: dict[str, Any]) -> dict[str, Any]:
    """Build a success response.

    Args:
        request_id: The request's id.
        result: The op's result object.

    Returns:
        The response dict.
    """
    return {"id": request_id, "ok": True, "result": result}


def error_response(request_id: int | None, kind: str, message: str) -> dict[str, Any]:
    """Build an error response.

    Args:
        request_id: The request's id, or None when it could not be read.
        kind: Short machine code.
        message: Human message naming the thing at fault and what to do.

    Returns:
        The response dict.
    """
    return {"id": request_id, "ok": False, "error": message, "kind": kind}


# Argument readers: each raises AgentError(BAD_REQUEST) naming the op and argument.


def _checked(
    args: dict[str, Any], op: str, name: str, valid: Callable[[Any], bool], expected: str
) -> Any:
    """Return argument ``name`` (None when absent) after checking it with ``valid``.

    Raises:
        AgentError: Present but not valid; the message says it ``must be <expected>``.
    """
    value = args.get(name)
    if value is not None and not valid(value):
        raise AgentError(BAD_REQUEST, f"argument '{name}' of {op} must be {expected}")
    return value


def arg_str(args: dict[str, Any], op: str, name: str, *, required: bool = False) -> str | None:
    """Read an optional (or required) string argument; None when absent and not required."""
    value = _checked(args, op, name, lambda v: isinstance(v, str), "a string")
    if value is None and required:
        raise AgentError(BAD_REQUEST, f"{op} needs the string argument '{name}'")
    return cast(Optional[str], value)


def arg_bool(args: dict[str, Any], op: str, name: str, default: bool) -> bool:
    """Read an optional boolean argument; ``default`` when absent."""
    value = _checked(args, op, name, lambda v: isinstance(v, bool), "true or false")
    return default if value is None else bool(value)


def arg_seconds(args: dict[str, Any], op: str, name: str, default: float) -> float:
    """Read an optional positive duration in seconds; ``default`` when absent."""
    value = _checked(
        args,
        op,
        name,
        lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0,
        "a positive number",
    )
    return default if value is None else float(value)


def arg_duration(args: dict[str, Any], op: str, name: str, default: float) -> float:
    """Read an optional duration in seconds, 0 or more; ``default`` when absent."""
    value = _checked(
        args,
        op,
        name,
        lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and v >= 0,
        "a number of seconds, 0 or more",
    )
    return default if value is None else float(value)


def arg_dict(args: dict[str, Any], op: str, name: str) -> dict[str, Any] | None:
    """Read an optional JSON object; None when absent."""
    value = _checked(args, op, name, lambda v: isinstance(v, dict), "a JSON object")
    return None if value is None else dict(value)


def arg_number(args: dict[str, Any], op: str, name: str) -> float:
    """Read a required number (an epoch time, say)."""
    value = _checked(
        args,
        op,
        name,
        lambda v: not isinstance(v, bool) and isinstance(v, (int, float)),
        "a number",
    )
    if value is None:
        raise AgentError(BAD_REQUEST, f"{op} needs the number argument '{name}'")
    return float(value)


def arg_str_list(args: dict[str, Any], op: str, name: str) -> list[str] | None:
    """Read an optional non-empty list of strings; None when absent."""
    value = _checked(
        args,
        op,
        name,
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(i, str) for i in v),
        "a non-empty list of strings",
    )
    return None if value is None else list(value)


def arg_str_dict(args: dict[str, Any], op: str, name: str) -> dict[str, str] | None:
    """Read an optional mapping of strings to strings; None when absent."""
    value = _checked(
        args,
        op,
        name,
        lambda v: (
            isinstance(v, dict)
            and all(isinstance(k, str) and isinstance(i, str) for k, i in v.items())
        ),
        "a mapping of strings to strings",
    )
    return None if value is None else dict(value)
