"""The ledger: a small SQLite file of what this user runs, kept across restarts.

It holds one row per kernel started through the provisioner, with what is
needed to reattach to it (never the kernel's key) and who started it (a
Jupyter server, or ``%%remote`` in a local kernel); one row per machine a
provider launched, with its lifecycle events and the cost it accrued (its
price times the time it ran); and the shares (``shares.py``). The server,
kernels and the command line use it at once: every read-modify-write runs in
one ``BEGIN IMMEDIATE`` transaction, and SQLite's write-ahead log lets readers
go on meanwhile.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import UserError
from .records import (
    _MACHINE_FIELDS,
    _UPDATABLE,
    ACTIVE_STATES,
    BILLED_STATES,
    FINAL_STATES,
    SERVER_OWNER,
    KernelRecord,
    MachineEvent,
    MachineExistsError,
    MachineRecord,
    ShareEvent,
    ShareRecord,
    _machine,
    _record,
)
from .shares import _SHARES_SCHEMA, LedgerShares

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

_MACHINES_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS machines (
        machine_id      TEXT PRIMARY KEY,
        name            TEXT NOT NULL,
        provider        TEXT NOT NULL,
        instance_type   TEXT NOT NULL DEFAULT '',
        region          TEXT NOT NULL DEFAULT '',
        resource_id     TEXT NOT NULL DEFAULT '',
        market          TEXT NOT NULL DEFAULT 'on-demand',
        price_per_hour  REAL NOT NULL DEFAULT 0,
        state           TEXT NOT NULL,
        owner           TEXT NOT NULL,
        info            TEXT NOT NULL DEFAULT '{}',
        created         REAL NOT NULL,
        updated         REAL NOT NULL,
        running_since   REAL,
        accrued_seconds REAL NOT NULL DEFAULT 0,
        accrued_cost    REAL NOT NULL DEFAULT 0,
        last_seen       REAL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS machine_events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        machine_id TEXT NOT NULL,
        time       REAL NOT NULL,
        event      TEXT NOT NULL,
        detail     TEXT NOT NULL DEFAULT ''
    )
    """,
    "CREATE INDEX IF NOT EXISTS machine_events_by_machine ON machine_events (machine_id, id)",
    "CREATE INDEX IF NOT EXISTS machines_by_resource ON machines (resource_id)",
)

SCHEMA_VERSION = 2
"""1: kernels only; 2: machines and their events added (older files are migrated in place).
The shares tables are created whenever missing, at any version."""


class LedgerClosedError(UserError, sqlite3.ProgrammingError):
    """The ledger was used after it was closed: the process that holds it is stopping."""


class _Connection(sqlite3.Connection):
    """A connection that, once closed, says so with :class:`LedgerClosedError` instead
    of sqlite3's bare "Cannot operate on a closed database"."""

    closed = False

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        """Run ``sql``, or raise :class:`LedgerClosedError` when the ledger is closed."""
        if self.closed:
            raise LedgerClosedError(
                "the ledger of kernels and machines is closed: the Jupyter server (or "
                "the kernel) that uses it is stopping"
            )
        return super().execute(sql, parameters)

    def close(self) -> None:
        """Close the connection; later uses raise :class:`LedgerClosedError`."""
        self.closed = True
        super().close()


