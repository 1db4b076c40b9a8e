"""Variables survive serialization exactly, large buffers travel out of band, and failures
name the variable and leave nothing half-done."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jupyter_remote_hw.transfer import (
    MissingVariableError,
    NotSerializableError,
    TransferError,
    dump_variable,
    dump_variables,
    load_variables,
)
from jupyter_remote_hw.transfer.kernel_side.pickling import Pickled, probe_variable

NOTEBOOK_CODE = """
def scale(x, factor=3):
    return x * factor

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm2(self):
        return self.x ** 2 + self.y ** 2

square = lambda v: v * v
"""


def round_trip(namespace: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return load_variables(dump_variables(namespace, names))


def notebook_namespace() -> dict[str, Any]:
    """Names defined as in a notebook: in ``__main__``, so not importable elsewhere."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(NOTEBOOK_CODE, namespace)  # noqa: S102 (test code, defined here)
    return namespace


def test_numpy_arrays_of_several_kinds() -> None:
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    namespace = {
        "f32": np.linspace(0, 1, 1000, dtype=np.float32),
        "i8": np.array([-3, 0, 7], dtype=np.int8),
        "c128": np.array([1 + 2j, -1j]),
        "flags": np.array([True, False, True]),
        "strided": base[::2, 1::3],  # not contiguous
        "transposed": base.T,
        "scalar": np.array(5.5),  # 0-d
        "structured": np.array([(1, 2.5)], dtype=[("a", "i4"), ("b", "f8")]),
    }
    back = round_trip(namespace, list(namespace))
    for name, value in namespace.items():
        assert back[name].dtype == value.dtype, name
        assert back[name].shape == value.shape, name
        np.testing.assert_array_equal(back[name], value)


def test_large_buffers_are_out_of_band_views_not_copies() -> None:
    array = np.ones(1_000_000, dtype=np.float32)
    (pickled,) = dump_variables({"a": array}, ["a"])
    assert len(pickled.buffers) == 1
    assert len(pickled.data) < 1000  # the 4 MB are not in the pickle stream
    view = np.frombuffer(pickled.buffers[0], dtype=np.float32)
    assert np.shares_memory(view, array)
    assert pickled.nbytes >= array.nbytes


def test_pandas_frame_with_mixed_dtypes_and_index() -> None:
    frame = pd.DataFrame(
        {
            "x": np.arange(5, dtype=np.int64),
            "y": np.linspace(0, 1, 5),
            "label": list("abcde"),
            "when": pd.date_range("2026-01-01", periods=5, freq="D"),
            "kind": pd.Categorical(["a", "b", "a", "c", "b"]),
        },
        index=pd.Index([10, 20, 30, 40, 50], name="row"),
    )
    back = round_trip({"df": frame}, ["df"])["df"]
    pd.testing.assert_frame_equal(back, frame)


def test_nested_containers() -> None:
    value = {"a": [1, 2.5, "three", None, (4, 5)], "b": {"c": {1, 2}, "d": b"bytes"}}
    assert round_trip({"v": value}, ["v"])["v"] == value


def test_functions_lambdas_and_classes_defined_in_the_notebook() -> None:
    namespace = notebook_namespace()
    namespace["p"] = namespace["Point"](3, 4)
    pickled = dump_variables(namespace, ["scale", "square", "Point", "p"])
    # By value: a process without this "__main__" rebuilds them.
    fresh = load_variables(pickled)
    assert fresh["scale"](2) == 6
    assert fresh["square"](7) == 49
    assert fresh["Point"](1, 2).norm2() == 5
    assert fresh["p"].norm2() == 25


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: threading.Lock(), "a lock"),
        (lambda: (i for i in range(3)), "a generator"),
    ],
)
def test_unpicklable_variable_is_named_and_nothing_is_returned(make: Any, words: str) -> None:
    namespace = {"ok": np.arange(3), "bad": make(), "after": 1}
    with pytest.raises(NotSerializableError) as failure:
        dump_variables(namespace, ["ok", "bad", "after"])
    assert failure.value.name == "bad"
    assert words in str(failure.value)
    assert "'bad'" in str(failure.value) and "Nothing was sent" in str(failure.value)


def test_open_file_is_refused_not_read(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("secret contents")
    with path.open() as handle, pytest.raises(NotSerializableError) as failure:
        dump_variables({"fh": handle}, ["fh"])
    assert failure.value.type_name == "_io.TextIOWrapper"
    assert "open file" in str(failure.value)
    assert "secret" not in str(failure.value)


def test_missing_variable_is_named() -> None:
    with pytest.raises(MissingVariableError) as failure:
        dump_variables({"a": 1}, ["a", "b"])
    assert failure.value.name == "b"


def test_a_variable_that_cannot_be_rebuilt_fails_the_whole_load() -> None:
    good = dump_variables({"a": 1}, ["a"])
    broken = Pickled("b", "somewhere.Missing", b"\x80\x05cno_such_module\nThing\n.")
    with pytest.raises(TransferError) as failure:
        load_variables([*good, broken])
    assert failure.value.name == "b"
    assert "no_such_module" in str(failure.value)


def test_torch_tensors_travel_out_of_band_and_keep_their_kind() -> None:
    torch = pytest.importorskip("torch")
    namespace = {
        "dense": torch.arange(1000, dtype=torch.float32).reshape(10, 100),
        "half": torch.ones(4, dtype=torch.bfloat16),
        "leaf": torch.ones(3, requires_grad=True),
        "strided": torch.arange(12).reshape(3, 4)[:, ::2],
        "model": torch.nn.Linear(100, 2),
    }
    pickled = {p.name: p for p in dump_variables(namespace, list(namespace))}
    # The 4000 bytes of "dense" are a buffer beside the pickle, not in it.
    assert len(pickled["dense"].buffers) == 1 and len(pickled["dense"].data) < 500
    back = load_variables(list(pickled.values()))
    for name in ("dense", "half", "leaf", "strided"):
        assert back[name].dtype == namespace[name].dtype, name
        assert torch.equal(back[name].detach(), namespace[name].detach()), name
    assert back["leaf"].requires_grad and not back["dense"].requires_grad
    x = torch.ones(1, 100)
    assert torch.equal(back["model"](x), namespace["model"](x))


def test_cuda_tensors_come_back_on_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    value = {"t": torch.arange(6.0, device="cuda"), "m": torch.nn.Linear(2, 2).cuda()}
    back = load_variables(dump_variables(value, ["t", "m"]))
    assert back["t"].device.type == "cpu" and back["m"].weight.device.type == "cpu"
    assert torch.equal(back["t"], value["t"].cpu())


def test_a_trial_pickle_counts_the_bytes_a_transfer_takes_or_says_why_not(tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": np.arange(1000), "b": ["x"] * 1000})
    for name, value in (
        ("n", 3),
        ("arr", np.ones((300, 300))),
        ("frame", frame),
        ("scale", notebook_namespace()["scale"]),
    ):
        assert probe_variable(name, value) == dump_variable(name, value).nbytes
    with pytest.raises(NotSerializableError) as caught:
        probe_variable("lk", threading.Lock())
    assert caught.value.name == "lk"
    assert "cannot pickle '_thread.lock'" in caught.value.reason
    with open(tmp_path / "f.txt", "w") as handle, pytest.raises(NotSerializableError) as caught:
        probe_variable("handle", handle)
    assert "it is an open file" in caught.value.reason
