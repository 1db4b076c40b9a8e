"""Hibernated state kept on a kernel's host: the directory that holds the saved entries
(``hibernated/``) is the owner's alone, or nothing is written or read there (issue 31);
saves after a wake link what did not change; every file is checked as it is read."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_remote_hw.transfer import TransferError
from jupyter_remote_hw.transfer.kernel_side.mapped import FileMappings, unchanged
from jupyter_remote_hw.transfer.kernel_side.pickling import dump_variables, to_segments
from jupyter_remote_hw.transfer.kernel_side.state_files import (
    base_path,
    file_digest,
    read_state,
    remove_state,
    write_state,
)

NOBODY = 65534


def test_state_is_written_and_read_under_an_owner_only_parent(tmp_path: Path) -> None:
    parent = tmp_path / "hibernated"
    parent.mkdir(mode=0o777)
    parent.chmod(0o777)  # others may write: made owner-only before anything is written
    written = write_state({"x": [1, 2]}, ["x"], str(parent / "k1"))
    assert stat.S_IMODE(parent.stat().st_mode) == 0o700
    (back,) = read_state(str(parent / "k1"), written["variables"])
    assert back.name == "x"


def test_a_linked_parent_is_refused_for_writing_and_reading(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    written = write_state({"x": 1}, ["x"], str(elsewhere / "k1"))
    (tmp_path / "hibernated").symlink_to(elsewhere)
    with pytest.raises(TransferError, match="is a symbolic link") as caught:
        write_state({"x": 1}, ["x"], str(tmp_path / "hibernated" / "k2"))
    assert "Nothing was saved or read" in str(caught.value)
    with pytest.raises(TransferError, match="is a symbolic link"):
        read_state(str(tmp_path / "hibernated" / "k1"), written["variables"])
    assert not (elsewhere / "k2").exists()


@pytest.mark.skipif(os.getuid() != 0, reason="a directory of another user needs root")
def test_a_parent_of_another_user_is_refused_for_writing_and_reading(tmp_path: Path) -> None:
    parent = tmp_path / "hibernated"
    written = write_state({"x": 1}, ["x"], str(parent / "k1"))
    os.chown(parent, NOBODY, NOBODY)
    for attempt in (
        lambda: write_state({"x": 1}, ["x"], str(parent / "k2")),
        lambda: read_state(str(parent / "k1"), written["variables"]),
    ):
        with pytest.raises(TransferError, match="belongs to another user") as caught:
            attempt()
        assert f"(uid {NOBODY})" in str(caught.value)
    assert not (parent / "k2").exists()


def _file_of(written: dict[str, Any], name: str) -> Path:
    (variable,) = [v for v in written["variables"] if v["name"] == name]
    return Path(written["path"]) / variable["file"]


def test_a_save_after_a_wake_links_what_did_not_change_and_writes_the_rest(
    tmp_path: Path,
) -> None:
    """Incremental: the woken kernel's entry stays as the base; the next save links each
    unchanged variable from it (same inode, nothing written), writes the changed one,
    reads back equal, and the base goes once the new entry is in place."""
    entry = str(tmp_path / "hibernated" / "k1")
    namespace = {"big": np.arange(3_000_000, dtype=np.float64), "small": [1, 2, 3]}
    first = write_state(namespace, ["big", "small"], entry)
    assert first["written_bytes"] == first["total_bytes"]
    big_inode = _file_of(first, "big").stat().st_ino
    assert remove_state(entry, keep=True) == first["path"]
    base = base_path(first["path"])
    assert not os.path.exists(entry) and os.path.isdir(base)

    namespace["small"] = [4, 5, 6]
    second = write_state(namespace, ["big", "small"], entry)
    assert _file_of(second, "big").stat().st_ino == big_inode  # linked, not written
    small = sum(v["nbytes"] for v in second["variables"] if v["name"] == "small")
    assert second["written_bytes"] == small < second["total_bytes"] // 1000
    assert not os.path.exists(base)
    back = {p.name: p for p in read_state(entry, second["variables"])}
    assert set(back) == {"big", "small"}

    # A changed array is written again, not linked.
    assert remove_state(entry, keep=True)
    namespace["big"][7] = -1.0
    third = write_state(namespace, ["big"], entry)
    assert third["written_bytes"] == third["total_bytes"]
    assert _file_of(third, "big").stat().st_ino != big_inode
    # Removing an entry for good takes its base with it.
    assert remove_state(entry, keep=True)
    assert os.path.isdir(base_path(third["path"]))
    write_state(namespace, ["small"], entry)
    remove_state(entry)
    assert not os.path.exists(entry) and not os.path.exists(base_path(third["path"]))


def test_a_changed_file_is_refused_and_an_older_entry_still_reads(tmp_path: Path) -> None:
    entry = str(tmp_path / "hibernated" / "k1")
    written = write_state({"x": list(range(1000))}, ["x"], entry)
    (variable,) = written["variables"]
    assert variable["digest"].startswith("sha256-8m:")
    file = _file_of(written, "x")
    data = bytearray(file.read_bytes())
    # The digest is the file's, whatever its segments (our side reads it whole).
    assert file_digest([data]) == variable["digest"]
    assert file_digest([data[:5], data[5:]]) == variable["digest"]
    # An entry written before digests (its file's plain SHA-256) reads as it did.
    older = {k: v for k, v in variable.items() if k != "digest"}
    older["sha256"] = hashlib.sha256(data).hexdigest()
    (back,) = read_state(entry, [older])
    assert back.name == "x"
    data[-2] ^= 0xFF
    file.chmod(0o600)
    file.write_bytes(bytes(data))
    for each in (variable, older):
        with pytest.raises(TransferError, match="changed after it was saved"):
            read_state(entry, [each])


def _woken(entry: str, written: dict[str, Any]) -> dict[str, Any]:
    """The variables as a kernel woken on this host rebuilds them (over its files'
    private maps)."""
    return {
        p.name: pickle.loads(p.data, buffers=p.buffers)
        for p in read_state(entry, written["variables"])
    }


def _views(namespace: dict[str, Any], name: str) -> tuple[list[int], list[memoryview]]:
    """A variable's segment sizes and views, as the next save makes them."""
    (item,), views = to_segments(dump_variables(namespace, [name]))
    return list(item["segments"]), views


