"""A kernel's variables written to files on its own host, and read back: the kernel side
of hibernated state kept where the kernel runs (a cluster's shared home, an instance's
disk) rather than on the Jupyter server's.

The files hold what a transfer sends (:func:`.pickling.to_segments`): one file per
variable, its pickle stream then its out-of-band buffers, back to back. Writing
is atomic: the files go into a temporary directory beside the entry, each is
flushed to disk, then the directory is renamed into place; a failure removes
the temporary directory and leaves an older entry as it was. Reading checks
every file against its digest before anything is rebuilt.

A file's digest (``digest``) is the SHA-256 of the SHA-256 of each 8 MiB piece, in
order, so that the pieces are hashed on every core at once (``hashlib`` lets go of
the GIL); entries written before it have the file's plain ``sha256`` instead, and
are read as they were.

Saves are incremental: once a kernel woke, its entry is kept beside it as its
*base* (``.base-<name>``, see :func:`remove_state`, with ``index.json`` listing
its files), and the next save links each variable whose bytes did not change
from there instead of writing it again (same name, sizes and digest); the base
goes once the new entry is in place. All or nothing still: the new entry is
whole or absent, the base whole until then.

Runs inside kernels on hosts (see ``kernel_handler``): Python 3.8 syntax, the
standard library and cloudpickle only.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import shutil
import stat
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .errors import TransferError
from .mapped import FileMappings, map_file, unchanged
from .pickling import Pickled, dump_variables, to_segments

#: Bytes read or written, and hashed, at a time.
PIECE = 8 * 1024 * 1024
_TEMP = ".tmp-"
_BASE = ".base-"
#: The base's list of its files (the variables as :func:`write_state` returns them).
INDEX = "index.json"
#: How a ``digest`` is made (its prefix): SHA-256 over the SHA-256 of each piece.
DIGEST = "sha256-8m:"

_hashing: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _hashing
    if _hashing is None:
        _hashing = ThreadPoolExecutor(
            max_workers=min(32, os.cpu_count() or 1), thread_name_prefix="jrhw-hash"
        )
    return _hashing


class _Hasher:
    """Hashes a file's bytes, given in file order, one :data:`PIECE` at a time as each
    piece is whole (on every core), so that hashing overlaps reading or writing."""

    def __init__(self) -> None:
        self.hashes: list[Future[bytes]] = []
        self._piece: list[memoryview] = []
        self._room = PIECE

    def add(self, view: memoryview) -> None:
        """The next bytes of the file (kept as they are until :meth:`digest`)."""
        start = 0
        while start < view.nbytes:
            part = view[start : start + self._room]
            self._piece.append(part)
            start += part.nbytes
            self._room -= part.nbytes
            if not self._room:
                self.hashes.append(_pool().submit(_piece_hash, self._piece))
                self._piece, self._room = [], PIECE

    def digest(self) -> str:
        """The file's ``digest`` (see the module), once every piece is hashed."""
        if self._piece or not self.hashes:
            self.hashes.append(_pool().submit(_piece_hash, self._piece))
            self._piece = []
        return _combine(self.hashes)


def _piece_hash(piece: list[memoryview]) -> bytes:
    digest = hashlib.sha256()
    for part in piece:
        digest.update(part)
    return digest.digest()


def _combine(hashes: list[Future[bytes]]) -> str:
    outer = hashlib.sha256()
    for each in hashes:
        outer.update(each.result())
    return DIGEST + outer.hexdigest()


def file_digest(views: list[Any]) -> str:
    """The ``digest`` of a file made of ``views`` back to back (see the module)."""
    hasher = _Hasher()
    for view in views:
        hasher.add(memoryview(view).cast("B"))
    return hasher.digest()


