"""Process helpers: liveness that sees through zombies and pid reuse, signals, log tails."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass


def _proc_stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name, or None off Linux."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode(errors="replace")
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to detect pid reuse.

    Args:
        pid: Process id.

    Returns:
        The start time, or None when it cannot be read.
    """
    fields = _proc_stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Whether ``pid`` is a live (not zombie) process, and the same one as recorded.

    Args:
        pid: Process id.
        start_time: The start time recorded when the process was launched, if
            known; a different start time means the pid was reused.

    Returns:
        True when the process exists, is not a zombie, and matches ``start_time``.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _proc_stat_fields(pid)
    if fields is None:
        return True
    if fields and fields[0] in ("Z", "X"):
        return False
    if start_time is not None and len(fields) >= 20:
        try:
            return int(fields[19]) == start_time
        except ValueError:
            return True
    return True


def signal_group(pid: int, sig: int) -> bool:
    """Send ``sig`` to the process group led by ``pid`` (or to ``pid`` alone).

    Kernels are started in their own session, so their pid is their process
    group id and the signal also reaches processes the kernel started.

    Args:
        pid: The group leader's pid.
        sig: Signal number.

    Returns:
        True when the signal was delivered to something.
    """
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


async def wait_gone(pid: int, start_time: int | None, timeout: float) -> bool:
    """Wait until a process that is not our child has gone.

    Args:
        pid: Process id.
        start_time: Its recorded start time, if known.
        timeout: Seconds to wait.

    Returns:
        True when the process is gone.
    """
    deadline = time.monotonic() + timeout
    while pid_alive(pid, start_time):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def write_pid_file(path: str, pid: int) -> None:
    """Write a pid, alone on a line, to ``path``.

    Args:
        path: The pid file.
        pid: The process id.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{pid}\n")


def log_tail(path: str, max_lines: int = 25, max_bytes: int = 4096) -> str:
    """The last lines of a log file, for error messages.

    Args:
        path: The log file.
        max_lines: At most this many lines.
        max_bytes: Read at most this many bytes from the end.

    Returns:
        The tail, stripped, or ``""`` when the file is missing or empty.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = data.splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]  # the first line is probably cut
    return "\n".join(lines[-max_lines:]).strip()


@dataclass
class ImportCheck:
    """Result of :func:`python_imports`.

    Attributes:
        ok: The import worked.
        runnable: The interpreter could be run at all.
        reason: Why not, when ``ok`` is false: the interpreter's last error line,
            or why it could not be run.
    """

    ok: bool
    runnable: bool
    reason: str = ""


async def python_imports(python: str, module: str, timeout: float = 30.0) -> ImportCheck:
    """Check in a subprocess whether ``python`` can import ``module``.

    Args:
        python: Path or name of a Python interpreter.
        module: Top-level module name.
        timeout: Seconds to wait for the interpreter.

    Returns:
        Whether the import worked, and why not.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            f"import {module}",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return ImportCheck(False, False, str(exc.strerror or exc))
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return ImportCheck(False, False, f"it did not finish within {timeout:.0f} s")
    if proc.returncode == 0:
        return ImportCheck(True, True)
    lines = stderr.decode(errors="replace").strip().splitlines()
    return ImportCheck(False, True, lines[-1] if lines else f"exit status {proc.returncode}")
