"""Which processes are sshd's, as revocation finds them, across OpenSSH versions."""

from __future__ import annotations

import subprocess
import time

import pytest

from jupyter_remote_hw.agent.sshd_sessions import (
    is_sshd_program,
    is_sshd_session_title,
    sessions_begun_before,
)

from ..testhosts import SSHTestHost


@pytest.mark.parametrize(
    "title",
    [
        "sshd: ada@notty",
        "sshd: ada [priv]",
        "sshd: ada@pts/3",
        "sshd: ada [net]",
        # OpenSSH 9.8 and later run each session as sshd-session.
        "sshd-session: ada@notty",
        "sshd-session: ada [priv]",
        "sshd-session: ada@pts/0",
    ],
)
def test_session_titles_of_every_openssh_are_recognised(title: str) -> None:
    assert is_sshd_session_title(title)


@pytest.mark.parametrize(
    "title",
    [
        "/usr/sbin/sshd -D",
        "sshd-sessions: ada@notty",
        "bash",
        "sshd: ada@notty; rm -rf /",
        "python3 sshd: ada@notty",
        "ssh: ada@notty",
    ],
)
def test_other_titles_are_not_sessions(title: str) -> None:
    assert not is_sshd_session_title(title)


@pytest.mark.parametrize(
    ("argv0", "expected"),
    [
        ("/usr/sbin/sshd", True),
        ("sshd: ada@notty", True),
        ("/usr/lib/openssh/sshd-session", True),
        ("sshd-session: ada [priv]", True),
        ("/usr/bin/ssh", False),
        ("sshd-sessions", False),
        ("/usr/bin/python3", False),
    ],
)
def test_sshd_programs(argv0: str, expected: bool) -> None:
    assert is_sshd_program(argv0) is expected


def test_a_new_ssh_session_on_this_machines_sshd_is_found(ssh_host: SSHTestHost) -> None:
    """The test host's sshd (this machine's OpenSSH) serves a new login: its session
    processes are found, and every one found has a session's title."""
    before = sessions_begun_before(time.time() + 1)
    with subprocess.Popen(
        ["ssh", "-F", str(ssh_host.ssh_config), ssh_host.alias, "sleep 30"]
    ) as client:
        try:
            deadline = time.monotonic() + 15
            new: set[int] = set()
            while not new and time.monotonic() < deadline:
                time.sleep(0.2)
                new = sessions_begun_before(time.time() + 1) - before
            assert new
            for pid in new:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    assert is_sshd_session_title(handle.read().split(b"\0")[0].decode())
        finally:
            client.kill()
