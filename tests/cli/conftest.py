"""The CLI run in-process against a configuration in the test's directory, with no AWS
credentials anywhere (so that nothing reaches AWS)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.providers.aws import credentials as aws_credentials


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home, Jupyter paths and an AWS credential chain with nothing in them."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jcfg"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jdata"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jrun"))
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws_credentials.forget()


def run_cli(
    tmp_path: Path, argv: tuple[str, ...], **sections: dict[str, Any]
) -> tuple[int, str, str]:
    """``jupyter remote-hw ARGV`` with a ledger and local state in ``tmp_path`` and the
    config ``sections`` over that; its exit status, stdout and stderr."""
    config: dict[str, Any] = {
        "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
        "LocalProvider": {"state_dir": str(tmp_path / "l")},
        "SSHProvider": {"include_ssh_config": False},
        **sections,
    }
    path = tmp_path / "jupyter_server_config.json"
    path.write_text(json.dumps(config))
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(path), *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


__all__ = ["no_credentials", "run_cli"]
