"""Private files and directories of the store: created owner-only, never through a
symbolic link, written to disk before they count.

Blocking calls: the store runs them in a worker thread while a save or a restore
is under way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import mmap
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Bytes written or read, and hashed, at a time (progress is reported after each).
PIECE = 8 * 1024 * 1024

#: Mode of the store's directories and files.
DIR_MODE = 0o700
FILE_MODE = 0o600

#: Called with the bytes just written or read.
Moved = Callable[[int], None]


def private_directory(path: Path, parents: bool = False) -> None:
    """Make ``path`` a directory only its owner can enter (create it when missing).

    Raises:
        OSError: It is a symbolic link, not a directory, or someone else's.
    """
    if parents:
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, DIR_MODE)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"{path} is not a directory (a link or a file is there)")
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    if stat.S_IMODE(info.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)


def fsync_directory(path: Path) -> None:
    """Flush a directory's entries (a file created or renamed in it) to disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new(path: Path, views: list[memoryview], moved: Moved | None = None) -> str:
    """Write ``views`` one after the other into a new file of mode 0600, flushed to
    disk; the SHA-256 of its content.

    Raises:
        FileExistsError: ``path`` exists (a link there is not followed).
        OSError: The disk is full, or the write failed.
    """
    digest = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        for view in views:
            for start in range(0, view.nbytes, PIECE):
                piece = view[start : start + PIECE]
                digest.update(piece)
                while piece.nbytes:
                    written = os.write(fd, piece)
                    piece = piece[written:]
                if moved is not None:
                    moved(min(PIECE, view.nbytes - start))
        os.fsync(fd)
    finally:
        os.close(fd)
    return digest.hexdigest()


def mapped(fd: int) -> memoryview:
    """The whole of the open file ``fd`` as a read-only view of a map of it: its bytes
    stay in the page cache (the map stays while a view of it does)."""
    size = os.fstat(fd).st_size
    return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b"")


def map_path(path: Path | str) -> memoryview:
    """The file at ``path`` as :func:`mapped` gives it; never through a symbolic link.

    Raises:
        OSError: It is missing, is a link, or cannot be mapped.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return mapped(fd)
    finally:
        os.close(fd)


def read_parts(path: Path, sizes: list[int], moved: Moved | None = None) -> tuple[list[Any], str]:
    """A file written by :func:`write_new`, as one read-only view per part of a map of
    the file: its bytes stay in the page cache, not copied into our memory (a 1 GiB
    state costs no more than the pieces being sent), and its pages are read as they
    are hashed here.

    Returns:
        The views, and the SHA-256 of the content read.

    Raises:
        ValueError: The file's size is not the sum of ``sizes``.
        OSError: It is missing, is a link, or cannot be read.
    """
    digest = hashlib.sha256()
    whole = map_path(path)
    if whole.nbytes != sum(sizes):
        raise ValueError(f"it has {whole.nbytes} bytes where {sum(sizes)} were written")
    parts: list[Any] = []
    position = 0
    for part in sizes:
        view = whole[position : position + part]
        position += part
        for start in range(0, part, PIECE):
            piece = view[start : start + PIECE]
            digest.update(piece)
            if moved is not None:
                moved(piece.nbytes)
        parts.append(view)
    return parts, digest.hexdigest()


def write_text(path: Path, text: str) -> None:
    """A new file of mode 0600 holding ``text``, flushed to disk."""
    write_new(path, [memoryview(text.encode())])


def read_text(path: Path) -> str:
    """A file's text, read without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as stream:
        return stream.read().decode()


def tree_bytes(path: Path) -> int:
    """Bytes of the files directly in ``path`` (an entry has no subdirectories)."""
    total = 0
    with os.scandir(path) as found:
        for item in found:
            if item.is_file(follow_symlinks=False):
                total += item.stat(follow_symlinks=False).st_size
    return total


def remove_tree(path: Path) -> None:
    """Remove a directory and what is in it; nothing when it is gone already."""
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created 0600) while inside; other
    processes and threads that take it wait."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
