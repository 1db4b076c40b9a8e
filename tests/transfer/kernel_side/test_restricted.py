"""Variables from a kernel someone else can run code in: data comes back equal, a pickle that
would run code is refused before anything runs, naming the variable, what it calls and the
setting, and nothing is assigned."""

from __future__ import annotations

import collections
import datetime
import decimal
import fractions
import os
import pathlib
import pickle
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from traitlets import TraitError
from traitlets.config import Config

from jupyter_remote_hw.transfer import TransferError, dump_variable, dump_variables
from jupyter_remote_hw.transfer.kernel_side.pickling import Pickled, from_segments, to_segments
from jupyter_remote_hw.transfer.kernel_side.restricted import (
    SETTING,
    SharedKernelPulls,
    load_variables_restricted,
)

SOURCE = "ssh-gpu-box (a kernel that someone else can run code in)"


def received(pickled: list[Pickled]) -> list[Pickled]:
    """What the receiving side holds: the stream and out-of-band buffers as received bytes."""
    manifest, segments = to_segments(pickled)
    return from_segments(manifest, [bytearray(segment) for segment in segments])


def restricted_round_trip(values: dict[str, Any], allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    return load_variables_restricted(
        received(dump_variables(values, list(values))), SOURCE, allowed
    )


def data_science_values() -> dict[str, Any]:
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    return {
        "plain": [
            1,
            2.5,
            1 + 2j,
            "s",
            b"b",
            bytearray(b"x"),
            None,
            True,
            (1,),
            {1, 2},
            frozenset({3}),
            range(3),
            slice(1, 2, 3),
            Ellipsis,
            type(None),
        ],
        "collections": [
            collections.OrderedDict(a=1),
            collections.defaultdict(list, a=[1]),
            collections.Counter("abca"),
            collections.deque([1, 2], maxlen=5),
        ],
        "times": [
            datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.UTC),
            datetime.date(2026, 1, 2),
            datetime.time(1, 2),
            datetime.timedelta(3),
        ],
        "numbers": [decimal.Decimal("1.5"), fractions.Fraction(1, 3)],
        "ids": [uuid.UUID(int=7), pathlib.PurePosixPath("a/b"), pathlib.Path("/tmp/x")],
        "array": base,
        "strided": base[::2, 1::3],
        "fortran": np.asfortranarray(base),
        "scalars": [
            np.float64(1.5),
            np.int8(-2),
            np.bool_(True),
            np.complex128(1j),
            np.datetime64("2026-01-01"),
            np.str_("a"),
        ],
        "dtypes": [np.dtype("f4"), np.dtype([("a", "i4"), ("b", "f8")])],
        "records": np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]),
        "masked": np.ma.masked_array([1, 2, 3], mask=[False, True, False]),
        "objects": np.array([1, "two", None], dtype=object),
        "rng": np.random.default_rng(0),
        "frame": pd.DataFrame(
            {
                "x": np.arange(3),
                "name": ["a", "b", "c"],
                "f": [0.5, None, 2.0],
                "when": pd.date_range("2026-01-01", periods=3),
                "utc": pd.date_range("2026-01-01", periods=3, tz="UTC"),
                "paris": pd.date_range("2026-01-01", periods=3, tz="Europe/Paris"),
                "took": pd.to_timedelta([1, 2, 3], unit="s"),
                "month": pd.period_range("2026-01", periods=3, freq="M"),
                "bin": pd.interval_range(0, 3),
                "kind": pd.Categorical(["u", "v", "u"]),
                "n": pd.array([1, None, 3], dtype="Int64"),
                "ok": pd.array([True, None, False], dtype="boolean"),
            },
            index=pd.Index(["p", "q", "r"], name="key"),
        ),
        "series": pd.Series(
            [1.0, 2.0], name="s", index=pd.MultiIndex.from_tuples([(1, "a"), (2, "b")])
        ),
        "pandas_scalars": [
            pd.Timestamp("2026-01-01", tz="UTC"),
            pd.Timedelta("1D"),
            pd.Period("2026-01", "M"),
            pd.Interval(0, 1),
            pd.NaT,
            pd.offsets.MonthEnd(),
        ],
    }


def test_data_science_values_come_back_equal_with_out_of_band_buffers() -> None:
    values = data_science_values()
    pickled = dump_variables(values, list(values))
    assert pickled[[p.name for p in pickled].index("array")].buffers  # out of band
    back = restricted_round_trip(values)
    assert back.keys() == values.keys()
    for name, value in values.items():
        got = back[name]
        if isinstance(value, np.ma.MaskedArray):
            assert (got.mask == value.mask).all() and (got.data == value.data).all()
        elif isinstance(value, np.ndarray):
            assert got.dtype == value.dtype and got.shape == value.shape
            assert (got == value).all(), name
        elif isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(got, value)
        elif isinstance(value, pd.Series):
            pd.testing.assert_series_equal(got, value)
        elif isinstance(value, np.random.Generator):
            assert got.integers(1000) == np.random.default_rng(0).integers(1000)
        elif name == "pandas_scalars":
            assert got[:4] == value[:4] and got[4] is pd.NaT and got[5] == value[5]
        else:
            assert got == value, name


