"""Push, pull and copy between real kernels: values come back equal, chunked transfers are
all-or-nothing, and every failure names the variable."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from typing import Any

import numpy as np
import pandas as pd
import pytest

from jupyter_remote_hw.transfer import TransferError, dump_variables, load_variables

from .conftest import MODES, StartKernel, evaluate, run
from .kernel_side.test_pickling import notebook_namespace


def sample_values() -> dict[str, Any]:
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    namespace = notebook_namespace()
    return {
        "f32": np.linspace(0, 1, 300_000, dtype=np.float32),  # 1.2 MB: many 64 KiB chunks
        "i16": np.array([-3, 0, 7], dtype=np.int16),
        "strided": base[::2, 1::3],
        "scalar": np.array(2.5),
        "frame": pd.DataFrame(
            {
                "x": np.arange(4),
                "name": ["a", "b", "c", "d"],
                "when": pd.date_range("2026-01-01", periods=4),
            },
            index=pd.Index(["w", "x", "y", "z"], name="key"),
        ),
        "nested": {"list": [1, "two", (3.0, None)], "inner": {"set": {1, 2}}},
        "scale": namespace["scale"],
        "Point": namespace["Point"],
        "square": namespace["square"],
    }


def assert_same(name: str, back: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape, name
        np.testing.assert_array_equal(back, value)
    elif isinstance(value, pd.DataFrame):
        pd.testing.assert_frame_equal(back, value)
    elif name == "scale":
        assert back(5) == 15
    elif name == "Point":
        assert back(3, 4).norm2() == 25
    elif name == "square":
        assert back(7) == 49
    else:
        assert back == value, name


@MODES
async def test_push_then_pull_gives_equal_values(start_kernel: StartKernel, streams: bool) -> None:
    kernel = await start_kernel(streams=streams)
    values = sample_values()
    assigned = await kernel.push(dump_variables(values, list(values)))
    assert [a["name"] for a in assigned] == list(values)
    # The kernel really has them, rebuilt there: a function defined in this
    # "notebook" runs in the kernel.
    assert await evaluate(kernel.link, "scale(f32).sum().item() > 0") == "True"
    assert await evaluate(kernel.link, "Point(1, 2).norm2()") == "5"
    back = load_variables(await kernel.pull(list(values)))
    for name, value in values.items():
        assert_same(name, back[name], value)


@MODES
async def test_large_transfer_reports_progress_in_chunks(
    start_kernel: StartKernel, streams: bool
) -> None:
    kernel = await start_kernel(chunk_size=256 * 1024, streams=streams)
    array = np.random.default_rng(1).random(1_000_000)  # 8 MB: 31 chunks, or 8 stream pieces
    seen: list[tuple[int, int]] = []
    await kernel.push(
        dump_variables({"big": array}, ["big"]),
        progress=lambda done, total: seen.append((done, total)),
    )
    assert len(seen) >= 7
    assert seen[-1][0] == seen[-1][1] >= array.nbytes
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))
    pulled: list[tuple[int, int]] = []
    back = load_variables(await kernel.pull(["big"], progress=lambda d, t: pulled.append((d, t))))
    np.testing.assert_array_equal(back["big"], array)
    assert len(pulled) >= 7
    assert pulled[-1][0] == pulled[-1][1] >= array.nbytes
    # What arrived is a normal, writable array.
    back["big"][0] = -1.0


async def test_unpicklable_input_fails_before_anything_is_assigned(
    start_kernel: StartKernel,
) -> None:
    kernel = await start_kernel()
    import threading

    namespace = {"ok": 1, "lock": threading.Lock(), "later": 2}
    with pytest.raises(TransferError, match=r"'lock' \(_thread.lock\).*a lock") as caught:
        await kernel.push(dump_variables(namespace, ["ok", "lock", "later"]))
    assert caught.value.name == "lock"
    assert (
        await evaluate(kernel.link, "[n in globals() for n in ('ok', 'lock', 'later')]")
        == "[False, False, False]"
    )


async def test_pull_of_an_unpicklable_or_missing_variable_names_it(
    start_kernel: StartKernel,
) -> None:
    kernel = await start_kernel()
    await run(kernel.link, "gen = (i for i in range(3))\nfine = 5")
    with pytest.raises(TransferError, match=r"'gen' \(generator\).*a generator") as caught:
        await kernel.pull(["fine", "gen"])
    assert caught.value.name == "gen"
    with pytest.raises(TransferError, match="no variable named 'nope'"):
        await kernel.pull(["nope"])


def open_sockets() -> int:
    """How many sockets this process has open."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own, closed by now
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return sum(1 for link in links if link.startswith("socket:"))


