"""Known gadgets against the restricted loader, kept as regression tests: each is refused
by the loader's own error, in a child process (see :mod:`.loader_child`), so that one
that crashes the loader fails here instead of ending the run.

The first is issue 31's: a ``numpy.dtype`` whose state says it holds no objects while
its field is an object, then an array of it from the sender's bytes. Loaded with plain
pickle, it crashes the process (also shown here, in a child).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from .loader_child import LoaderChild

_core = np._core  # numpy 2; our allowlist also names numpy.core's spelling for numpy 1
FROMBUFFER = _core.numeric._frombuffer
RECONSTRUCT = _core.multiarray._reconstruct
SCALAR = _core.multiarray.scalar
OBJECT_FIELD = {"a": (np.dtype("O"), 0)}
POINTERS = b"\x41" * 8  # eight bytes the sender chose, read as a PyObject*


class Reduce:
    """An object that pickles as ``func(*args)``, then ``BUILD`` with ``state`` if given."""

    def __init__(self, func: Any, args: tuple[Any, ...], state: Any = None) -> None:
        self.func, self.args, self.state = func, args, state

    def __reduce__(self) -> tuple[Any, ...]:
        if self.state is None:
            return (self.func, self.args)
        return (self.func, self.args, self.state)


def forged_dtype(flags: int = 0) -> Reduce:
    """``V8`` whose state gives it an object field and ``flags`` (0: "holds no objects")."""
    return Reduce(np.dtype, ("V8", False, True), (3, "|", None, ("a",), OBJECT_FIELD, 8, 1, flags))


def stream(value: Any) -> bytes:
    return pickle.dumps(value, protocol=5)


def gadgets() -> dict[str, bytes]:
    """Every known gadget, by what it tries."""
    forged = forged_dtype()
    float_state = (3, "<", None, None, None, -1, -1, 0)
    return {
        "forged dtype, _frombuffer of its bytes": stream(
            Reduce(FROMBUFFER, (bytearray(POINTERS), forged, (1,), "C"))
        ),
        "forged dtype, scalar of its bytes": stream(Reduce(SCALAR, (forged, POINTERS))),
        "forged dtype, array state of its bytes": stream(
            Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"), (1, (1,), forged, False, POINTERS))
        ),
        "forged object flags on the object dtype, then _frombuffer": stream(
            Reduce(
                FROMBUFFER,
                (
                    bytearray(POINTERS),
                    Reduce(np.dtype, ("O", False, True), (3, "|", None, None, None, -1, -1, 0)),
                    (1,),
                    "C",
                ),
            )
        ),
        "numpy's shared float64 dtype given a state (copy=False)": stream(
            Reduce(np.dtype, ("f8", False, False), float_state)
        ),
        "dtype with object fields from its constructor string": stream(
            Reduce(FROMBUFFER, (bytearray(POINTERS), Reduce(np.dtype, ("O,i4",)), (1,), "C"))
        ),
        "object dtype, _frombuffer of pointers": stream(
            Reduce(FROMBUFFER, (bytearray(POINTERS), np.dtype("O"), (1,), "C"))
        ),
        "object dtype, array state of bytes": stream(
            Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"), (1, (1,), np.dtype("O"), False, POINTERS))
        ),
        "ndarray called with a buffer": stream(
            Reduce(np.ndarray, ((1,), np.dtype("O"), bytearray(POINTERS)))
        ),
        "field offset past the end of the item": stream(
            Reduce(
                FROMBUFFER,
                (
                    bytearray(8),
                    Reduce(
                        np.dtype,
                        ("V8", False, True),
                        (3, "|", None, ("a",), {"a": (np.dtype("f8"), 4096)}, 8, 1, 0),
                    ),
                    (1,),
                    "C",
                ),
            )
        ),
        "array bytes shorter than its shape": stream(
            Reduce(
                RECONSTRUCT, (np.ndarray, (0,), b"b"), (1, (1 << 20,), np.dtype("f8"), False, b"")
            )
        ),
        "object array state with a short list": stream(
            Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"), (1, (1 << 20,), np.dtype("O"), False, []))
        ),
        "an empty masked array of a huge shape": stream(
            Reduce(np.ma.core._mareconstruct, (np.ma.MaskedArray, np.ndarray, (1 << 40,), "O"))
        ),
        "bytearray of a huge size": stream(Reduce(bytearray, (1 << 40,))),
        "categorical codes past its categories": stream(
            Reduce(
                pd.Categorical,
                (["a"],),
                (pd.CategoricalDtype(["a"]), np.array([1 << 30], dtype=np.int64)),
            )
        ),
        "numpy.lib.format reading an object header": stream(
            Reduce(np.lib.format.read_array, (bytearray(b"\x93NUMPY"),))
        ),
        "state set on an ordered dict": stream(
            Reduce(__import__("collections").OrderedDict, (), {"x": 1})
        ),
    }


def set_state_twice() -> bytes:
    """An array's state set a second time, once a view of its memory exists (numpy frees
    the memory the view still reads)."""
    once = stream(
        Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"), (1, (4,), np.dtype("u1"), False, b"abcd"))
    )
    # ... then BUILD again on the same array, with new data.
    again = pickle.dumps((1, (1,), np.dtype("u1"), False, b"z"), protocol=5)[2:-1]
    return once[:-1] + again + b"b."


def dict_items_on_a_frame() -> bytes:
    """``SETITEMS`` on a DataFrame: pandas' ``__setitem__`` with the sender's values."""
    frame = stream(pd.DataFrame({"x": [1]}))
    return frame[:-1] + b"(X\x01\x00\x00\x00yK\x01u."


@pytest.fixture(scope="module")
def child() -> Iterator[LoaderChild]:
    loader = LoaderChild()
    yield loader
    loader.close()


@pytest.mark.parametrize("name", list(gadgets()))
def test_a_known_gadget_is_refused_by_the_loader(child: LoaderChild, name: str) -> None:
    assert child.load(gadgets()[name]) == "refused"


def test_an_array_gets_its_state_once_and_items_go_only_into_builtin_containers(
    child: LoaderChild,
) -> None:
    assert child.load(set_state_twice()) == "refused"
    assert child.load(dict_items_on_a_frame()) == "refused"


def test_numpys_shared_dtypes_are_never_changed(child: LoaderChild) -> None:
    check = stream(Reduce(np.dtype, ("f8", False, False), (3, ">", None, None, None, -1, -1, 0)))
    assert child.load(check) == "refused"
    assert child.load(stream(np.arange(3.0))) == "ok"  # float64 still reads as float64


def test_the_forged_dtype_crashes_plain_pickle() -> None:
    """What the loader refuses is what the issue says: plain pickle segfaults on it."""
    code = "import pickle, sys; data = sys.stdin.buffer.read(); print(repr(pickle.loads(data)[0]))"
    ended = subprocess.run(
        [sys.executable, "-c", code],
        input=gadgets()["forged dtype, _frombuffer of its bytes"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ended.returncode < 0 or ended.returncode > 1, ended
