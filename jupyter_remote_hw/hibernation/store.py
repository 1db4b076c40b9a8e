"""Where hibernated kernel state lives on our side: one directory per entry.

Layout under :attr:`HibernationStore.root` (0700, like everything in it)::

    <entry id>/manifest.json     what was saved (see below), written last
    <entry id>/var-0000.bin      one file per variable: its pickle stream, then its
    <entry id>/var-0001.bin      out-of-band buffers, back to back (0600)
    .tmp-<entry id>-<pid>-<hex>  an entry being written
    .lock                        held while entries are committed or removed

An entry's id is the id of the kernel it was saved from, unless the caller
chose another. The manifest (JSON) holds ``format`` (:data:`FORMAT`),
``entry_id``, ``kernel_id``, ``kernel_name``, ``target``, ``saved_at`` (Unix
time), ``cwd``, ``python``, ``modules`` (``{"name", "module"}``), ``variables``
(``{"name", "type", "nbytes", "file", "segments": [sizes], "sha256"}``),
``left_out`` (``{"name", "type" or "module", "reason"}``, and
``{"name", "comm", "count", "reason"}`` per target of the open comms),
``devices`` (where each variable holding tensors or modules had them:
``{"x": "cuda:0", "y": "cpu", "z": "mixed"}``; absent in entries saved before
it was recorded) and ``total_bytes``.
An entry whose kernel wrote its variables on its own host (see :mod:`.far`) has
no ``var-*.bin`` here: its manifest's ``far`` says where they are.

Writing is atomic: an entry is written into a temporary directory beside the
others, every file flushed to disk, then renamed into place (an older entry of
the same id is replaced only then). A reader sees the old entry or the new
one, never a part of either; what a killed writer left behind is removed the
next time the store is used.

Storage is bounded: :attr:`HibernationStore.max_bytes` caps the bytes of all
entries together (those kept on kernels' hosts included), and
:attr:`HibernationStore.min_free_bytes` keeps room on the disk (on the host's
disk too, for those); a save beyond either is refused (:class:`.errors.StoreFullError`)
before anything is written, with the sizes in the message.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Integer, Unicode
from traitlets.config import LoggingConfigurable

from ..processes import process_alive
from ..transfer.kernel_side.pickling import Pickled, to_segments
from ..transfer.kernel_side.state_files import unreadable_because
from ..validation import KERNEL_ID, check_identifier
from . import files
from .errors import CorruptEntryError, EntryNotFoundError, StoreFullError

#: Version of the entry layout; an entry of a newer one is not read.
FORMAT = 1
MANIFEST = "manifest.json"
_TEMP = ".tmp-"
_OLD = ".old-"
_LOCK = ".lock"
#: Seconds after which what a writer left is removed even if its pid is alive (reused).
STALE_AFTER = 24 * 3600.0


def size_text(count: float) -> str:
    """A byte count as people read it: ``12.3 MiB``, ``512.0 KiB``, ``40 B``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


@dataclass
class EntryInfo:
    """One saved entry, as listed.

    Attributes:
        entry_id: Its id (the kernel's, unless the caller chose another).
        path: Its directory.
        nbytes: Bytes its files take on disk, here and where ``far`` says.
        manifest: Its manifest; empty when ``problem`` says why it cannot be read.
        problem: Why the entry cannot be restored, or None.
    """

    entry_id: str
    path: Path
    nbytes: int
    manifest: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None

    @property
    def saved_at(self) -> float | None:
        """When it was saved (Unix time)."""
        value = self.manifest.get("saved_at")
        return float(value) if isinstance(value, int | float) else None

    @property
    def far(self) -> dict[str, Any] | None:
        """Where its variables are when a kernel wrote them on its host (see :mod:`.far`:
        ``provider``, ``host``, ``path``, ``label``); None when they are in ``path``."""
        far = self.manifest.get("far")
        return far if isinstance(far, dict) else None


