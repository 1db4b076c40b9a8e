"""State kept on the kernel's side: the kernel writes its variables into a directory of its
host, the store keeps only the manifest, and a kernel that reads that directory loads them
itself; any other gets them copied through our side, or a message saying where they are."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import HibernationStore, RestoreError, SaveError, restore, save
from jupyter_remote_hw.hibernation.far import FarAccess, FarPlace

from .conftest import StartKernel, leftovers, run

STATE = """
import numpy as np
weights = np.arange(1_000_000.)
def double(v):
    return 2 * v
name = "ok"
"""
CHECK = "print(double(weights).sum(), name, weights.flags.writeable)"
EXPECTED = ["999999000000.0", "ok", "True"]


def place(tmp_path: Path, kernel_id: str) -> FarPlace:
    return FarPlace("test", "host-a", str(tmp_path / "far"), "the test host's disk").child(
        kernel_id
    )


async def read_file(where: FarPlace, path: str) -> bytes:
    """Our side's copy of a place's file (a provider reads it over SSH)."""
    return await asyncio.to_thread(Path(path).read_bytes)


async def test_the_kernel_writes_its_state_on_its_host_and_a_kernel_there_reads_it(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, STATE)
    far = place(tmp_path, kernel)
    killed = Path(f"{Path(far.path).parent}/.tmp-{kernel}-0badc0de")  # a save killed part way
    killed.mkdir(parents=True)
    (killed / "var-0000.bin").write_bytes(b"part")
    summary = await save(kernels, kernel, store, far=far)
    assert sorted(p.name for p in Path(far.path).parent.iterdir()) == [kernel]
    # The data is in the host's directory; the store holds the manifest alone.
    written = sorted(p.name for p in Path(far.path).iterdir())
    # Its files, and their list (the base of the next save once the kernel woke).
    assert written == ["index.json", "var-0000.bin", "var-0001.bin", "var-0002.bin"]
    assert sorted(p.name for p in summary.entry.path.iterdir()) == ["manifest.json"]
    manifest = json.loads((summary.entry.path / "manifest.json").read_text())
    assert manifest["far"]["path"] == far.path and manifest["far"]["host"] == "host-a"
    data = sum(p.stat().st_size for p in Path(far.path).glob("var-*.bin"))
    assert manifest["total_bytes"] == data > 8_000_000
    [entry] = store.entries()
    assert entry.far == far.to_json() and entry.nbytes > data  # listed with its far bytes
    assert store.total_bytes() == entry.nbytes

    fresh = await start_kernel()
    woke = await restore(kernels, fresh, store, kernel, far=FarAccess(here="host-a"))
    assert sorted(v["name"] for v in woke.assigned) == ["double", "name", "weights"]
    assert woke.total_bytes == data
    assert (await run(kernels, fresh, CHECK)).split() == EXPECTED
    assert Path(far.path).is_dir()  # the caller removes it once it is no longer needed


async def test_a_kernel_elsewhere_gets_the_state_copied_through_our_side_or_is_told_where(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    store: HibernationStore,
    tmp_path: Path,
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, STATE)
    far = place(tmp_path, kernel)
    await save(kernels, kernel, store, far=far)
    fresh = await start_kernel()
    # No one can copy it here: the message says where it is and what to do.
    with pytest.raises(RestoreError, match=r"on the test host's disk .*Wake it on the target"):
        await restore(kernels, fresh, store, kernel, far=FarAccess(here="host-b"))
    with pytest.raises(RestoreError, match="cannot be copied from here"):
        await restore(kernels, fresh, store, kernel)
    # A changed file is found before anything is assigned; the entry stays as it was.
    victim = Path(far.path) / "var-0000.bin"
    original = victim.read_bytes()
    victim.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    access = FarAccess(here="host-b", read=read_file)
    with pytest.raises(RestoreError, match="checksum differs"):
        await restore(kernels, fresh, store, kernel, far=access)
    assert (await run(kernels, fresh, "print('weights' in dir())")).strip() == "False"
    victim.write_bytes(original)
    woke = await restore(kernels, fresh, store, kernel, far=access)
    assert woke.total_bytes > 8_000_000
    assert (await run(kernels, fresh, CHECK)).split() == EXPECTED


async def test_a_far_save_that_fails_leaves_the_kernel_running_and_nothing_stored(
    kernels: AsyncMultiKernelManager,
    start_kernel: StartKernel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = await start_kernel()
    await run(kernels, kernel, STATE)
    far = place(tmp_path, kernel)
    # The host's disk has not the room: the directory, the bytes needed and free named.
    roomy = HibernationStore(root=str(tmp_path / "store"), max_bytes=0, min_free_bytes=1 << 60)
    with pytest.raises(
        SaveError, match=rf"saving into {far.path} needs 7.6 MiB, and its disk has .* free"
    ):
        await save(kernels, kernel, roomy, far=far)
    # The cap counts what is kept far too.
    capped = HibernationStore(root=str(tmp_path / "store"), max_bytes=4 << 20, min_free_bytes=0)
    with pytest.raises(
        SaveError, match=r"needs 7.6 MiB, and the hibernated kernels in .* of at most 4.0 MiB"
    ):
        await save(kernels, kernel, capped, far=far)
    # Writing fails part way (the directory's parent is a file).
    blocked = tmp_path / "blocked"
    blocked.write_text("")
    broken = FarPlace("test", "host-a", str(blocked / "far"), "a broken disk").child(kernel)
    with pytest.raises(SaveError, match="Not a directory"):
        await save(
            kernels,
            kernel,
            HibernationStore(root=str(tmp_path / "store"), max_bytes=0, min_free_bytes=0),
            far=broken,
        )
    assert capped.entries() == [] and leftovers(capped) == []
    assert not Path(far.path).exists() and list((tmp_path / "far").iterdir()) == []
    assert (await run(kernels, kernel, CHECK)).split() == EXPECTED
    # Our side fails after the kernel wrote (its disk is full): what the kernel wrote
    # is removed again.
    store = HibernationStore(root=str(tmp_path / "store"), max_bytes=0, min_free_bytes=0)

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "write_far", full)
    with pytest.raises(SaveError, match="No space left"):
        await save(kernels, kernel, store, far=far)
    assert store.entries() == [] and list((tmp_path / "far").iterdir()) == []
    assert (await run(kernels, kernel, CHECK)).split() == EXPECTED
