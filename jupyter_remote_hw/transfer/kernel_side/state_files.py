"""A kernel's variables written to files on its own host, and read back: the kernel side
of hibernated state kept where the kernel runs (a cluster's shared home, an instance's
disk) rather than on the Jupyter server's.

The files hold what a transfer sends (:func:`.pickling.to_segments`): one file per
variable, its pickle stream then its out-of-band buffers, back to back. Writing
is atomic: the files go into a temporary directory beside the entry, each is
flushed to disk, then the directory is renamed into place; a failure removes
the temporary directory and leaves an older entry as it was. Reading checks
every file against its SHA-256 before anything is rebuilt.

Runs inside kernels on hosts (see ``kernel_handler``): Python 3.8 syntax, the
standard library and cloudpickle only.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import shutil
import stat
from typing import Any

from .errors import TransferError
from .pickling import Pickled, dump_variables, to_segments

#: Bytes read or written, and hashed, at a time.
PIECE = 8 * 1024 * 1024
_TEMP = ".tmp-"


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
    digest = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        for view in views:
            for start in range(0, view.nbytes, PIECE):
                piece = view[start : start + PIECE]
                digest.update(piece)
                out.write(piece)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


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
        "type", "segments", "nbytes", "file", "sha256"}], "total_bytes"}``.

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
    try:
        variables = []
        position = 0
        for index, item in enumerate(layout):
            name = f"var-{index:04d}.bin"
            views = segments[position : position + len(item["segments"])]
            position += len(views)
            try:
                digest = _write_file(os.path.join(temp, name), views)
            except OSError as exc:
                raise TransferError(
                    "writing {!r} into {} failed: {}. Nothing was saved.".format(
                        item["name"], path, exc
                    )
                ) from None
            variables.append(dict(item, nbytes=sum(item["segments"]), file=name, sha256=digest))
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
    return {"path": path, "variables": variables, "total_bytes": total}


def read_state(directory: str, variables: list[dict[str, Any]]) -> list[Pickled]:
    """The variables written by :func:`write_state`, each file checked against its SHA-256.

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
        what = "the saved {!r} ({}) in {}".format(name, variable.get("type"), file)
        digest = hashlib.sha256()
        parts = []
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
                        done += count
                    digest.update(part)
                    parts.append(part)
        except OSError as exc:
            raise TransferError(f"{what} cannot be read: {exc}", name) from None
        if digest.hexdigest() != variable.get("sha256"):
            raise TransferError(
                f"{what} was changed after it was saved (its checksum differs)", name
            )
        pickled.append(Pickled(name, str(variable.get("type")), parts[0], parts[1:]))
    return pickled


def remove_state(directory: str) -> str | None:
    """Remove an entry's directory; the path removed, or None when there was none."""
    path = state_path(directory)
    if not os.path.lexists(path):
        return None
    aside = os.path.join(
        os.path.dirname(path),
        f"{_TEMP}{os.path.basename(path)}-{binascii.hexlify(os.urandom(4)).decode()}",
    )
    os.rename(path, aside)
    _remove(aside)
    return path
