"""A kernel's state saved, the kernel shut down, and the state restored into a new one."""

from __future__ import annotations

import importlib.util
import itertools
import stat
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import (
    HibernationStore,
    RestoreError,
    StoreFullError,
    UnsavableStateError,
    restore,
    save,
)
from jupyter_remote_hw.transfer.variables import kernel_namespace

from .conftest import StartKernel, leftovers, run

#: A notebook's state: arrays, a frame, a tensor, its own function, class and instance,
#: a module under another name, a changed directory, and an open file.
NOTEBOOK = """
import os, numpy as np, pandas as pd, torch
os.makedirs({work!r}, exist_ok=True)
os.chdir({work!r})
weights = np.arange(1_000_000, dtype=np.float64)          # 8 MB
frame = pd.DataFrame({{"a": np.arange(1000), "b": [str(i) for i in range(1000)]}})
tensor = torch.arange(250_000, dtype=torch.float32)       # 1 MB
def scale(x, by=2):
    return x * by
class Model:
    def __init__(self, k):
        self.k = k
    def predict(self, x):
        return scale(x, self.k)
model = Model(3)
note = "hello"
handle = open("log.txt", "w")
"""

CHECK = """
import os
print(np.array_equal(weights, np.arange(1_000_000, dtype=np.float64)),
      frame.equals(pd.DataFrame({"a": np.arange(1000), "b": [str(i) for i in range(1000)]})),
      torch.equal(tensor, torch.arange(250_000, dtype=torch.float32)),
      scale(4), model.predict(5), isinstance(model, Model), note,
      np.__name__, pd.__name__, os.getcwd(), "handle" in globals())
"""


def _names(listing: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((v["name"], v["type"]) for v in listing["variables"])


async def test_a_kernel_saved_and_shut_down_comes_back_whole_in_a_new_kernel(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    old = await start_kernel()
    work = str(tmp_path / "work")
    await run(kernels, old, NOTEBOOK.format(work=work))
    seen: list[tuple[str, int, int]] = []
    summary = await save(
        kernels, old, store, "partial", lambda step, done, total: seen.append((step, done, total))
    )

    assert [(e["name"], e["type"]) for e in summary.left_out] == [("handle", "_io.TextIOWrapper")]
    assert "open file" in summary.left_out[0]["reason"]
    saved = {v["name"]: v for v in summary.saved}
    assert set(saved) == {"frame", "model", "note", "scale", "tensor", "weights", "Model"}
    assert 8_000_000 < saved["weights"]["nbytes"] < 8_001_000
    assert 1_000_000 < saved["tensor"]["nbytes"] < 1_001_000
    assert sorted((m["name"], m["module"]) for m in summary.modules) == [
        ("np", "numpy"),
        ("os", "os"),
        ("pd", "pandas"),
        ("torch", "torch"),
    ]
    assert summary.cwd == work
    entry = summary.entry
    assert entry.entry_id == old
    assert entry.manifest["cwd"] == work and entry.manifest["kernel_name"] == "python3"
    assert entry.manifest["left_out"] == summary.left_out
    assert summary.total_bytes == entry.manifest["total_bytes"]
    # On disk: the variables' bytes and a small manifest.
    assert summary.total_bytes < entry.nbytes < summary.total_bytes + 20_000
    assert store.usage() == {old: entry.nbytes} and store.total_bytes() == entry.nbytes
    steps = [step for step, _, _ in seen]
    assert steps[0] == "listing variables" and steps[-1] == "saved"
    assert {"reading variables", "writing"} <= set(steps)
    written = [(done, total) for step, done, total in seen if step == "writing"]
    assert written[-1] == (summary.total_bytes, summary.total_bytes)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(written))

    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    seen.clear()
    woke = await restore(
        kernels,
        new,
        store,
        old,
        progress=lambda step, done, total: seen.append((step, done, total)),
    )

    assert sorted(a["name"] for a in woke.assigned) == sorted(saved)
    assert sorted(m["name"] for m in woke.imported) == ["np", "os", "pd", "torch"]
    assert woke.cwd == work and woke.cwd_restored and woke.notes == []
    assert woke.left_out == summary.left_out
    printed = (await run(kernels, new, CHECK)).split()
    assert printed == [
        "True",
        "True",
        "True",
        "8",
        "15",
        "True",
        "hello",
        "numpy",
        "pandas",
        work,
        "False",
    ]
    steps = [step for step, _, _ in seen]
    assert steps[0] == "reading saved state" and steps[-1] == "restored"
    assert {"changing directory", "importing modules", "sending variables"} <= set(steps)
    # The entry stays until the caller deletes it.
    assert store.entry(old).nbytes == entry.nbytes
    assert store.delete(old) and store.entries() == [] and not store.delete(old)


async def test_the_store_is_private(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, "import numpy as np\nx = np.ones(300_000)\ny = 'text'")
    entry = (await save(kernels, kernel, store)).entry
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.path.stat().st_mode) == 0o700
    found = sorted(entry.path.iterdir())
    assert [p.name for p in found] == ["manifest.json", "var-0000.bin", "var-0001.bin"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in found} == {0o600}
    assert leftovers(store) == []