def test_a_woken_kernels_untouched_arrays_are_known_unchanged_without_hashing(
    tmp_path: Path,
) -> None:
    """The woken kernel's arrays are views of its files' pages; one it never wrote is
    still the base file's bytes (its memory map says so), one it wrote or an equal copy
    elsewhere in memory is not; the next save links the first and writes the second."""
    entry = str(tmp_path / "hibernated" / "k1")
    saved = {"big": np.arange(3_000_000, dtype=np.float64), "other": np.ones(2_000_000)}
    first = write_state(saved, ["big", "other"], entry)
    woken = _woken(entry, first)
    assert remove_state(entry, keep=True)
    base = Path(base_path(first["path"]))
    big_file, other_file = (str(base / _file_of(first, n).name) for n in ("big", "other"))

    sizes, views = _views(woken, "big")
    assert unchanged(big_file, sizes, views, FileMappings())
    woken["other"][12345] = 7.0  # that page is now the kernel's own copy
    mappings = FileMappings()
    assert not unchanged(other_file, *_views(woken, "other"), mappings)
    assert unchanged(big_file, *_views(woken, "big"), mappings)
    # Equal bytes elsewhere in memory, or another file's name, are not the base's pages.
    assert not unchanged(big_file, *_views({"big": woken["big"].copy()}, "big"), mappings)
    assert not unchanged(other_file, *_views(woken, "big"), mappings)

    big_inode = Path(big_file).stat().st_ino
    second = write_state(woken, ["big", "other"], entry)
    assert _file_of(second, "big").stat().st_ino == big_inode
    other = next(v["nbytes"] for v in second["variables"] if v["name"] == "other")
    assert second["written_bytes"] == other
    back = _woken(entry, second)
    assert np.array_equal(back["big"], saved["big"]) and back["other"][12345] == 7.0
    assert back["other"].sum() == 2_000_000 + 6.0


def test_a_mapped_file_cut_short_or_changed_is_refused(tmp_path: Path) -> None:
    entry = str(tmp_path / "hibernated" / "k1")
    written = write_state({"a": np.arange(100_000, dtype=np.int64)}, ["a"], entry)
    (variable,) = written["variables"]
    file = _file_of(written, "a")
    data = bytearray(file.read_bytes())
    data[-100] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(
        TransferError, match=r"'a' \(numpy.ndarray, file var-0000.bin\) was changed"
    ):
        read_state(entry, [variable])
    file.write_bytes(bytes(data[:-1000]))
    with pytest.raises(TransferError, match=r"'a' .* is cut short"):
        read_state(entry, [variable])
