"""The ledger: a small SQLite file of what this user runs, kept across restarts.

For now it holds one row per kernel started through the provisioner, with
what is needed to reattach to it (never the kernel's key) and who started it
(a Jupyter server, or ``%%remote`` in a local kernel).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kernels (
    kernel_id   TEXT PRIMARY KEY,
    kernel_name TEXT NOT NULL,
    target      TEXT NOT NULL,
    info        TEXT NOT NULL,
    created     REAL NOT NULL,
    updated     REAL NOT NULL,
    owner       TEXT NOT NULL DEFAULT 'server'
)
"""

#: The owner of kernels a Jupyter server started (and reattaches after a restart).
SERVER_OWNER = "server"


@dataclass(frozen=True)
class KernelRecord:
    """A kernel the ledger knows about.

    Attributes:
        kernel_id: Jupyter's kernel id (the same on the host).
        kernel_name: The kernelspec it was started from.
        target: The target's name.
        info: The provisioner's persisted state.
        created: When it was first recorded (epoch seconds).
        updated: When it was last recorded.
        owner: Who started it: :data:`SERVER_OWNER`, or ``magic:<host>:<pid>``
            for a kernel that ``%%remote`` started from a local kernel.
    """

    kernel_id: str
    kernel_name: str
    target: str
    info: dict[str, Any]
    created: float
    updated: float
    owner: str = SERVER_OWNER


class Ledger:
    """One SQLite file, private to its user (file 0600; a directory it creates, 0700).

    Args:
        path: The database file; its directory is created when missing (an
            existing directory is left as it is).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700)
            os.chmod(path.parent, 0o700)  # whatever the umask
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
        # One connection, used from whichever thread drives the machines (a
        # kernel running %%remote keeps its event loop in a thread of its own).
        self._db = sqlite3.connect(path, isolation_level=None, timeout=10, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(kernels)")}
        if "owner" not in columns:  # a ledger written before kernels had owners
            self._db.execute("ALTER TABLE kernels ADD COLUMN owner TEXT NOT NULL DEFAULT 'server'")

    def put_kernel(self, kernel_id: str, kernel_name: str, target: str,
                   info: dict[str, Any], owner: str = SERVER_OWNER) -> None:
        """Record a kernel, or update its row."""
        now = time.time()
        self._db.execute(
            "INSERT INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(kernel_id) DO UPDATE "
            "SET kernel_name=excluded.kernel_name, target=excluded.target, info=excluded.info, "
            "updated=excluded.updated, owner=excluded.owner",
            (kernel_id, kernel_name, target, json.dumps(info), now, now, owner),
        )

    def get_kernel(self, kernel_id: str) -> KernelRecord | None:
        """The kernel's row, or None."""
        row = self._db.execute(
            "SELECT * FROM kernels WHERE kernel_id = ?", (kernel_id,)
        ).fetchone()
        return _record(row) if row else None

    def remove_kernel(self, kernel_id: str) -> None:
        """Forget a kernel (no error when it is not there)."""
        self._db.execute("DELETE FROM kernels WHERE kernel_id = ?", (kernel_id,))

    def kernels(self, owner: str | None = None) -> list[KernelRecord]:
        """Every recorded kernel (of ``owner``, when given), oldest first."""
        if owner is None:
            rows = self._db.execute("SELECT * FROM kernels ORDER BY created").fetchall()
        else:
            rows = self._db.execute("SELECT * FROM kernels WHERE owner = ? ORDER BY created",
                                    (owner,)).fetchall()
        return [_record(row) for row in rows]

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _record(row: tuple[Any, ...]) -> KernelRecord:
    kernel_id, kernel_name, target, info, created, updated, owner = row
    return KernelRecord(kernel_id, kernel_name, target, json.loads(info), created, updated, owner)