async def test_refuse_names_the_open_file_saves_nothing_and_leaves_the_kernel_as_it_was(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, NOTEBOOK.format(work=str(tmp_path / "work")))
    before = _names(await kernel_namespace(kernels, kernel))
    with pytest.raises(
        UnsavableStateError,
        match=r"'handle' \(_io.TextIOWrapper\): .*open "
        r"file.*Nothing was saved",
    ) as caught:
        await save(kernels, kernel, store, "refuse")
    assert [e["name"] for e in caught.value.left_out] == ["handle"]
    assert store.entries() == [] and leftovers(store) == []
    assert _names(await kernel_namespace(kernels, kernel)) == before
    assert (
        await run(kernels, kernel, "print(handle.closed, scale(2), weights.sum())")
    ).split() == ["False", "4", "499999500000.0"]


async def test_a_save_beyond_the_cap_is_refused_with_the_sizes(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, tmp_path: Path
) -> None:
    store = HibernationStore(
        root=str(tmp_path / "capped"), max_bytes=3 * 1024 * 1024, min_free_bytes=0
    )
    small, large = await start_kernel(), await start_kernel()
    await run(kernels, small, "import numpy as np\nx = np.ones(262_144)")  # 2 MiB
    await run(kernels, large, "import numpy as np\nx = np.ones(262_144)\ny = np.ones(131_072)")
    # The kernel's own manager serves as well (what a provisioner holds).
    first = await save(kernels.get_kernel(small), small, store)
    with pytest.raises(
        StoreFullError,
        match=r"needs 3\.0 MiB.* already hold 2\.0 MiB of at "
        r"most 3\.0 MiB \(c\.HibernationStore\.max_bytes\)\. Nothing was saved",
    ):
        await save(kernels, large, store)
    assert [e.entry_id for e in store.entries()] == [small]
    assert store.entry(small).nbytes == first.entry.nbytes and leftovers(store) == []
    # Saving the same kernel again replaces its entry: the old one does not count.
    await run(kernels, small, "x = np.ones(300_000)")
    again = await save(kernels, small, store)
    assert again.entry.nbytes > first.entry.nbytes
    assert [e.entry_id for e in store.entries()] == [small]


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


#: Where torch is missing, its tests say so.
needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="needs torch (pip install torch)"
)


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
async def test_tensors_come_back_on_the_device_asked_for(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    old = await start_kernel()
    await run(
        kernels,
        old,
        "import torch\nt = torch.arange(1000.).cuda()\nlayer = "
        "torch.nn.Linear(4, 2).cuda()\nplain = [1, 2]",
    )
    await save(kernels, old, store)
    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    woke = await restore(kernels, new, store, old, device="cuda")
    assert woke.devices == {"t": "cuda", "layer": "cuda"}
    assert (
        await run(
            kernels,
            new,
            "print(t.device.type, next(layer.parameters()).device.type, float(t.sum()), plain)",
        )
    ).split() == ["cuda", "cuda", "499500.0", "[1,", "2]"]


@needs_torch
@pytest.mark.skipif(_cuda(), reason="needs a host without CUDA")
async def test_a_device_the_new_kernel_lacks_fails_the_restore_and_keeps_the_entry(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    old = await start_kernel()
    await run(kernels, old, "import torch\nt = torch.arange(1000.)")
    await save(kernels, old, store)
    new = await start_kernel()
    with pytest.raises(
        RestoreError,
        match=r"failed while sending variables: .*--device cuda: "
        r"this host has no usable CUDA device",
    ):
        await restore(kernels, new, store, old, device="cuda")
    assert (await run(kernels, new, "print('t' in globals())")).strip() == "False"
    assert [e.entry_id for e in store.entries()] == [old]
