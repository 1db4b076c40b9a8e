"""Failures part way: a save that fails stores nothing and leaves the kernel as it was; a
restore that fails leaves the saved state as it was and says what failed."""

from __future__ import annotations

import asyncio
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import (
    HibernationStore,
    RestoreError,
    SaveError,
    SaveSummary,
    UnsavableStateError,
    restore,
    save,
)

from .conftest import StartKernel, leftovers, run

#: An object that pickles once (the listing's trial) and fails the next time (the save).
FLAKY = """
import numpy as np
class Flaky:
    calls = 0
    def __reduce__(self):
        Flaky.calls += 1
        if Flaky.calls > 1:
            raise RuntimeError("the connection it wraps is gone")
        return (Flaky, ())
flaky = Flaky()
weights = np.arange(500_000.)
"""


async def test_a_variable_that_fails_only_when_saved_is_named_and_nothing_is_stored(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, FLAKY)
    with pytest.raises(
        UnsavableStateError,
        match=r"'flaky' \(__main__.Flaky\): .*the "
        r"connection it wraps is gone.*Nothing was saved",
    ):
        await save(kernels, kernel, store, "refuse")
    assert store.entries() == [] and leftovers(store) == []
    assert (await run(kernels, kernel, "print(type(flaky).__name__, weights.sum())")).split() == [
        "Flaky",
        "124999750000.0",
    ]
    # Under "partial" the rest is saved, and the variable named with the reason.
    summary = await save(kernels, kernel, store, "partial")
    assert [(e["name"], e["type"]) for e in summary.left_out] == [("flaky", "__main__.Flaky")]
    assert "the connection it wraps is gone" in summary.left_out[0]["reason"]
    assert sorted(v["name"] for v in summary.saved) == ["Flaky", "weights"]


@pytest.fixture
def files_at_most_one_mebibyte() -> Iterator[None]:
    """Writing past 1 MiB into any file fails in this process (as a full disk does)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


async def test_a_failure_while_writing_keeps_the_older_entry_and_the_kernel(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    request: pytest.FixtureRequest,
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, "import numpy as np\nweights = np.arange(1000.)")
    older = (await save(kernels, kernel, store)).entry
    await run(kernels, kernel, "weights = np.arange(1_000_000.)")  # 8 MB
    request.getfixturevalue("files_at_most_one_mebibyte")
    with pytest.raises(
        SaveError,
        match=r"failed while writing: OSError: .*File too large"
        r".*Nothing was saved and the kernel keeps running as it was",
    ):
        await save(kernels, kernel, store)
    assert leftovers(store) == []
    assert [e.entry_id for e in store.entries()] == [kernel]
    assert store.entry(kernel).manifest["saved_at"] == older.manifest["saved_at"]
    assert (await run(kernels, kernel, "print(weights.sum())")).strip() == "499999500000.0"


async def test_a_module_missing_in_the_new_kernel_fails_the_restore_and_a_retry_works(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "featurize.py").write_text("def double(x):\n    return 2 * x\n")
    old = await start_kernel()
    await run(
        kernels,
        old,
        f"import sys\nsys.path.insert(0, {str(lib)!r})\n"
        "import featurize as ft\nvalue = ft.double(21)",
    )
    await save(kernels, old, store)
    await kernels.shutdown_kernel(old, now=True)
    new = await start_kernel()
    written = store.entry(old)
    with pytest.raises(
        RestoreError,
        match=r"module featurize \(as ft\) cannot be imported "
        r"there: ModuleNotFoundError.*No variable was assigned and the saved "
        r"state is as it was",
    ) as caught:
        await restore(kernels, new, store, old)
    assert caught.value.step == "importing modules"
    assert (await run(kernels, new, "print('value' in globals())")).strip() == "False"
    assert store.entry(old) == written
    await run(kernels, new, f"import sys\nsys.path.insert(0, {str(lib)!r})")
    woke = await restore(kernels, new, store, old)
    assert sorted(a["name"] for a in woke.assigned) == ["value"]
    assert (await run(kernels, new, "print(ft.double(value))")).strip() == "84"


async def test_a_corrupted_part_fails_the_restore_naming_it_and_keeps_the_entry(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    old = await start_kernel()
    await run(kernels, old, "import numpy as np\nfirst = 1\nweights = np.arange(100_000.)")
    entry = (await save(kernels, old, store)).entry
    part = entry.path / next(
        v["file"] for v in entry.manifest["variables"] if v["name"] == "weights"
    )
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x01
    part.write_bytes(data)
    new = await start_kernel()
    with pytest.raises(
        RestoreError,
        match=r"failed while reading saved state: the saved "
        r"'weights' \(numpy.ndarray, file var-0001.bin\) was changed after it was saved",
    ) as caught:
        await restore(kernels, new, store, old)
    assert caught.value.step == "reading saved state"
    assert (await run(kernels, new, "print('first' in globals(), 'np' in globals())")).split() == [
        "False",
        "False",
    ]
    assert store.entry(old).nbytes == entry.nbytes and part.read_bytes() == data


async def test_a_missing_working_directory_is_said_and_the_rest_restored(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    old = await start_kernel()
    await run(kernels, old, f"import os\nos.chdir({str(gone)!r})\nx = 5")
    await save(kernels, old, store)
    await kernels.shutdown_kernel(old, now=True)
    gone.rmdir()
    new = await start_kernel()
    woke = await restore(kernels, new, store, old)
    assert not woke.cwd_restored and woke.cwd == str(tmp_path / "home")
    assert woke.notes == [
        (
            f"the saved working directory {gone} cannot be entered there "
            f"(FileNotFoundError: [Errno 2] No such file or directory: "
            f"'{gone}'): the kernel stays in {tmp_path / 'home'}"
        )
    ]
    assert (await run(kernels, new, "print(x)")).strip() == "5"


async def test_a_variable_that_cannot_be_rebuilt_fails_the_restore_and_assigns_nothing(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "shapes.py").write_text("class Box:\n    def __init__(self, n):\n        self.n = n\n")
    old = await start_kernel()
    await run(
        kernels,
        old,
        f"import sys\nsys.path.insert(0, {str(lib)!r})\n"
        "from shapes import Box\nbox = Box(3)\nplain = 7",
    )
    await save(kernels, old, store)
    new = await start_kernel()
    with pytest.raises(
        RestoreError,
        match=r"failed while sending variables: .*cannot rebuild "
        r"'(Box|box)' .*ModuleNotFoundError",
    ) as caught:
        await restore(kernels, new, store, old)
    assert caught.value.step == "sending variables"
    assert (await run(kernels, new, "print('plain' in globals())")).strip() == "False"
    assert [e.entry_id for e in store.entries()] == [old]


async def test_a_save_cancelled_while_writing_stores_nothing_and_keeps_the_older_entry(
    kernels: AsyncMultiKernelManager, start_kernel: StartKernel, store: HibernationStore
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, "import numpy as np\nweights = np.arange(10.)")
    older = (await save(kernels, kernel, store)).entry
    await run(kernels, kernel, "weights = np.arange(8_000_000.)")  # 64 MB
    task: asyncio.Task[SaveSummary] | None = None

    def cancel_once_writing(step: str, done: int, total: int) -> None:
        if step == "writing" and done and task is not None:
            task.cancel()

    task = asyncio.ensure_future(save(kernels, kernel, store, progress=cancel_once_writing))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert leftovers(store) == []
    assert store.entry(kernel).manifest["saved_at"] == older.manifest["saved_at"]
    assert (await run(kernels, kernel, "print(weights.size)")).strip() == "8000000"