def matches(variable: dict[str, Any], views: list[Any]) -> bool:
    """Whether a file's bytes (``views``) are those saved for ``variable``: its
    ``digest``, or the plain ``sha256`` of an entry written before digests."""
    if "digest" in variable:
        return file_digest(views) == str(variable["digest"])
    whole = hashlib.sha256()
    for view in views:
        whole.update(view)
    return whole.hexdigest() == variable.get("sha256")


def base_path(path: str) -> str:
    """Where the entry at ``path`` is kept as the base of its next save."""
    return os.path.join(os.path.dirname(path), _BASE + os.path.basename(path))


def _size_text(count: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} B"


def _fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _remove_leftovers(parent: str, name: str) -> None:
    """Remove what a save or a removal of entry ``name`` left when its kernel was killed
    part way (only that entry's kernel writes it, so none is under way now)."""
    prefix = f"{_TEMP}{name}-"
    for item in os.listdir(parent):
        if item.startswith(prefix):
            _remove(os.path.join(parent, item))


def state_path(directory: str) -> str:
    """``directory`` with ``~`` expanded and made absolute, as this host reads it."""
    return os.path.abspath(os.path.expanduser(directory))


def private_parent(directory: str) -> str:
    """The directory that holds ``directory`` (``.../hibernated``), made owner-only when new;
    refused when it is a symbolic link or belongs to another user, who could then swap
    the saved state a wake reads (as the agent's boot refuses its cache directory).

    Raises:
        TransferError: It is a link, or someone else's.
    """
    parent = os.path.dirname(directory)
    os.makedirs(parent, mode=0o700, exist_ok=True)
    info = os.lstat(parent)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise TransferError(
            f"{parent}, where hibernated state is kept on this host, is a symbolic link: "
            "remove it (or point c.HibernationStore's far directory elsewhere). Nothing was "
            "saved or read."
        )
    if info.st_uid != os.getuid():
        raise TransferError(
            f"{parent}, where hibernated state is kept on this host, belongs to another "
            f"user (uid {info.st_uid}): whoever owns it could change the state a wake "
            "reads. Remove it, or keep state elsewhere. Nothing was saved or read."
        )
    if info.st_mode & 0o022:
        os.chmod(parent, 0o700)
    return parent


def check_room(directory: str, nbytes: int, max_bytes: int, min_free: int) -> None:
    """Refuse to write ``nbytes`` beyond ``max_bytes`` (0: no cap) or leaving less than
    ``min_free`` free on the disk of ``directory``.

    Raises:
        TransferError: With the directory, the bytes needed and those free.
    """
    if max_bytes and nbytes > max_bytes:
        raise TransferError(
            f"saving into {directory} needs {_size_text(nbytes)}, more than the "
            f"{_size_text(max_bytes)} left for hibernated kernels "
            "(c.HibernationStore.max_bytes). Nothing was saved."
        )
    parent = private_parent(directory)
    free = shutil.disk_usage(parent).free
    if free - nbytes < min_free:
        raise TransferError(
            f"saving into {directory} needs {_size_text(nbytes)}, and its disk has "
            f"{_size_text(free)} free, of which {_size_text(min_free)} must stay free "
            "(c.HibernationStore.min_free_bytes). Nothing was saved."
        )


def _write_file(path: str, views: list[memoryview]) -> str:
    """Write ``views`` to a new file, flushed, hashing them meanwhile; its digest."""
    hasher = _Hasher()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        for view in views:
            for start in range(0, view.nbytes, PIECE):
                piece = view[start : start + PIECE]
                hasher.add(piece)
                out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    return hasher.digest()


def _base_files(path: str) -> dict[str, dict[str, Any]]:
    """The variables of the entry's base, by name, whose files are there; {} without one."""
    base = base_path(path)
    try:
        with open(os.path.join(base, INDEX), encoding="utf-8") as source:
            listed = json.load(source)
    except (OSError, ValueError):
        return {}
    found = {}
    for variable in listed if isinstance(listed, list) else []:
        try:
            file = os.path.join(base, os.path.basename(str(variable["file"])))
            if os.path.getsize(file) == int(variable["nbytes"]) and "digest" in variable:
                found[str(variable["name"])] = dict(variable, path=file)
        except (OSError, KeyError, TypeError, ValueError):
            continue
    return found


