"""Saying where a variable's tensors live, and putting variables back there one by one."""

from __future__ import annotations

import collections

import pytest

from jupyter_remote_hw.transfer.kernel_side.devices import device_of
from jupyter_remote_hw.transfer.kernel_side.kernel_handler import _placed

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")


def test_the_device_of_tensors_modules_and_the_containers_around_them() -> None:
    point = collections.namedtuple("point", "x y")
    assert device_of(torch.ones(2)) == "cpu"
    assert device_of(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))) == "cpu"
    assert device_of({"a": [torch.ones(1), (torch.zeros(1), 3)], "b": "text"}) == "cpu"
    # What holds no tensor, or only where to_device does not look, has no device.
    assert device_of([1, "two", {"three": 3.0}]) is None
    assert device_of(point(torch.ones(1), 2)) is None
    assert device_of(torch.nn.ReLU()) is None
    # Meta tensors hold no memory: nothing to put back.
    assert device_of(torch.empty(3, device="meta")) is None
    assert device_of([torch.empty(3, device="meta"), torch.ones(1)]) == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host without CUDA")
def test_a_variable_that_cannot_go_to_its_device_stays_on_the_cpu_with_the_reason() -> None:
    values = {"t": torch.arange(3.0), "layer": torch.nn.Linear(2, 2), "n": 5}
    where = _placed(values, {"t": "cuda:0", "layer": "cuda:0", "gone": "cuda:0"})
    assert sorted(where) == ["layer", "t"]
    for name in ("t", "layer"):
        assert where[name]["device"] == "cpu" and where[name]["reason"], name
    assert values["t"].device.type == "cpu" and torch.equal(values["t"], torch.arange(3.0))
    assert values["layer"].weight.device.type == "cpu" and values["n"] == 5
    assert _placed(values, {"t": "cpu"}) == {"t": {"device": "cpu"}}
