"""Files the agent writes are its owner's alone and never written through a symbolic link."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from jupyter_remote_hw.agent.connection import write_private_json
from jupyter_remote_hw.agent.processes import write_pid_file


def test_a_pid_file_is_not_written_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    planted = tmp_path / "k.pid"
    planted.symlink_to(victim)
    with pytest.raises(OSError):
        write_pid_file(str(planted), 1234)
    assert victim.read_text() == "precious\n"
    fresh = tmp_path / "other.pid"
    write_pid_file(str(fresh), 1234)
    assert fresh.read_text() == "1234\n"
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600


def test_a_json_file_replaces_a_planted_link_instead_of_writing_through_it(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    planted = tmp_path / "k.json"
    planted.symlink_to(victim)
    write_private_json(str(planted), {"key": "secret"})
    assert victim.read_text() == "precious\n"
    assert not planted.is_symlink()
    assert json.loads(planted.read_text()) == {"key": "secret"}
    assert stat.S_IMODE(os.lstat(planted).st_mode) == 0o600
