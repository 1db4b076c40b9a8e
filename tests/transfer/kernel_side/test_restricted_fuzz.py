"""Fuzzing the restricted loader: hypothesis writes pickle programs from the allowlisted
globals (and a few that are not allowed), numpy dtype and array states, and the opcodes
that call, build, add items, memoize and take out-of-band buffers; a child process loads
each (see :mod:`.loader_child`).

Whatever the stream, loading never crashes or hangs the process, never calls anything
outside the allowlist, writes no file and runs no command, and either returns plain data
or raises the loader's own error.

In CI it runs :data:`EXAMPLES` streams (about half a minute); ``JRHW_FUZZ_EXAMPLES=20000``
runs it longer (docs/development.md).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_remote_hw.transfer.kernel_side.allowlist import ALLOWED

from .loader_child import LoaderChild

#: Streams a CI run loads; ``JRHW_FUZZ_EXAMPLES`` sets another number.
EXAMPLES = int(os.environ.get("JRHW_FUZZ_EXAMPLES") or 250)

NOT_ALLOWED = [
    ("builtins", "getattr"),
    ("builtins", "type"),
    ("builtins", "eval"),
    ("os", "system"),
    ("numpy", "save"),
    ("numpy.lib.format", "read_array"),
    ("numpy._core.multiarray", "dtype"),  # numpy.dtype at another path
    ("pandas.core.frame", "DataFrame"),
]
GLOBALS = sorted(ALLOWED) + NOT_ALLOWED
TYPE_STRINGS = ["O", "f8", "<i4", ">u2", "V8", "V16", "U3", "S4", "M8", "m8", "b1", "c16", "?"]


def short_str(text: str) -> bytes:
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data


def short_bytes(data: bytes) -> bytes:
    return b"C" + bytes([len(data)]) + data


def an_int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def push_global(module: str, name: str) -> bytes:
    return short_str(module) + short_str(name) + b"\x93"


OPCODES = {
    "none": b"N",
    "true": b"\x88",
    "false": b"\x89",
    "empty tuple": b")",
    "empty list": b"]",
    "empty dict": b"}",
    "empty set": b"\x8f",
    "mark": b"(",
    "tuple": b"t",
    "tuple1": b"\x85",
    "tuple2": b"\x86",
    "tuple3": b"\x87",
    "list": b"l",
    "dict": b"d",
    "frozenset": b"\x91",
    "setitem": b"s",
    "setitems": b"u",
    "append": b"a",
    "appends": b"e",
    "additems": b"\x90",
    "reduce": b"R",
    "newobj": b"\x81",
    "newobj_ex": b"\x92",
    "build": b"b",
    "obj": b"o",
    "memoize": b"\x94",
    "dup": b"2",
    "pop": b"0",
    "pop mark": b"1",
    "next buffer": b"\x97",
    "readonly buffer": b"\x98",
}

pieces = st.one_of(
    st.sampled_from(list(OPCODES.values())),
    st.integers(-1000, 1000).map(an_int),
    st.sampled_from([0, 1, 8, 24, 1 << 16, -1, 1 << 30]).map(an_int),
    st.text(max_size=8).map(short_str),
    st.binary(max_size=32).map(short_bytes),
    st.floats(allow_nan=True).map(lambda f: b"G" + struct.pack(">d", f)),
    st.integers(0, 20).map(lambda n: b"h" + bytes([n])),  # BINGET
    st.sampled_from(GLOBALS).map(lambda pair: push_global(*pair)),
    st.sampled_from(TYPE_STRINGS).map(
        lambda t: push_global("numpy", "dtype") + short_str(t) + b"\x89\x88\x87R"
    ),
    st.sampled_from(["<", ">", "|", "="]).map(lambda e: an_int(3) + short_str(e)),
    st.just(
        push_global("numpy._core.multiarray", "_reconstruct")
        + push_global("numpy", "ndarray")
        + an_int(0)
        + b"\x85"
        + short_bytes(b"b")
        + b"\x87R"
    ),
    st.just(push_global("numpy._core.numeric", "_frombuffer")),
    st.just(push_global("numpy._core.multiarray", "scalar")),
)


@st.composite
def programs(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A pickle stream (protocol 5) and its out-of-band buffers."""
    body = b"".join(draw(st.lists(pieces, min_size=1, max_size=40)))
    buffers = draw(st.lists(st.binary(max_size=64), max_size=3))
    return b"\x80\x05" + body + b".", buffers


@pytest.fixture(scope="module")
def child() -> Iterator[LoaderChild]:
    loader = LoaderChild()
    yield loader
    loader.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="JRHW_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(program=programs())
def test_any_stream_loads_as_plain_data_or_is_refused(
    child: LoaderChild, program: tuple[bytes, list[bytes]]
) -> None:
    data, buffers = program
    outcome = child.load(data, buffers)
    assert outcome in ("ok", "refused"), (outcome, data, buffers)