def test_torch_tensors_as_our_pickler_reduces_them_come_back_equal() -> None:
    torch = pytest.importorskip("torch")
    values = {
        "c": torch.arange(1000.0),
        "t": torch.arange(12.0).reshape(3, 4)[:, ::2],
        "h": torch.ones(5, dtype=torch.bfloat16),
        "g": torch.ones(2, requires_grad=True),
        "p": torch.nn.Parameter(torch.ones(3)),
        "kinds": [torch.float32, torch.Size([2, 3]), torch.device("cpu")],
    }
    assert dump_variable("c", values["c"]).buffers  # out of band
    back = restricted_round_trip(values)
    assert torch.equal(back["c"], values["c"])
    assert torch.equal(back["t"], values["t"])
    assert back["h"].dtype == torch.bfloat16 and torch.equal(back["h"], values["h"])
    assert back["g"].requires_grad and torch.equal(back["g"], values["g"])
    assert isinstance(back["p"], torch.nn.Parameter) and torch.equal(back["p"], values["p"])
    assert back["kinds"] == values["kinds"]


class Planted:
    """What a collaborator leaves in a shared kernel: unpickling it runs a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class Evaluated:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (eval, (f"open({str(self.marker)!r}, 'w')",))


class NumpyGadget:
    """A numpy function that writes files (never allowed: numpy is not allowed wholesale)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (np.save, (str(self.marker), np.zeros(1)))


def getattr_chain(marker: Path) -> bytes:
    """``getattr(pandas.DataFrame, 'to_pickle')(frame, marker)`` written by hand: an
    allowed class, a method of it that writes a file."""
    frame = pickle.dumps(pd.DataFrame({"x": [1]}), protocol=5)
    assert frame.endswith(b".")
    return (
        b"\x80\x05cbuiltins\ngetattr\ncpandas\nDataFrame\nX\x09\x00\x00\x00to_pickle\x86R"
        + frame[2:-1]
        + b"X"
        + len(str(marker)).to_bytes(4, "little")
        + str(marker).encode()
        + b"\x86R."
    )


@pytest.mark.parametrize("kind", ["os.system", "eval", "numpy", "getattr"])
def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(
    tmp_path: Path, kind: str
) -> None:
    marker = tmp_path / "ran"
    good = dump_variable("good", np.arange(3))
    if kind == "getattr":
        evil = Pickled("evil", "pandas.DataFrame", getattr_chain(marker))
        refused = "pandas.DataFrame.to_pickle (through builtins.getattr)"
    else:
        planted = {"os.system": Planted, "eval": Evaluated, "numpy": NumpyGadget}[kind](marker)
        evil = dump_variable("evil", planted)
        refused = {
            "os.system": f"{os.system.__module__}.system",
            "eval": "builtins.eval",
            "numpy": "numpy.save",
        }[kind]
    with pytest.raises(TransferError) as caught:
        load_variables_restricted(received([good, evil]), SOURCE)
    message = str(caught.value)
    assert caught.value.name == "evil"
    assert f"refused to rebuild 'evil' ({evil.type_name}) from {SOURCE}" in message
    assert f"its pickle calls {refused}," in message
    assert "Nothing was assigned." in message
    name = refused.split(" ")[0]
    assert f"add '{name}' to {SETTING} in jupyter_server_config.py" in message
    assert not marker.exists() and not list(tmp_path.iterdir())


def test_a_pickle_cannot_patch_a_class_or_make_one() -> None:
    # fractions.Fraction, then BUILD with slot state {"evil": 1}: setattr on the class.
    patch = b"\x80\x05cfractions\nFraction\nN}X\x04\x00\x00\x00evilK\x01s\x86b."
    # type("X", (object,), {}): a new class.
    new_class = b"\x80\x05cbuiltins\ntype\nX\x01\x00\x00\x00Xcbuiltins\nobject\n\x85}\x87R."
    for data, refused in (
        (patch, "fractions.Fraction (setting attributes of a class"),
        (new_class, "builtins.type (other than type(None))"),
    ):
        with pytest.raises(TransferError, match="This cannot be allowed") as caught:
            load_variables_restricted([Pickled("x", "?", data)], SOURCE)
        assert refused in str(caught.value)
    assert not hasattr(fractions.Fraction, "evil")
    # The plain unpickler would have patched it: the stream is what the test says.
    pickle.loads(patch)
    assert fractions.Fraction.evil == 1  # type: ignore[attr-defined]
    del fractions.Fraction.evil  # type: ignore[attr-defined]


class Result:
    """A type of the user's own that they allow in the setting."""

    def __init__(self, score: float) -> None:
        self.score = score


def test_the_setting_allows_listed_types_and_the_error_lists_every_one_needed() -> None:
    both = {"results": [Result(0.5), collections.namedtuple("Pair", "a b")]}
    name = f"{__name__}.Result"
    with pytest.raises(TransferError) as caught:
        restricted_round_trip({"result": Result(0.5), "ok": 1})
    assert f"its pickle calls {name}," in str(caught.value)
    assert f"{SETTING} = ['{name}']" in str(caught.value)
    back = restricted_round_trip({"result": Result(0.5), "ok": 1}, (name,))
    assert back["result"].score == 0.5 and back["ok"] == 1
    # A by-value class needs cloudpickle's functions, all listed in one go.
    with pytest.raises(TransferError) as caught:
        restricted_round_trip(both, (name,))
    message = str(caught.value)
    assert "them" in message and message.count("'cloudpickle.cloudpickle.") >= 2


def test_the_setting_reads_from_config_and_refuses_what_is_not_module_qualname() -> None:
    config = Config({"SharedKernelPulls": {"allowed_types": ["mypkg.models.Result"]}})
    assert SharedKernelPulls(config=config).allowed_types == ["mypkg.models.Result"]
    with pytest.raises(TraitError, match="is not module.Qualname"):
        SharedKernelPulls(allowed_types=["Result"])
    with pytest.raises(TraitError, match="is not module.Qualname"):
        SharedKernelPulls(allowed_types=["os.system; rm"])
