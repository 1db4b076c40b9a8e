"""The owner's ledger keeps shares and their events, also in a ledger made before shares."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jupyter_remote_hw.ledger import Ledger


def test_shares_and_events(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    try:
        record = ledger.add_share(
            "s1",
            "k1",
            "ssh-box",
            "viewer",
            teammate="ada@laptop",
            fingerprint="SHA256:abc",
            expires=2e9,
            info={"ports": {"iopub_port": 4000}},
        )
        assert record.revoked is None and record.info == {"ports": {"iopub_port": 4000}}
        ledger.add_share(
            "s2",
            "k1",
            "ssh-box",
            "collaborator",
            teammate="bob",
            fingerprint="SHA256:def",
            expires=2e9,
        )
        ledger.note_share("s1", "joined", "sshd session 123", at=1000.0)
        ledger.revoke_share("s1", "key line removed")
        first = ledger.get_share("s1")
        ledger.revoke_share("s1", "again")  # already revoked: nothing changes
        assert ledger.get_share("s1") == first
        assert [s.share_id for s in ledger.shares()] == ["s2"]
        assert [s.share_id for s in ledger.shares(include_revoked=True)] == ["s1", "s2"]
        revoked = ledger.get_share("s1")
        assert revoked is not None and revoked.revoked is not None
        events = ledger.share_events("s1")
        assert [e.event for e in events] == ["granted", "joined", "revoked"]
        assert events[1].time == 1000.0 and events[1].detail == "sshd session 123"
        assert events[0].detail == "viewer to ada@laptop"
        with pytest.raises(KeyError, match="no share nope"):
            ledger.revoke_share("nope")
        assert ledger.get_share("nope") is None
    finally:
        ledger.close()


def test_ledger_from_before_shares_gets_the_tables(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    Ledger(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE shares")
    db.execute("DROP TABLE share_events")
    db.commit()
    db.close()
    ledger = Ledger(path)
    try:
        ledger.add_share("s1", "k1", "t", "viewer", teammate="x", fingerprint="f", expires=1.0)
        assert ledger.get_share("s1") is not None
    finally:
        ledger.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2
