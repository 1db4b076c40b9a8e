"""The shares in the ledger: which kernel was shared with whom, in which role and until
when, and what happened to each share since (granted, joined, revoked)."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from .records import _SHARE_FIELDS, ShareEvent, ShareRecord, _share

_SHARES_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS shares (
        share_id    TEXT PRIMARY KEY,
        kernel_id   TEXT NOT NULL,
        target      TEXT NOT NULL,
        role        TEXT NOT NULL,
        teammate    TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        expires     REAL NOT NULL,
        created     REAL NOT NULL,
        revoked     REAL,
        info        TEXT NOT NULL DEFAULT '{}'
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS share_events (
        id       INTEGER PRIMARY KEY AUTOINCREMENT,
        share_id TEXT NOT NULL,
        time     REAL NOT NULL,
        event    TEXT NOT NULL,
        detail   TEXT NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX IF NOT EXISTS share_events_by_share ON share_events (share_id, id)",
)


class LedgerShares:
    """The shares of :class:`.store.Ledger`, kept in its file with its transactions."""

    path: Path
    _db: sqlite3.Connection
    _lock: threading.RLock

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def add_share(
        self,
        share_id: str,
        kernel_id: str,
        target: str,
        role: str,
        *,
        teammate: str,
        fingerprint: str,
        expires: float,
        info: dict[str, Any] | None = None,
    ) -> ShareRecord:
        """Record a share the owner made (and the event that it was granted)."""
        now = time.time()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO shares VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
                (
                    share_id,
                    kernel_id,
                    target,
                    role,
                    teammate,
                    fingerprint,
                    expires,
                    now,
                    json.dumps(info or {}),
                ),
            )
            db.execute(
                "INSERT INTO share_events (share_id, time, event, detail) "
                "VALUES (?, ?, 'granted', ?)",
                (share_id, now, f"{role} to {teammate}"),
            )
        record = self.get_share(share_id)
        assert record is not None
        return record

    def get_share(self, share_id: str) -> ShareRecord | None:
        """The share's row, or None."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_SHARE_FIELDS)} FROM shares WHERE share_id = ?", (share_id,)
            ).fetchone()
        return _share(row) if row else None

    def shares(self, *, include_revoked: bool = False) -> list[ShareRecord]:
        """Shares, oldest first (revoked ones too when asked)."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_SHARE_FIELDS)} FROM shares ORDER BY created"
            ).fetchall()
        found = [_share(row) for row in rows]
        return [s for s in found if include_revoked or s.revoked is None]

    def revoke_share(self, share_id: str, detail: str = "") -> None:
        """Mark a share revoked and record the event (a revoked share is left as it is).

        Raises:
            KeyError: No such share.
        """
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT revoked FROM shares WHERE share_id = ?", (share_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"no share {share_id} in the ledger {self.path}")
            if row[0] is not None:
                return
            db.execute("UPDATE shares SET revoked = ? WHERE share_id = ?", (now, share_id))
            db.execute(
                "INSERT INTO share_events (share_id, time, event, detail) "
                "VALUES (?, ?, 'revoked', ?)",
                (share_id, now, detail),
            )

    def note_share(
        self, share_id: str, event: str, detail: str = "", at: float | None = None
    ) -> None:
        """Record a share's event (``joined`` with when and which session, say)."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO share_events (share_id, time, event, detail) VALUES (?, ?, ?, ?)",
                (share_id, time.time() if at is None else at, event, detail),
            )

    def share_events(self, share_id: str) -> list[ShareEvent]:
        """A share's events, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT share_id, time, event, detail FROM share_events "
                "WHERE share_id = ? ORDER BY id",
                (share_id,),
            ).fetchall()
        return [ShareEvent(*row) for row in rows]
