"""Input from outside, checked before it touches a path, a command line or a log.

Identifiers (share ids, kernel ids, host aliases, machine names) must match a strict
pattern; JSON input (REST request bodies, share files) is checked against a JSON
Schema with :mod:`jsonschema`, and a failure is said in one short line naming the
field and what is allowed, never echoing a long value whole.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from .errors import UserError

#: A share id: what ``secrets.token_urlsafe`` gives, without ``.`` or ``/``.
SHARE_ID = r"^[A-Za-z0-9_-]{1,64}$"
#: A kernel id (Jupyter's are UUIDs), or the start of one.
KERNEL_ID = r"^[A-Za-z0-9_-]{1,64}$"
#: A host as ssh names it (an ssh_config alias, a host name, an address), optionally
#: with ``user@``: no spaces, quotes, slashes or control characters.
HOST = r"^[A-Za-z0-9_.@:\[\]%][A-Za-z0-9_.@:\[\]%-]{0,254}$"
#: A machine or target name.
NAME = r"^[A-Za-z0-9_.:@+-]{1,128}$"

#: The most characters of a value quoted in a message or a log line.
QUOTE_LIMIT = 60


class InvalidInputError(UserError, ValueError):
    """Input from outside is not what it may be.

    Attributes:
        field: The field (or identifier kind) at fault.
    """

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def quote(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters, saying how long it was when cut."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
    return f"{text[:limit]}… ({size})"


def check_identifier(value: Any, pattern: str, what: str) -> str:
    """Return ``value`` when it is a string matching ``pattern``.

    Args:
        value: The identifier as it came.
        pattern: One of :data:`SHARE_ID`, :data:`KERNEL_ID`, :data:`HOST`, :data:`NAME`.
        what: What it is, for the message (``share id``).

    Raises:
        InvalidInputError: It is not a string, or does not match.
    """
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise InvalidInputError(f"{what} {quote(value)} is not valid: {allowed(pattern)}", what)
    return value


PATTERN_WORDS: dict[str, str] = {
    SHARE_ID: "1 to 64 letters, digits, '-' or '_'",
    HOST: "1 to 255 letters, digits and '.-_@:[]%', not starting with '-' (no spaces, "
    "quotes or slashes)",
    NAME: "1 to 128 letters, digits and '.-_:@+'",
}
"""What each pattern allows, in words (modules with schemas add theirs)."""


def allowed(pattern: str) -> str:
    """What ``pattern`` allows, in words."""
    return PATTERN_WORDS.get(pattern, f"it must match {pattern}")


def field_name(error: ValidationError) -> str:
    """The field ``error`` is about, as a dotted path (``share_file.expires``), or
    the missing or extra field's name; ``body`` for the whole object."""
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required" and isinstance(error.validator_value, list):
        instance = error.instance if isinstance(error.instance, Mapping) else {}
        missing = [f for f in error.validator_value if f not in instance]
        path += missing[:1]
    elif error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {})
        extra = sorted(str(k) for k in error.instance if k not in known)
        path += extra[:1]
    return ".".join(path) or "body"


def describe(error: ValidationError) -> str:
    """One short line: the field and what is allowed there (never the value whole)."""
    field = field_name(error)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    value = error.validator_value
    kind = error.validator
    if kind == "required":
        return f"{field} is missing"
    if kind == "additionalProperties":
        known = ", ".join(sorted(schema.get("properties", {}))) or "none"
        return f"{field} is not a field here (the fields are: {known})"
    if kind == "type":
        types = value if isinstance(value, list) else [value]
        return f"{field} must be {' or '.join(_A.get(str(t), str(t)) for t in types)}"
    if kind == "enum":
        return f"{field} must be one of {', '.join(repr(v) for v in value)}"
    if kind == "const":
        return f"{field} must be {value!r}"
    if kind == "pattern":
        return f"{field} {quote(error.instance)} is not valid: {allowed(str(value))}"
    if kind == "minLength":
        return f"{field} must have at least {value} character{'s' if value != 1 else ''}"
    if kind == "maxLength":
        return f"{field} is too long: at most {value} characters"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        sign = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[
            str(kind)
        ]
        return f"{field} must be {sign} {value}"
    if kind in ("minItems", "maxItems", "minProperties", "maxProperties"):
        return (
            f"{field} must have {'at least' if kind.startswith('min') else 'at most'} "
            f"{value} {'items' if kind.endswith('Items') else 'fields'}"
        )
    if kind in ("oneOf", "anyOf"):
        return f"{field} must be " + " or ".join(
            " or ".join(repr(v) for v in s["enum"])
            if "enum" in s
            else _A.get(str(s.get("type")), "something else")
            for s in value
            if isinstance(s, dict)
        )
    return f"{field} is not valid ({kind})"


_A = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "object": "a JSON object",
    "array": "a JSON array",
    "null": "null",
}


def _full_pattern(
    checker: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """``pattern`` matched against the whole string: a ``$`` that lets a final newline
    through (as Python's ``re.search`` does) would let ``name\\n`` in."""
    if isinstance(instance, str) and not re.fullmatch(pattern, instance):
        yield ValidationError(f"does not match {pattern}")


_Strict = validators.extend(Draft202012Validator, {"pattern": _full_pattern})


def validator(schema: Mapping[str, Any]) -> Any:
    """A checked validator for ``schema`` (build it once, at import); its patterns
    match whole strings."""
    Draft202012Validator.check_schema(schema)
    return _Strict(schema)


def check_json(value: Any, checker: Any, prefix: str = "") -> None:
    """Check ``value`` against ``checker``'s schema.

    Args:
        value: The parsed JSON.
        checker: From :func:`validator`.
        prefix: Put before the field's name (``share_file.``).

    Raises:
        InvalidInputError: With :func:`describe`'s line and the field's name.
    """
    error = best_match(checker.iter_errors(value))
    if error is None:
        return
    parent = error.parent
    if (
        parent is not None
        and parent.validator in ("oneOf", "anyOf")
        and parent.absolute_path == error.absolute_path
    ):
        error = parent  # no alternative fits: say what the alternatives are
    field = prefix + field_name(error) if field_name(error) != "body" else prefix.rstrip(".")
    message = describe(error)
    if prefix:
        message = prefix + message
    raise InvalidInputError(message, field or "body")


__all__ = [
    "HOST",
    "KERNEL_ID",
    "NAME",
    "PATTERN_WORDS",
    "SHARE_ID",
    "InvalidInputError",
    "allowed",
    "check_identifier",
    "check_json",
    "describe",
    "quote",
    "validator",
]


def argument_type(pattern: str, what: str) -> Callable[[str], str]:
    """An ``argparse`` ``type=`` that accepts only identifiers matching ``pattern``.

    A bad value ends the command with argparse's one-line usage error naming
    the argument, before it reaches a path, a command line or a log.

    Args:
        pattern: One of :data:`SHARE_ID`, :data:`KERNEL_ID`, :data:`HOST`, :data:`NAME`.
        what: What it is, for the message.
    """

    def check(value: str) -> str:
        try:
            return check_identifier(value, pattern, what)
        except InvalidInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    check.__name__ = what  # argparse names the type in some messages
    return check