def _kept(
    before: dict[str, Any],
    item: dict[str, Any],
    views: list[memoryview],
    file: str,
    mappings: FileMappings,
) -> str | None:
    """Link ``before``, the base's file of the same variable, to ``file`` when the
    variable did not change; its digest, or None when it changed (or cannot be linked: it
    is then written). A variable whose buffers are still the base file's own pages, never
    written since the kernel mapped them (:mod:`.mapped`), is unchanged without being
    hashed."""
    sizes = [int(size) for size in item["segments"]]
    if [int(size) for size in before["segments"]] != sizes:
        return None
    if unchanged(before["path"], sizes, views, mappings):
        digest = str(before["digest"])
    else:
        digest = file_digest(views)
    if digest != before["digest"]:
        return None
    try:
        os.link(before["path"], file)
    except OSError:
        return None
    return digest


def write_state(
    namespace: dict[str, Any],
    names: list[str],
    directory: str,
    max_bytes: int = 0,
    min_free: int = 0,
) -> dict[str, Any]:
    """Write the named variables into ``directory`` (replacing what is there), atomically.

    Returns:
        ``{"path": the directory as this host reads it, "variables": [{"name",
        "type", "segments", "nbytes", "file", "digest"}], "total_bytes",
        "written_bytes"}``: ``written_bytes`` leaves out what was kept from the base.

    Raises:
        NotSerializableError, MissingVariableError: A variable cannot go (named).
        TransferError: The disk has no room for it, or writing failed; nothing
            was written.
    """
    path = state_path(directory)
    layout, segments = to_segments(dump_variables(namespace, names))
    total = sum(view.nbytes for view in segments)
    check_room(path, total, max_bytes, min_free)
    parent = os.path.dirname(path)
    _remove_leftovers(parent, os.path.basename(path))
    temp = os.path.join(
        parent,
        f"{_TEMP}{os.path.basename(path)}-{binascii.hexlify(os.urandom(4)).decode()}",
    )
    os.mkdir(temp, 0o700)
    base = _base_files(path)
    mappings = FileMappings()  # this process's memory map, read once if asked
    written = 0
    try:
        variables = []
        position = 0
        for index, item in enumerate(layout):
            name = f"var-{index:04d}.bin"
            views = segments[position : position + len(item["segments"])]
            position += len(views)
            file = os.path.join(temp, name)
            try:
                before = base.get(str(item["name"]))
                digest = None if before is None else _kept(before, item, views, file, mappings)
                if digest is None:
                    digest = _write_file(file, views)
                    written += sum(item["segments"])
            except OSError as exc:
                raise TransferError(
                    "writing {!r} into {} failed: {}. Nothing was saved.".format(
                        item["name"], path, exc
                    )
                ) from None
            variables.append(dict(item, nbytes=sum(item["segments"]), file=name, digest=digest))
        with open(os.path.join(temp, INDEX), "w", encoding="utf-8") as index_file:
            json.dump(variables, index_file)
            index_file.flush()
            os.fsync(index_file.fileno())
        _fsync_directory(temp)
        old = None
        if os.path.lexists(path):
            old = temp + "-old"
            os.rename(path, old)
        os.rename(temp, path)
        _fsync_directory(parent)
    except BaseException:
        _remove(temp)
        raise
    if old is not None:
        _remove(old)
    _remove(base_path(path))  # what it kept is linked into the new entry
    return {"path": path, "variables": variables, "total_bytes": total, "written_bytes": written}


def unreadable_because(exc: Exception) -> str:
    """Why a saved file cannot be read, in words and without its path (the caller names
    the variable and its file)."""
    if isinstance(exc, FileNotFoundError):
        return "is missing from the saved state"
    return f"cannot be read: {getattr(exc, 'strerror', None) or exc}"


