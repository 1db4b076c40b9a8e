"""The ledger keeps kernel rows in a private SQLite file across reopenings."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_remote_hw.ledger import KernelRecord, Ledger


def mode(path: Path) -> int:
    """The permission bits of ``path``."""
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """Where the ledger goes: a directory that does not exist yet."""
    return tmp_path / "state" / "nested" / "ledger.sqlite3"


@pytest.fixture
def ledger(path: Path) -> Iterator[Ledger]:
    """An open ledger, closed after the test."""
    opened = Ledger(path)
    yield opened
    opened.close()


INFO = {
    "target": "ssh-gpu-a",
    "remote": {"shell_port": 50001, "ip": "127.0.0.1"},
    "local_ports": [1, 2, 3],
    "flag": True,
    "nothing": None,
    "label": "A10G · 24 GB",
}


def test_put_get_round_trip(ledger: Ledger) -> None:
    before = time.time()
    ledger.put_kernel("k1", "remote-hw-ssh-gpu-a", "ssh-gpu-a", INFO)
    record = ledger.get_kernel("k1")
    assert isinstance(record, KernelRecord)
    assert record.kernel_id == "k1"
    assert record.kernel_name == "remote-hw-ssh-gpu-a"
    assert record.target == "ssh-gpu-a"
    assert record.info == INFO
    assert before <= record.created == record.updated <= time.time()


def test_get_missing_is_none(ledger: Ledger) -> None:
    assert ledger.get_kernel("nope") is None
    assert ledger.kernels() == []


def test_kernels_lists_oldest_first(ledger: Ledger) -> None:
    for kernel_id in ("k-b", "k-a", "k-c"):
        ledger.put_kernel(kernel_id, "remote-hw-local", "local", {"id": kernel_id})
        time.sleep(0.002)
    # Updating the oldest does not move it.
    ledger.put_kernel("k-b", "remote-hw-local", "local", {"id": "k-b", "again": 1})
    records = ledger.kernels()
    assert [r.kernel_id for r in records] == ["k-b", "k-a", "k-c"]
    assert records[0].info == {"id": "k-b", "again": 1}


def test_update_keeps_created_and_changes_the_rest(ledger: Ledger) -> None:
    ledger.put_kernel("k1", "remote-hw-local", "local", {"v": 1})
    first = ledger.get_kernel("k1")
    assert first is not None
    time.sleep(0.01)
    ledger.put_kernel("k1", "remote-hw-ssh-gpu-a", "ssh-gpu-a", {"v": 2})
    second = ledger.get_kernel("k1")
    assert second is not None
    assert second.created == first.created
    assert second.updated > first.updated
    assert (second.kernel_name, second.target, second.info) == (
        "remote-hw-ssh-gpu-a",
        "ssh-gpu-a",
        {"v": 2},
    )
    assert len(ledger.kernels()) == 1


def test_remove(ledger: Ledger) -> None:
    ledger.put_kernel("k1", "remote-hw-local", "local", {})
    ledger.put_kernel("k2", "remote-hw-local", "local", {})
    ledger.remove_kernel("k1")
    assert ledger.get_kernel("k1") is None
    assert [r.kernel_id for r in ledger.kernels()] == ["k2"]
    ledger.remove_kernel("k1")  # already gone: fine
    ledger.remove_kernel("never-there")
    assert [r.kernel_id for r in ledger.kernels()] == ["k2"]


def test_survives_reopening(path: Path) -> None:
    first = Ledger(path)
    first.put_kernel("k1", "remote-hw-local", "local", INFO)
    first.put_kernel("k2", "remote-hw-local", "local", {})
    first.remove_kernel("k2")
    written = first.get_kernel("k1")
    first.close()

    again = Ledger(path)
    try:
        assert again.get_kernel("k1") == written
        assert [r.kernel_id for r in again.kernels()] == ["k1"]
    finally:
        again.close()


def test_two_open_ledgers_on_one_file_see_each_other(path: Path) -> None:
    server, cli = Ledger(path), Ledger(path)
    try:
        server.put_kernel("k1", "remote-hw-local", "local", {"from": "server"})
        record = cli.get_kernel("k1")
        assert record is not None and record.info == {"from": "server"}
        cli.remove_kernel("k1")
        assert server.get_kernel("k1") is None
    finally:
        server.close()
        cli.close()


def test_file_0600_and_directory_0700(ledger: Ledger, path: Path) -> None:
    ledger.put_kernel("k1", "remote-hw-local", "local", {})
    assert path.is_file()
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    # SQLite's WAL and shared-memory files take the database file's mode.
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        assert side.exists()
        assert mode(side) == 0o600


def test_an_existing_wider_file_is_narrowed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.write_text("")
    os.chmod(path, 0o644)
    opened = Ledger(path)
    try:
        assert mode(path) == 0o600
        opened.put_kernel("k1", "remote-hw-local", "local", {})
        assert opened.get_kernel("k1") is not None
    finally:
        opened.close()


def test_modes_hold_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        opened = Ledger(tmp_path / "fresh" / "ledger.sqlite3")
    finally:
        os.umask(old)
    try:
        assert mode(opened.path) == 0o600
        assert mode(opened.path.parent) == 0o700
    finally:
        opened.close()


def test_closed_ledger_refuses_use(path: Path) -> None:
    opened = Ledger(path)
    opened.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        opened.kernels()


def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    Ledger(shared / "ledger.sqlite3").close()
    assert mode(shared) == 0o1777
    assert mode(shared / "ledger.sqlite3") == 0o600
