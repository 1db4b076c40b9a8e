"""The store on its own: entries written whole or not at all, listed with sizes, deleted,
capped, private, and read back only as they were written."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from jupyter_remote_hw.hibernation import (
    CorruptEntryError,
    EntryNotFoundError,
    HibernationStore,
    StoreFullError,
)
from jupyter_remote_hw.transfer import Pickled, dump_variable, load_variables
from jupyter_remote_hw.validation import InvalidInputError

from .conftest import leftovers

KERNEL = "0f5c3a3e-1111-4222-8333-944455556666"
OTHER = "7a1b2c3d-1111-4222-8333-944455556666"


def state(size: int = 100_000) -> list[Pickled]:
    return [dump_variable("a", np.arange(size, dtype=np.int64)), dump_variable("s", "text")]


def test_an_entry_is_read_back_as_written(store: HibernationStore) -> None:
    moved: list[int] = []
    entry = store.write(
        KERNEL, {"cwd": "/x", "modules": [{"name": "np", "module": "numpy"}]}, state(), moved.append
    )
    assert sum(moved) == entry.manifest["total_bytes"] > 800_000
    manifest, pickled = store.read(KERNEL)
    assert manifest["cwd"] == "/x" and manifest["format"] == 1
    assert [v["name"] for v in manifest["variables"]] == ["a", "s"]
    values = load_variables(pickled)
    assert np.array_equal(values["a"], np.arange(100_000)) and values["s"] == "text"
    assert stat.S_IMODE(entry.path.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in entry.path.iterdir()} == {0o600}


def test_entries_are_listed_with_their_sizes_and_deleted(store: HibernationStore) -> None:
    one = store.write(KERNEL, {}, state(10_000))
    two = store.write(OTHER, {}, state(20_000))
    assert [e.entry_id for e in store.entries()] == [KERNEL, OTHER]
    assert store.usage() == {KERNEL: one.nbytes, OTHER: two.nbytes}
    assert store.total_bytes() == one.nbytes + two.nbytes
    assert one.nbytes == sum(p.stat().st_size for p in one.path.iterdir())
    assert store.delete(KERNEL) and not store.delete(KERNEL)
    assert store.usage() == {OTHER: two.nbytes}
    with pytest.raises(EntryNotFoundError, match=f"no hibernated state for kernel {KERNEL}"):
        store.read(KERNEL)


def test_a_new_save_replaces_the_old_entry_only_once_written(store: HibernationStore) -> None:
    store.write(KERNEL, {"cwd": "/first"}, state())
    store.write(KERNEL, {"cwd": "/second"}, state(5))
    assert store.read(KERNEL)[0]["cwd"] == "/second"
    assert len(store.entries()) == 1 and leftovers(store) == []


def test_the_cap_counts_every_entry_but_the_one_replaced(tmp_path: Path) -> None:
    store = HibernationStore(root=str(tmp_path / "s"), max_bytes=1_000_000, min_free_bytes=0)
    store.write(KERNEL, {}, state(60_000))  # 480 kB
    store.write(KERNEL, {}, state(70_000))  # replaces it
    with pytest.raises(
        StoreFullError,
        match=r"needs 625\.\d KiB.*already hold 547\.\d KiB "
        r"of at most 976\.6 KiB",
    ) as caught:
        store.write(OTHER, {}, state(80_000))
    assert caught.value.limit == 1_000_000 and caught.value.needed > 640_000
    assert [e.entry_id for e in store.entries()] == [KERNEL] and leftovers(store) == []


def test_the_disk_keeps_its_room(tmp_path: Path) -> None:
    store = HibernationStore(root=str(tmp_path / "s"), max_bytes=0, min_free_bytes=1 << 62)
    with pytest.raises(StoreFullError, match=r"free, of which .* must stay free"):
        store.write(KERNEL, {}, state(10))
    assert store.entries() == []


def test_what_a_killed_writer_left_is_cleared_and_a_moved_entry_put_back(
    store: HibernationStore,
) -> None:
    store.write(KERNEL, {"cwd": "/kept"}, state(10))
    root = store.path
    dead = 2**22 + 12345  # above any pid this machine hands out
    os.mkdir(root / f".tmp-{OTHER}-{dead}-00aa")
    (root / f".tmp-{OTHER}-{dead}-00aa" / "var-0000.bin").write_bytes(b"partial")
    os.rename(root / KERNEL, root / f".old-{KERNEL}-{dead}-00bb")
    assert [e.entry_id for e in store.entries()] == [KERNEL]
    assert store.read(KERNEL)[0]["cwd"] == "/kept" and leftovers(store) == []


def test_a_changed_or_cut_part_is_named_and_nothing_is_read(store: HibernationStore) -> None:
    entry = store.write(KERNEL, {}, state())
    part = entry.path / "var-0000.bin"
    data = bytearray(part.read_bytes())
    data[-1] ^= 0xFF
    part.write_bytes(data)
    with pytest.raises(
        CorruptEntryError,
        match=r"the saved 'a' \(numpy.ndarray, file var-0000.bin\) was changed after it was saved",
    ):
        store.read(KERNEL)
    part.write_bytes(data[:-10])
    with pytest.raises(
        CorruptEntryError,
        match=r"'a' .* cannot be read: it has \d+ bytes "
        r"where \d+ were written",
    ):
        store.read(KERNEL)
    part.unlink()
    part.symlink_to(entry.path / "var-0001.bin")
    with pytest.raises(CorruptEntryError, match=r"'a' .* cannot be read"):
        store.read(KERNEL)


def test_an_unreadable_entry_is_listed_with_its_problem(store: HibernationStore) -> None:
    entry = store.write(KERNEL, {}, state(10))
    (entry.path / "manifest.json").write_text(json.dumps({"format": 99}))
    listed = store.entries()
    assert listed[0].problem is not None and "newer jupyter-remote-hw" in listed[0].problem
    assert listed[0].nbytes > 0
    assert store.delete(KERNEL) and store.entries() == []


def test_an_id_that_names_a_path_is_refused(store: HibernationStore) -> None:
    for bad in ("../x", ".tmp-x", "a/b", ""):
        with pytest.raises(InvalidInputError):
            store.write(bad, {}, state(10))
    assert store.entries() == []


def test_the_default_root_is_under_the_jupyter_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert HibernationStore().path == tmp_path / "data" / "jupyter_remote_hw" / "hibernated"
