"""The host's sshd sessions, read from ``/proc``: which processes are sshd's (any OpenSSH),
which one holds a relayed connection, whose each socket is, and when each began.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

#: ``sshd: user@notty``, ``sshd: user [priv]`` (OpenSSH before 9.8) or
#: ``sshd-session: user@notty`` (9.8 and later): an sshd process serving one connection.
_SSHD_SESSION = re.compile(r"^sshd(-session)?: [A-Za-z0-9._-]+(@\S+)?( \[(priv|net)\])?\s*$")


#: The programs of sshd's processes: the listener, and (OpenSSH 9.8+) each session's.
_SSHD_PROGRAMS = ("sshd", "sshd-session")


def is_sshd_session_title(title: str) -> bool:
    """Whether a process title (its argv[0]) is that of an sshd session, any OpenSSH."""
    return bool(_SSHD_SESSION.match(title))


def is_sshd_program(argv0: str) -> bool:
    """Whether argv[0] is sshd's: ``/usr/sbin/sshd -D``, ``sshd: user@notty``,
    ``/usr/lib/openssh/sshd-session``, ``sshd-session: user [priv]``."""
    return os.path.basename(argv0.split(":", 1)[0].split(" ", 1)[0]) in _SSHD_PROGRAMS


def _tcp_sockets() -> Iterator[tuple[int, int, int, str]]:
    """Every TCP socket of the host's network namespace, as ``/proc/net/tcp`` lists them
    to any user: its local port, its remote port, its owner's uid and its inode."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)
                rows = [row.split() for row in handle]
        except OSError:
            continue
        for cols in rows:
            try:
                yield (
                    int(cols[1].rsplit(":", 1)[1], 16),
                    int(cols[2].rsplit(":", 1)[1], 16),
                    int(cols[7]),
                    cols[9],
                )
            except (ValueError, IndexError):
                continue


def peer_inodes(local_port: int, peer_ports: set[int]) -> set[str]:
    """Socket inodes of the connections from ``peer_ports`` to our ``local_port``."""
    return {
        inode for src, dst, _, inode in _tcp_sockets() if src in peer_ports and dst == local_port
    }


def peer_uid(local_port: int, peer_port: int) -> int | None:
    """The uid owning the socket that connected from ``peer_port`` to our ``local_port``.

    The owner of every socket is listed for any user to read; None when the
    connection is not listed.
    """
    for src, dst, uid, _ in _tcp_sockets():
        if src == peer_port and dst == local_port:
            return uid
    return None


def holders(inodes: set[str]) -> set[int]:
    """Pids of this user's processes that hold one of the socket ``inodes``."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    if not wanted:
        return pids
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{fd_dir}/{fd}") in wanted:
                        pids.add(int(entry))
                        break
        except OSError:
            continue
    return pids


def start_time(pid: int) -> int | None:
    """A process's start time in clock ticks after boot (with the pid, it names one process)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def boot_time() -> float:
    with open("/proc/stat", encoding="ascii") as handle:
        for row in handle:
            if row.startswith("btime "):
                return float(row.split()[1])
    raise OSError("no btime in /proc/stat")


def sessions_begun_before(when: float) -> set[int]:
    """Pids of this user's sshd session processes that started before ``when`` (epoch)."""
    found: set[int] = set()
    try:
        boot, ticks = boot_time(), os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return {0}  # cannot tell: assume one may be left
    uid = os.getuid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")[0].decode(errors="replace")
            if not is_sshd_session_title(argv) or os.stat(f"/proc/{pid}").st_uid != uid:
                continue
        except OSError:
            continue
        started = start_time(pid)
        if started is not None and boot + started / ticks < when:
            found.add(pid)
    return found


def is_sshd(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv0 = handle.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return False
    return is_sshd_program(argv0)