def read_state(directory: str, variables: list[dict[str, Any]]) -> list[Pickled]:
    """The variables written by :func:`write_state`, each file checked against its digest.

    Raises:
        TransferError: A file is missing, cut short or changed (named, with its
            variable).
    """
    path = state_path(directory)
    private_parent(path)
    pickled = []
    for variable in variables:
        name = str(variable["name"])
        file = os.path.join(path, os.path.basename(str(variable["file"])))
        sizes = [int(size) for size in variable["segments"]]
        what = "the saved {!r} ({}, file {})".format(
            name, variable.get("type"), os.path.basename(file)
        )
        if "digest" in variable and len(sizes) > 1:
            parts = _mapped_parts(file, sizes, what, name)
            same = file_digest(parts) == str(variable["digest"])
        else:
            parts, same = _read_parts(file, sizes, what, name, variable)
        if not same:
            raise TransferError(
                f"{what} was changed after it was saved (its checksum differs)", name
            )
        pickled.append(Pickled(name, str(variable.get("type")), parts[0], parts[1:]))
    return pickled


def _mapped_parts(file: str, sizes: list[int], what: str, name: str) -> list[Any]:
    """A saved file's pickle stream (copied) and buffers (views of a private map of the
    file: no copy, and :mod:`.mapped` can tell later which the kernel did not write)."""
    try:
        fd = os.open(file, os.O_RDONLY)
    except OSError as exc:
        raise TransferError(f"{what} {unreadable_because(exc)}", name) from None
    try:
        if os.fstat(fd).st_size < sum(sizes):
            raise TransferError(f"{what} is cut short", name)
        whole = memoryview(map_file(fd, sum(sizes)))
    except OSError as exc:
        raise TransferError(f"{what} {unreadable_because(exc)}", name) from None
    finally:
        os.close(fd)
    parts: list[Any] = [bytes(whole[: sizes[0]])]
    position = sizes[0]
    for size in sizes[1:]:
        parts.append(whole[position : position + size])
        position += size
    return parts


def _read_parts(
    file: str, sizes: list[int], what: str, name: str, variable: dict[str, Any]
) -> tuple[list[Any], bool]:
    """A saved file read into memory, and whether it matches what was saved: checked
    against its digest as it is read (or, for an entry from before digests, after)."""
    parts: list[Any] = []
    # Each piece is hashed as soon as it is read (the digest), so checking overlaps
    # reading; an entry from before digests is checked after, as it was.
    hasher = _Hasher() if "digest" in variable else None
    try:
        with open(file, "rb") as source:
            for size in sizes:
                part = bytearray(size)
                view = memoryview(part)
                done = 0
                while done < size:
                    count = source.readinto(view[done : done + PIECE])
                    if not count:
                        raise TransferError(f"{what} is cut short", name)
                    if hasher is not None:
                        hasher.add(view[done : done + count])
                    done += count
                parts.append(part)
    except OSError as exc:
        raise TransferError(f"{what} {unreadable_because(exc)}", name) from None
    if hasher is not None:
        return parts, hasher.digest() == str(variable["digest"])
    return parts, matches(variable, parts)


def remove_state(directory: str, keep: bool = False) -> str | None:
    """Remove an entry's directory, or with ``keep`` (its kernel woke) keep it as the
    base of the next save, replacing an older base; the path, or None when there was
    none. Without ``keep``, its base goes too."""
    path = state_path(directory)
    if not keep:
        _remove(base_path(path))
    if not os.path.lexists(path):
        return None
    if keep:
        base = base_path(path)
        _remove(base)
        os.rename(path, base)
        return path
    aside = os.path.join(
        os.path.dirname(path),
        f"{_TEMP}{os.path.basename(path)}-{binascii.hexlify(os.urandom(4)).decode()}",
    )
    os.rename(path, aside)
    _remove(aside)
    return path