@MODES
async def test_an_interrupted_push_assigns_nothing_and_is_forgotten(
    start_kernel: StartKernel,
    streams: bool,
) -> None:
    kernel = await start_kernel(chunk_size=64 * 1024, window=1, streams=streams)
    array = np.ones(40_000_000)  # 320 MB: 5120 chunks one at a time, or 320 stream pieces
    sockets_before = open_sockets()
    started = asyncio.Event()

    def progress(done: int, total: int) -> None:
        started.set()

    push = asyncio.create_task(
        kernel.push(dump_variables({"a": array, "b": 1}, ["a", "b"]), progress=progress)
    )
    await started.wait()
    push.cancel()
    with pytest.raises(asyncio.CancelledError):
        await push
    # Its bulk streams are closed by the time the push has ended, what they had not
    # sent dropped rather than left to drain into a kernel that no longer reads.
    await asyncio.sleep(0)
    assert open_sockets() <= sockets_before
    assert await evaluate(kernel.link, "'a' in globals() or 'b' in globals()") == "False"
    # The kernel dropped the half-received buffers (the abort reached it).
    handler = "get_ipython().kernel.shell_handlers['remote_hw_transfer_request']"
    assert await evaluate(kernel.link, f"{handler}.__self__.pending") == "0"


async def test_a_class_missing_on_the_receiving_side_assigns_nothing(
    start_kernel: StartKernel,
) -> None:
    kernel = await start_kernel()
    await run(
        kernel.link,
        "import types, sys\n"
        "mod = types.ModuleType('only_here')\n"
        "exec('class Thing:\\n    pass', mod.__dict__)\n"
        "sys.modules['only_here'] = mod\n"
        "thing = mod.Thing()\nplain = 3",
    )
    with pytest.raises(TransferError, match=r"cannot rebuild 'thing' \(only_here.Thing\)"):
        load_variables(await kernel.pull(["plain", "thing"]))


async def test_device_cuda_on_a_host_without_cuda_fails_first(start_kernel: StartKernel) -> None:
    pytest.importorskip("torch")
    kernel = await start_kernel()
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA; the refusal is for hosts without it")
    with pytest.raises(TransferError, match="--device cuda: this host has no usable CUDA device"):
        await kernel.push(dump_variables({"t": torch.ones(3)}, ["t"]), device="cuda")
    assert await evaluate(kernel.link, "'t' in globals()") == "False"


@MODES
async def test_copy_between_kernels_streams_through_the_client(
    start_kernel: StartKernel,
    streams: bool,
) -> None:
    source = await start_kernel(streams=streams)
    destination = await start_kernel(streams=streams)
    await run(source.link, "import numpy as np\nx = np.arange(500_000)\nlabel = 'from source'")
    assigned = await source.copy_to(destination, ["x", "label"])
    assert [a["name"] for a in assigned] == ["x", "label"]
    assert (
        await evaluate(destination.link, "int(x.sum()), label") == "(124999750000, 'from source')"
    )
    with pytest.raises(TransferError, match="no variable named 'missing'"):
        await source.copy_to(destination, ["label", "missing"])


async def test_variables_listing_and_the_comm_target(start_kernel: StartKernel) -> None:
    kernel = await start_kernel()
    await run(kernel.link, "import numpy as np\nweights = np.zeros(1000)\nname = 'w'")
    listing = {v["name"]: v for v in await kernel.variables()}
    assert listing["weights"]["type"] == "numpy.ndarray"
    assert listing["weights"]["nbytes"] == 8000
    # Only the user's: not modules, nor what IPython and ipykernel put there.
    assert set(listing) == {"weights", "name"}
    # A name the user assigned is theirs, even one IPython had used.
    await run(kernel.link, "open = 3")
    assert "open" in {v["name"] for v in await kernel.variables()}
    # Frontends that speak comms get the same answers on the comm target.
    client = kernel.link.client
    seen: list[dict[str, Any]] = []
    opened = client.session.msg(
        "comm_open",
        {"comm_id": "c1", "target_name": "jupyter_remote_hw.transfer", "data": {"op": "hello"}},
    )
    kernel.link._outputs[opened["header"]["msg_id"]] = seen.append
    client.session.send(kernel.link._shell_stream(), opened)
    for _ in range(100):
        if any(m["msg_type"] == "comm_msg" for m in seen):
            break
        await asyncio.sleep(0.05)
    (answer,) = [m for m in seen if m["msg_type"] == "comm_msg"]
    assert answer["content"]["data"]["version"] == 1
    assert answer["content"]["data"]["status"] == "ok"
