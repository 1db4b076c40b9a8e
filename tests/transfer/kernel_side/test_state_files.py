"""Hibernated state kept on a kernel's host: the directory that holds the saved entries
(``hibernated/``) is the owner's alone, or nothing is written or read there (issue 31)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from jupyter_remote_hw.transfer import TransferError
from jupyter_remote_hw.transfer.kernel_side.state_files import read_state, write_state

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
