"""Files of hibernated state on a host reached over SSH, read and removed from here.

A kernel writes its state on its host's disk itself (see :mod:`..hibernation.far`);
what our side does there is read one file (to wake the kernel on another machine)
and remove a hibernated kernel's directory (when it is shut down, or deleted).
Paths may start with ``~/``, the login's home.
"""

from __future__ import annotations

import shlex
import tempfile

import asyncssh

from ..hibernation.files import PIECE, mapped
from ..transport import SSHConnection, TransportError


def sftp_path(path: str) -> str:
    """``~/x`` as SFTP reads it (relative to the login's home); other paths as they are."""
    return path.removeprefix("~/")


def shell_path(path: str) -> str:
    """``path`` quoted for ``sh`` on the host, ``~/`` kept as the home."""
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


async def read_file(conn: SSHConnection, path: str, where: str) -> memoryview:
    """The file at ``path``, read over ``conn`` (SFTP) one piece at a time into an
    unlinked temporary file here, as a read-only view of a map of that file: a file of
    any size costs our memory one piece, its bytes staying in the page cache.

    Args:
        conn: The host's connection.
        path: The file.
        where: The host, for messages (``the login node of dev``).

    Raises:
        OSError: It could not be read (the message names the file and the host).
    """
    try:
        live = await conn.wait_connected()
        with tempfile.TemporaryFile(prefix="jrhw-read-") as spool:
            async with live.start_sftp_client() as sftp, sftp.open(sftp_path(path), "rb") as source:
                while piece := await source.read(PIECE):
                    spool.write(piece if isinstance(piece, bytes) else piece.encode())
            spool.flush()
            return mapped(spool.fileno())
    except (asyncssh.Error, TransportError, OSError) as exc:
        raise OSError(f"reading {path} on {where} failed: {exc}") from None


async def _run(conn: SSHConnection, command: str, where: str, doing: str) -> None:
    """Run ``command`` on the host.

    Raises:
        OSError: The host could not be reached, or the command failed (``doing`` on
            ``where`` failed: its message).
    """
    try:
        result = await conn.run(command)
    except TransportError as exc:
        raise OSError(f"{where} cannot be reached: {exc}") from None
    if result.exit_status != 0:
        raise OSError(f"{doing} on {where} failed: {result.stderr.strip()}")


async def remove_dir(conn: SSHConnection, path: str, where: str) -> None:
    """Remove the directory ``path`` and what it holds, over ``conn``.

    Raises:
        OSError: The host could not be reached, or ``rm`` failed (its message).
    """
    await _run(conn, f"rm -rf -- {shell_path(path)}", where, f"removing {path}")


async def warm_files(conn: SSHConnection, paths: list[str], where: str) -> None:
    """Read ``paths`` on the host into its page cache (their bytes stay there), so a
    kernel that reads them soon after finds them in memory.

    Raises:
        OSError: The host could not be reached, or a file could not be read.
    """
    if paths:
        files = " ".join(shell_path(path) for path in paths)
        await _run(conn, f"cat -- {files} > /dev/null", where, "reading ahead")


__all__ = ["read_file", "remove_dir", "sftp_path", "shell_path", "warm_files"]