class Ledger(LedgerShares):
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
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
        # One connection, used from whichever thread drives the machines (a
        # kernel running %%remote keeps its event loop in a thread of its own).
        self._db = sqlite3.connect(
            path, isolation_level=None, timeout=10, check_same_thread=False, factory=_Connection
        )
        self._lock = threading.RLock()
        self._db.execute("PRAGMA journal_mode=WAL")
        with self._transaction():
            self._db.execute(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(kernels)")}
            if "owner" not in columns:  # a ledger written before kernels had owners
                self._db.execute(
                    "ALTER TABLE kernels ADD COLUMN owner TEXT NOT NULL DEFAULT 'server'"
                )
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                for statement in _MACHINES_SCHEMA:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            for statement in _SHARES_SCHEMA:
                self._db.execute(statement)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before reading (other processes wait up to 10 s)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def put_kernel(
        self,
        kernel_id: str,
        kernel_name: str,
        target: str,
        info: dict[str, Any],
        owner: str = SERVER_OWNER,
    ) -> None:
        """Record a kernel, or update its row."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO kernels VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(kernel_id) DO "
                "UPDATE SET kernel_name=excluded.kernel_name, target=excluded.target, "
                "info=excluded.info, updated=excluded.updated, owner=excluded.owner",
                (kernel_id, kernel_name, target, json.dumps(info), now, now, owner),
            )

    def get_kernel(self, kernel_id: str) -> KernelRecord | None:
        """The kernel's row, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM kernels WHERE kernel_id = ?", (kernel_id,)
            ).fetchone()
        return _record(row) if row else None

    def remove_kernel(self, kernel_id: str) -> None:
        """Forget a kernel (no error when it is not there)."""
        with self._lock:
            self._db.execute("DELETE FROM kernels WHERE kernel_id = ?", (kernel_id,))

    def kernels(self, owner: str | None = None) -> list[KernelRecord]:
        """Every recorded kernel (of ``owner``, when given), oldest first."""
        with self._lock:
            if owner is None:
                rows = self._db.execute("SELECT * FROM kernels ORDER BY created").fetchall()
            else:
                rows = self._db.execute(
                    "SELECT * FROM kernels WHERE owner = ? ORDER BY created", (owner,)
                ).fetchall()
        return [_record(row) for row in rows]

    # ------------------------------------------------------------------ machines

    def add_machine(
        self,
        machine_id: str,
        name: str,
        provider: str,
        *,
        owner: str,
        instance_type: str = "",
        region: str = "",
        market: str = "on-demand",
        price_per_hour: float = 0.0,
        state: str = "requested",
        info: dict[str, Any] | None = None,
        detail: str = "",
        admit: Callable[[float], None] | None = None,
    ) -> MachineRecord:
        """Record a new machine in ``state`` (and the event that it was requested).

        Args:
            admit: Called in the same transaction with the $/h of the machines
                that run or are about to; raising refuses the machine (a budget
                check that two processes launching at once cannot both pass).

        Raises:
            MachineExistsError: A machine of that name and provider has not ended
                (checked in the same transaction, so two processes launching the
                same name at once cannot both succeed).
        """
        now = time.time()
        with self._transaction() as db:
            placeholders = ", ".join("?" * len(FINAL_STATES))
            live = db.execute(
                f"SELECT machine_id, state FROM machines WHERE name = ? AND provider = ? "
                f"AND state NOT IN ({placeholders})",
                (name, provider, *sorted(FINAL_STATES)),
            ).fetchone()
            if live is not None:
                raise MachineExistsError(
                    f"a machine named {name} already exists ({live[0]}, {live[1]})"
                )
            if admit is not None:
                admit(self._active_rate(db))
            db.execute(
                "INSERT INTO machines (machine_id, name, provider, instance_type, region, "
                "market, price_per_hour, state, owner, info, created, updated, running_since) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    machine_id,
                    name,
                    provider,
                    instance_type,
                    region,
                    market,
                    price_per_hour,
                    state,
                    owner,
                    json.dumps(info or {}),
                    now,
                    now,
                    now if state in BILLED_STATES else None,
                ),
            )
            self._event(db, machine_id, now, state, detail)
        record = self.get_machine(machine_id)
        assert record is not None
        return record

    @staticmethod
    def _event(
        db: sqlite3.Connection, machine_id: str, now: float, event: str, detail: str
    ) -> None:
        db.execute(
            "INSERT INTO machine_events (machine_id, time, event, detail) VALUES (?, ?, ?, ?)",
            (machine_id, now, event, detail),
        )

    def set_machine_state(
        self, machine_id: str, state: str, detail: str = "", at: float | None = None
    ) -> MachineRecord:
        """Move a machine to ``state``, closing or opening its billed interval.

        Leaving ``running`` adds the interval's seconds and cost to what it
        accrued; entering it starts a new interval. Every change is an event;
        setting the state it already has records nothing.

        Args:
            machine_id: The machine.
            state: The new state.
            detail: Said with the event (why, by whom).
            at: When it happened (default now).

        Raises:
            KeyError: No such machine.
        """
        now = time.time() if at is None else at
        with self._transaction() as db:
            row = db.execute(
                f"SELECT {', '.join(_MACHINE_FIELDS)} FROM machines WHERE machine_id = ?",
                (machine_id,),
            ).fetchone()
            if row is None:
                raise KeyError(f"no machine {machine_id} in the ledger {self.path}")
            record = _machine(row)
            if record.state == state:
                return record
            since, seconds, cost = record.running_since, record.accrued_seconds, record.accrued_cost
            if since is not None and state not in BILLED_STATES:
                span = max(0.0, now - since)
                seconds += span
                cost += span * record.price_per_hour / 3600.0
                since = None
            elif since is None and state in BILLED_STATES:
                since = now
            db.execute(
                "UPDATE machines SET state = ?, updated = ?, running_since = ?, "
                "accrued_seconds = ?, accrued_cost = ? WHERE machine_id = ?",
                (state, now, since, seconds, cost, machine_id),
            )
            self._event(db, machine_id, now, state, detail)
        updated = self.get_machine(machine_id)
        assert updated is not None
        return updated

    def update_machine(self, machine_id: str, **fields: Any) -> None:
        """Change a machine's details (``resource_id``, ``info``, ``price_per_hour``...).

        ``info`` is merged into what is there.

        Raises:
            KeyError: No such machine.
            ValueError: A field that cannot be changed this way.
        """
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"update_machine: cannot change {sorted(unknown)}")
        with self._transaction() as db:
            row = db.execute(
                "SELECT info FROM machines WHERE machine_id = ?", (machine_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"no machine {machine_id} in the ledger {self.path}")
            if "info" in fields:
                fields["info"] = json.dumps({**json.loads(row[0]), **fields["info"]})
            fields["updated"] = time.time()
            assignments = ", ".join(f"{key} = ?" for key in fields)
            db.execute(
                f"UPDATE machines SET {assignments} WHERE machine_id = ?",
                (*fields.values(), machine_id),
            )

    def note_machine(self, machine_id: str, event: str, detail: str = "") -> None:
        """Record an event that does not change the state (a step, a heartbeat gap...)."""
        with self._transaction() as db:
            self._event(db, machine_id, time.time(), event, detail)

    def touch_machine(self, machine_id: str, at: float | None = None) -> None:
        """Record that a client is alive for this machine (its ``last_seen``)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE machines SET last_seen = ? WHERE machine_id = ?",
                (time.time() if at is None else at, machine_id),
            )

    def get_machine(self, machine_id: str) -> MachineRecord | None:
        """The machine's row, or None."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_MACHINE_FIELDS)} FROM machines WHERE machine_id = ?",
                (machine_id,),
            ).fetchone()
        return _machine(row) if row else None

    def find_machine(self, key: str) -> MachineRecord | None:
        """The machine whose id, resource id or name is ``key`` (the newest live one by name)."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {', '.join(_MACHINE_FIELDS)} FROM machines WHERE machine_id = ? "
                "OR resource_id = ? OR name = ? ORDER BY (state IN ('terminated', 'failed')), "
                "created DESC LIMIT 1",
                (key, key, key),
            ).fetchone()
        return _machine(row) if row else None

    def machines(
        self, *, provider: str | None = None, states: set[str] | frozenset[str] | None = None
    ) -> list[MachineRecord]:
        """Machines (of ``provider``, in ``states``, when given), oldest first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {', '.join(_MACHINE_FIELDS)} FROM machines ORDER BY created"
            ).fetchall()
        found = [_machine(row) for row in rows]
        return [
            m
            for m in found
            if (provider is None or m.provider == provider)
            and (states is None or m.state in states)
        ]

    def machine_events(self, machine_id: str) -> list[MachineEvent]:
        """A machine's events, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT machine_id, time, event, detail FROM machine_events "
                "WHERE machine_id = ? ORDER BY id",
                (machine_id,),
            ).fetchall()
        return [MachineEvent(*row) for row in rows]

    def active_rate(self, exclude: str | None = None) -> float:
        """US dollars per hour of every machine that runs or is about to."""
        with self._lock:
            return self._active_rate(self._db, exclude)

    @staticmethod
    def _active_rate(db: sqlite3.Connection, exclude: str | None = None) -> float:
        states = sorted(ACTIVE_STATES)
        (rate,) = db.execute(
            f"SELECT COALESCE(SUM(price_per_hour), 0) FROM machines WHERE state IN "
            f"({', '.join('?' * len(states))}) AND machine_id IS NOT ?",
            (*states, exclude),
        ).fetchone()
        return float(rate)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: every use now raises
        :class:`LedgerClosedError`."""
        return bool(getattr(self._db, "closed", False))

    def close(self) -> None:
        """Close the database, once a transaction under way (in another thread) has
        ended; closing it again does nothing."""
        with self._lock:
            self._db.close()


__all__ = [
    "ACTIVE_STATES",
    "BILLED_STATES",
    "FINAL_STATES",
    "SCHEMA_VERSION",
    "SERVER_OWNER",
    "KernelRecord",
    "Ledger",
    "LedgerClosedError",
    "MachineEvent",
    "MachineExistsError",
    "MachineRecord",
    "ShareEvent",
    "ShareRecord",
]
