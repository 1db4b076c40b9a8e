"""Processes of this machine, as seen from outside them."""

from __future__ import annotations

import os
import subprocess
import sys

from jupyter_remote_hw.processes import process_alive


def test_a_running_process_is_alive_and_an_ended_one_is_not() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)


def test_a_process_of_another_user_counts_as_alive() -> None:
    assert process_alive(1)  # init: another user's where the tests do not run as root