def _writer_pid(name: str) -> int | None:
    """The pid in ``.tmp-<id>-<pid>-<hex>`` or ``.old-<id>-<pid>-<hex>``."""
    parts = name.rsplit("-", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None


class HibernationStore(LoggingConfigurable):
    """Hibernated kernel state on this machine's disk: list, write, read, delete.

    Configure as ``c.HibernationStore.root``, ``c.HibernationStore.max_bytes`` and
    ``c.HibernationStore.min_free_bytes``. Every method blocks on the disk: from
    an event loop, run :meth:`write` and :meth:`read` in a worker thread (as
    :func:`.snapshot.save` and :func:`.restore.restore` do).
    """

    root = Unicode(
        "",
        config=True,
        help="Directory of hibernated kernels' saved state, one directory per kernel "
        "(made 0700). Empty: jupyter_remote_hw/hibernated in Jupyter's data directory "
        "(`jupyter --data-dir`). Pick a disk that outlives reboots.",
    )
    max_bytes = Integer(
        20 * 1024**3,
        min=0,
        config=True,
        help="Most bytes all hibernated kernels' state may take together (0: no "
        "limit). A save that would go beyond it is refused, and the kernel keeps "
        "running.",
    )
    min_free_bytes = Integer(
        1024**3,
        min=0,
        config=True,
        help="Bytes to leave free on the store's disk: a save that would leave less "
        "is refused, and the kernel keeps running.",
    )

    # ------------------------------------------------------------------ where

    @property
    def path(self) -> Path:
        """The store's directory (not created)."""
        return Path(self.root or Path(jupyter_data_dir()) / "jupyter_remote_hw" / "hibernated")

    def _open(self) -> Path:
        """The store's directory, made owner-only, with what dead writers left removed."""
        root = self.path
        files.private_directory(root, parents=True)
        with os.scandir(root) as found:
            leftovers = [
                (item.name, item.stat(follow_symlinks=False).st_mtime)
                for item in found
                if item.name.startswith((_TEMP, _OLD))
            ]
        for name, written in leftovers:
            pid = _writer_pid(name)
            if pid is not None and process_alive(pid) and time.time() - written < STALE_AFTER:
                continue  # a save or a delete under way
            self._recover(root, name)
        return root

    def _recover(self, root: Path, name: str) -> None:
        """Put back an entry a writer had moved aside and not replaced; remove the rest."""
        with files.locked(root / _LOCK):
            if name.startswith(_OLD):
                entry_id = name[len(_OLD) :].rsplit("-", 2)[0]
                target = root / entry_id
                if not os.path.lexists(target):
                    os.rename(root / name, target)
                    self.log.warning(
                        "hibernated state %s put back after an interrupted save", entry_id
                    )
                    return
            files.remove_tree(root / name)

    def entry_path(self, entry_id: str) -> Path:
        """The directory of entry ``entry_id``.

        Raises:
            InvalidInputError: The id is not one (it could name a path elsewhere).
        """
        return self.path / check_identifier(entry_id, KERNEL_ID, "hibernated kernel id")

    # ------------------------------------------------------------------ listing

    def entries(self) -> list[EntryInfo]:
        """Every entry, oldest first; one whose manifest cannot be read is listed
        too, with its ``problem``, so that its bytes are seen and can be deleted."""
        return self._entries(self._open())

    def _entries(self, root: Path) -> list[EntryInfo]:
        found = []
        with os.scandir(root) as items:
            names = [
                item.name
                for item in items
                if not item.name.startswith(".") and item.is_dir(follow_symlinks=False)
            ]
        for name in names:
            try:
                found.append(self._info(root / name, name))
            except FileNotFoundError:  # deleted meanwhile
                continue
        return sorted(found, key=lambda e: (e.saved_at or 0.0, e.entry_id))

    def entry(self, entry_id: str) -> EntryInfo:
        """One entry.

        Raises:
            EntryNotFoundError: None has that id.
        """
        path = self.entry_path(entry_id)
        self._open()
        try:
            return self._info(path, entry_id)
        except FileNotFoundError:
            raise EntryNotFoundError(
                f"no hibernated state for kernel {entry_id} in {self.path}"
            ) from None

    def _info(self, path: Path, entry_id: str) -> EntryInfo:
        nbytes = files.tree_bytes(path)
        try:
            manifest = self._manifest(path)
        except CorruptEntryError as exc:
            return EntryInfo(entry_id, path, nbytes, problem=str(exc))
        if isinstance(manifest.get("far"), dict):
            nbytes += int(manifest.get("total_bytes") or 0)
        return EntryInfo(entry_id, path, nbytes, manifest)

    @staticmethod
    def _manifest(path: Path) -> dict[str, Any]:
        try:
            manifest = json.loads(files.read_text(path / MANIFEST))
        except FileNotFoundError:
            if not path.is_dir():
                raise
            raise CorruptEntryError(f"{path} has no {MANIFEST}: it cannot be restored") from None
        except (OSError, ValueError) as exc:
            raise CorruptEntryError(
                f"{path / MANIFEST} cannot be read ({type(exc).__name__}: {exc})"
            ) from None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("format"), int):
            raise CorruptEntryError(f"{path / MANIFEST} is not a manifest of saved state")
        if manifest["format"] > FORMAT:
            raise CorruptEntryError(
                f"{path} was saved by a newer jupyter-remote-hw (format {manifest['format']}, "
                f"this one reads {FORMAT}): restore it with that version"
            )
        return manifest

    def usage(self) -> dict[str, int]:
        """Bytes on disk per entry id."""
        return {entry.entry_id: entry.nbytes for entry in self.entries()}

    def _used(self, root: Path, besides: str) -> int:
        return sum(entry.nbytes for entry in self._entries(root) if entry.entry_id != besides)

    def total_bytes(self) -> int:
        """Bytes on disk of all entries together."""
        return sum(self.usage().values())

    # ------------------------------------------------------------------ room

    def check_room(self, entry_id: str, nbytes: int, on_disk: int | None = None) -> None:
        """Refuse a new entry of ``nbytes`` that would go beyond the cap or the disk's
        room (an older entry of the same id, which it replaces, does not count).
        ``on_disk``: the bytes of it on this disk, when not all (see :mod:`.far`).

        Raises:
            StoreFullError: With the sizes and the setting to change.
        """
        self._check_room(self._open(), entry_id, nbytes, on_disk)

    def room(self, entry_id: str) -> int:
        """Bytes a new entry ``entry_id`` may take under the cap (0: no cap)."""
        if not self.max_bytes:
            return 0
        return max(1, self.max_bytes - self._used(self._open(), entry_id))

    def _check_room(
        self, root: Path, entry_id: str, nbytes: int, on_disk: int | None = None
    ) -> None:
        used = self._used(root, entry_id)
        if self.max_bytes and used + nbytes > self.max_bytes:
            raise StoreFullError(
                f"saving kernel {entry_id} needs {size_text(nbytes)}, and the hibernated "
                f"kernels in {root} already hold {size_text(used)} of at most "
                f"{size_text(self.max_bytes)} (c.HibernationStore.max_bytes). Nothing was "
                "saved and the kernel keeps running; delete hibernated kernels, or raise "
                "the limit.",
                nbytes,
                used,
                self.max_bytes,
            )
        here = nbytes if on_disk is None else on_disk
        free = shutil.disk_usage(root).free
        if here and free - here < self.min_free_bytes:
            raise StoreFullError(
                f"saving kernel {entry_id} needs {size_text(nbytes)}, and the disk of {root} "
                f"has {size_text(free)} free, of which {size_text(self.min_free_bytes)} must "
                "stay free (c.HibernationStore.min_free_bytes). Nothing was saved and the "
                "kernel keeps running.",
                nbytes,
                0,
                free,
            )

    # ------------------------------------------------------------------ write

    def write(
        self,
        entry_id: str,
        manifest: dict[str, Any],
        pickled: list[Pickled],
        moved: Callable[[int], None] | None = None,
    ) -> EntryInfo:
        """Store ``pickled`` with ``manifest`` as entry ``entry_id``, atomically: when
        this returns the entry is on disk whole; when it raises, the store is as it
        was (an older entry of the same id included).

        Args:
            entry_id: The entry's id (the kernel's).
            manifest: What to record beside the variables (see the module's
                docstring); ``format``, ``entry_id``, ``variables`` and
                ``total_bytes`` are filled in here.
            pickled: The variables.
            moved: Called with the bytes just written, as they are, and with 0
                just before the entry is put in place; an exception it raises
                stops the write, and nothing is stored.

        Raises:
            StoreFullError: It would go beyond the cap or the disk's room.
            OSError: Writing failed (the disk is full, say).
        """
        self.entry_path(entry_id)
        root = self._open()
        total = sum(item.nbytes for item in pickled)
        self._check_room(root, entry_id, total)
        temp = root / f"{_TEMP}{entry_id}-{os.getpid()}-{secrets.token_hex(4)}"
        files.private_directory(temp)
        try:
            layout, segments = to_segments(pickled)
            variables = []
            position = 0
            for index, item in enumerate(layout):
                name = f"var-{index:04d}.bin"
                views = segments[position : position + len(item["segments"])]
                position += len(views)
                digest = files.write_new(temp / name, views, moved)
                variables.append(
                    {**item, "nbytes": sum(item["segments"]), "file": name, "sha256": digest}
                )
            del segments
            self._finish(root, temp, entry_id, manifest, variables, total, moved)
        except BaseException:
            files.remove_tree(temp)
            raise
        return self.entry(entry_id)

    def write_far(
        self, entry_id: str, manifest: dict[str, Any], variables: list[dict[str, Any]], total: int
    ) -> EntryInfo:
        """Store an entry whose variables a kernel wrote on its host (see :mod:`.far`):
        only its manifest is written here (with ``far``, where the data is, and each
        file's sizes and SHA-256), atomically as :meth:`write`; its ``total`` bytes
        count against :attr:`max_bytes`, not against this disk's room.

        Raises:
            StoreFullError: It would go beyond the cap.
            OSError: Writing failed.
        """
        self.entry_path(entry_id)
        root = self._open()
        self._check_room(root, entry_id, total, 0)
        temp = root / f"{_TEMP}{entry_id}-{os.getpid()}-{secrets.token_hex(4)}"
        files.private_directory(temp)
        try:
            self._finish(root, temp, entry_id, manifest, variables, total, None)
        except BaseException:
            files.remove_tree(temp)
            raise
        return self.entry(entry_id)

    def _finish(
        self,
        root: Path,
        temp: Path,
        entry_id: str,
        manifest: dict[str, Any],
        variables: list[dict[str, Any]],
        total: int,
        moved: Callable[[int], None] | None,
    ) -> None:
        """Write the manifest into ``temp`` and put the entry in place."""
        record = {
            "format": FORMAT,
            "entry_id": entry_id,
            "saved_at": time.time(),
            **manifest,
            "variables": variables,
            "total_bytes": total,
        }
        files.write_text(temp / MANIFEST, json.dumps(record, indent=1))
        files.fsync_directory(temp)
        far = isinstance(manifest.get("far"), dict)
        here = files.tree_bytes(temp)
        self._commit(
            root, temp, root / entry_id, entry_id, here + (total if far else 0), moved, here
        )

    def _commit(
        self,
        root: Path,
        temp: Path,
        target: Path,
        entry_id: str,
        nbytes: int,
        moved: Callable[[int], None] | None,
        on_disk: int | None = None,
    ) -> None:
        """Rename the written entry into place, replacing an older one of its id."""
        with files.locked(root / _LOCK):
            self._check_room(root, entry_id, nbytes, on_disk)  # another save may have come first
            if moved is not None:
                moved(0)  # the last moment the caller can stop it
            old = None
            if os.path.lexists(target):
                old = root / f"{_OLD}{entry_id}-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(target, old)
            try:
                os.rename(temp, target)
            except BaseException:
                if old is not None:
                    os.rename(old, target)
                raise
            files.fsync_directory(root)
        if old is not None:
            files.remove_tree(old)
        self.log.info(
            "hibernated state of kernel %s stored: %s in %s", entry_id, size_text(nbytes), target
        )

    # ------------------------------------------------------------------ read

    def read(
        self, entry_id: str, moved: Callable[[int], None] | None = None
    ) -> tuple[dict[str, Any], list[Pickled]]:
        """An entry's manifest and variables, each part checked against what was written.

        Raises:
            EntryNotFoundError: None has that id.
            CorruptEntryError: A part is missing, cut short or changed (named, with
                its variable), or the manifest cannot be read.
        """
        path = self.entry_path(entry_id)
        self._open()
        if not os.path.lexists(path):
            raise EntryNotFoundError(f"no hibernated state for kernel {entry_id} in {self.path}")
        manifest = self._manifest(path)
        if isinstance(manifest.get("far"), dict):
            raise CorruptEntryError(f"{path} keeps its variables on {manifest['far'].get('label')}")
        pickled = []
        for variable in manifest.get("variables") or []:
            try:
                name, kind = str(variable["name"]), str(variable["type"])
                where = path / str(variable["file"])
                sizes = [int(size) for size in variable["segments"]]
                written = str(variable["sha256"])
                if not sizes:
                    raise ValueError("no parts")
            except (KeyError, TypeError, ValueError) as exc:
                raise CorruptEntryError(
                    f"{path / MANIFEST} lists a variable it cannot "
                    f"describe ({type(exc).__name__}: {exc})"
                ) from None
            what = f"the saved {name!r} ({kind}, file {where.name})"
            if where.parent != path:
                raise CorruptEntryError(f"{what} lies outside its entry")
            try:
                parts, digest = files.read_parts(where, sizes, moved)
            except (OSError, ValueError) as exc:
                raise CorruptEntryError(f"{what} {unreadable_because(exc)}") from None
            if digest != written:
                raise CorruptEntryError(
                    f"{what} was changed after it was saved (its checksum differs)"
                )
            pickled.append(Pickled(name, kind, parts[0], parts[1:]))
        return manifest, pickled

    # ------------------------------------------------------------------ delete

    def delete(self, entry_id: str) -> bool:
        """Remove an entry; whether there was one."""
        path = self.entry_path(entry_id)
        root = self._open()
        with files.locked(root / _LOCK):
            if not os.path.lexists(path):
                return False
            aside = root / f"{_TEMP}{entry_id}-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(path, aside)  # gone at once for readers, however large it is
            files.fsync_directory(root)
        files.remove_tree(aside)
        self.log.info("hibernated state of kernel %s deleted", entry_id)
        return True


__all__ = ["FORMAT", "EntryInfo", "HibernationStore", "size_text"]
