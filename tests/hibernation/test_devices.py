"""Where tensors come back after a wake, and what becomes of open comms (widgets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import HibernationStore, restore, save
from jupyter_remote_hw.hibernation.far import FarAccess, FarPlace
from jupyter_remote_hw.transfer.kernel_side.pickling import dump_variable

from .conftest import StartKernel, run

torch = pytest.importorskip("torch", reason="needs torch (pip install torch)")

CUDA = torch.cuda.is_available()

#: Tensors and modules on the CPU, alone and in containers, beside plain values.
ON_THE_CPU = """
import torch
x = torch.arange(10.)
layer = torch.nn.Linear(3, 2)
nested = {"a": torch.ones(2), "b": [torch.zeros(1), 4]}
plain = [1, 2]
"""


async def test_tensors_and_modules_on_the_cpu_are_recorded_there_and_stay_there(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    old = await start_kernel()
    await run(kernels, old, ON_THE_CPU)
    summary = await save(kernels, old, store, "refuse")
    assert summary.entry.manifest["devices"] == {"x": "cpu", "layer": "cpu", "nested": "cpu"}
    assert summary.left_out == []
    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    woke = await restore(kernels, new, store, old)
    assert woke.notes == [] and woke.devices == {}
    assert sorted(a["name"] for a in woke.assigned) == ["layer", "nested", "plain", "x"]
    printed = await run(
        kernels,
        new,
        "print(x.device, next(layer.parameters()).device, nested['a'].device, "
        "float(x.sum()), plain)",
    )
    assert printed.split() == ["cpu", "cpu", "cpu", "45.0", "[1,", "2]"]


def _entry_from_a_gpu_kernel(store: HibernationStore, entry_id: str, home: Path) -> None:
    """Store an entry the way a save from a kernel with tensors on GPUs writes it: the
    values as they travel (on the CPU), the devices they lived on in the manifest."""
    values = {
        "t": torch.arange(6.0),
        "layer": torch.nn.Linear(2, 2),
        "both": [torch.ones(3), torch.zeros(3)],
        "here": torch.full((2,), 7.0),
        "plain": "text",
    }
    manifest = {
        "kernel_id": entry_id,
        "kernel_name": "python3",
        "target": None,
        "cwd": str(home),
        "modules": [{"name": "torch", "module": "torch"}],
        "left_out": [],
        "python": None,
        "devices": {"t": "cuda:0", "layer": "cuda:1", "both": "mixed", "here": "cpu"},
    }
    store.write(entry_id, manifest, [dump_variable(k, v) for k, v in values.items()])


@pytest.mark.skipif(CUDA, reason="needs a host without CUDA (the GPU check covers one with)")
async def test_a_kernel_saved_with_tensors_on_gpus_wakes_without_one_on_the_cpu_and_says_so(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    entry_id = "0b5d6e3a-8c1f-4b7e-9d2a-3f4e5a6b7c8d"
    _entry_from_a_gpu_kernel(store, entry_id, tmp_path / "home")
    new = await start_kernel()

    woke = await restore(kernels, new, store, entry_id)

    assert sorted(a["name"] for a in woke.assigned) == ["both", "here", "layer", "plain", "t"]
    assert woke.devices == {}
    assert woke.notes == [
        "'both' held tensors on several devices when it hibernated: it is on the CPU now",
        (
            "'layer' was on cuda:1 when it hibernated, and the kernel has no CUDA device: "
            "it is on the CPU now"
        ),
        (
            "'t' was on cuda:0 when it hibernated, and the kernel has no CUDA device: "
            "it is on the CPU now"
        ),
    ]
    printed = await run(
        kernels,
        new,
        "print(t.device, torch.equal(t, torch.arange(6.)), next(layer.parameters()).device, "
        "both[0].device, float(both[0].sum()), here.device, plain)",
    )
    assert printed.split() == ["cpu", "True", "cpu", "cpu", "3.0", "cpu", "text"]
    # The entry is as it was: a wake on GPU hardware later still finds the devices.
    assert store.entry(entry_id).manifest["devices"]["t"] == "cuda:0"
    # A device given to the restore overrides what was recorded: no note, all on it.
    chosen = await restore(kernels, await start_kernel(), store, entry_id, device="cpu")
    assert chosen.notes == [] and chosen.devices == {}
    assert len(chosen.assigned) == 5


@pytest.mark.skipif(CUDA, reason="needs a host without CUDA (the GPU check covers one with)")
async def test_state_kept_on_the_kernels_host_records_devices_and_wakes_on_the_cpu_without_one(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    old = await start_kernel()
    await run(kernels, old, "import torch\nt = torch.arange(5.)\nlayer = torch.nn.Linear(2, 2)")
    far = FarPlace("test", "host-a", str(tmp_path / "far"), "the test host's disk").child(old)
    summary = await save(kernels, old, store, far=far)
    manifest = summary.entry.manifest
    assert manifest["devices"] == {"t": "cpu", "layer": "cpu"}
    # As a kernel with ``t`` on its GPU would have recorded it.
    filled = {"format", "entry_id", "saved_at", "variables", "total_bytes"}
    store.write_far(
        old,
        {**{k: v for k, v in manifest.items() if k not in filled}, "devices": {"t": "cuda:0"}},
        manifest["variables"],
        manifest["total_bytes"],
    )
    new = await start_kernel()
    woke = await restore(kernels, new, store, old, far=FarAccess(here="host-a"))
    assert woke.notes == [
        (
            "'t' was on cuda:0 when it hibernated, and the kernel has no CUDA device: "
            "it is on the CPU now"
        )
    ]
    assert (await run(kernels, new, "print(t.device, float(t.sum()))")).split() == ["cpu", "10.0"]


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
async def test_a_kernel_saved_with_tensors_on_the_gpu_wakes_with_them_there(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    old = await start_kernel()
    await run(
        kernels,
        old,
        "import torch\nt = torch.arange(1000.).cuda()\nlayer = torch.nn.Linear(4, 2).cuda()"
        "\nhost = torch.ones(3)\nboth = [torch.ones(1).cuda(), torch.ones(1)]",
    )
    summary = await save(kernels, old, store)
    assert summary.entry.manifest["devices"] == {
        "t": "cuda:0",
        "layer": "cuda:0",
        "host": "cpu",
        "both": "mixed",
    }
    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    woke = await restore(kernels, new, store, old)
    assert woke.devices == {"t": "cuda:0", "layer": "cuda:0"}
    assert woke.notes == [
        "'both' held tensors on several devices when it hibernated: it is on the CPU now"
    ]
    printed = await run(
        kernels,
        new,
        "print(t.device, next(layer.parameters()).device, host.device, float(t.sum()))",
    )
    assert printed.split() == ["cuda:0", "cuda:0", "cpu", "499500.0"]


async def test_open_widgets_are_named_as_left_out_and_do_not_stop_a_save_under_refuse(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    old = await start_kernel()
    await run(
        kernels,
        old,
        "import ipywidgets\ndisplay(ipywidgets.IntSlider(5))\nx = 1",
    )

    summary = await save(kernels, old, store, "refuse")

    assert [v["name"] for v in summary.saved] == ["x"]
    [widgets] = summary.left_out
    assert widgets["name"] == widgets["comm"] == "jupyter.widget"
    assert widgets["count"] >= 1  # the slider, and its layout and style
    assert "displayed again after waking" in widgets["reason"]
    assert summary.entry.manifest["left_out"] == summary.left_out
    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    woke = await restore(kernels, new, store, old)
    assert woke.left_out == summary.left_out
    assert woke.notes == [f"not restored: jupyter.widget ({widgets['reason']})"]
    assert (await run(kernels, new, "print(x, ipywidgets.__name__)")).split() == ["1", "ipywidgets"]
