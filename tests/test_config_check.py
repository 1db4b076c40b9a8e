"""A broken configuration is refused in one line naming the file, the setting and what it
may be, by the command line and by the server alike; never a traceback, never ignored."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from traitlets import TraitError
from traitlets.config.loader import KVArgParseConfigLoader

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.config_check import (
    ConfigError,
    check_config,
    config_file_candidates,
    unloaded_config_file,
)
from jupyter_remote_hw.ledger.budget import BudgetGuard

from .serverprocess import server_dirs, start_server


@pytest.fixture
def jcfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Jupyter config dir and temporary Jupyter paths."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jcfg"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jdata"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jrt"))
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    (tmp_path / "jcfg").mkdir()
    return tmp_path / "jcfg"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            'c.BudgetGuard.max_per_machine = "lots"',
            "c.BudgetGuard.max_per_machine = 'lots' is refused: it must be a number, 0 or more",
        ),
        (
            "c.BudgetGuard.max_per_machine = -1.0",
            "= -1.0 is refused: it must be a number, 0 or more",
        ),
        ('c.BudgetGuard.max_total = float("nan")', "max_total = nan is refused"),
        ('c.BudgetGuard.max_total = float("inf")', "max_total = inf is refused"),
        ("c.AWSProvider.idle_stop = -60", "c.AWSProvider.idle_stop = -60 is refused"),
        (
            'c.AWSProvider.shutdown_behavior = "explode"',
            "it must be any of \\['stop', 'terminate'\\]",
        ),
        ("c.TransportManager.keepalive_count_max = 1.5", "it must be a whole number, 0 or more"),
        ('c.SSHProvider.hosts = [{"hst": "box"}]', "has no 'host'"),
        ("c.RemoteHWExtension.list_targets = 'no'", "it must be a boolean"),
        # A misspelt budget would otherwise be a warning, and no budget at all.
        (
            "c.BudgetGuard.max_totl = 10",
            (
                "c.BudgetGuard.max_totl is not a setting of BudgetGuard: "
                "did you mean c.BudgetGuard.max_total\\?"
            ),
        ),
        (
            "c.AWSProvider.zzz = 1",
            "c.AWSProvider.zzz is not a setting of AWSProvider; its settings",
        ),
        # Changing a list in place is checked like setting it.
        ('c.SSHProvider.hosts.append({"hst": "box"})', "has no 'host'"),
    ],
)
def test_a_bad_setting_is_refused_in_one_line(jcfg: Path, line: str, said: str) -> None:
    path = jcfg / "jupyter_server_config.py"
    path.write_text(f"c = get_config()  # noqa\n{line}\n")
    code, out, err = run_cli("shares")
    assert code == 1 and out == ""
    assert err.startswith(f"jupyter remote-hw shares: {path}: c.")
    assert re.search(said, err), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_huge_bad_value_is_not_echoed_whole(jcfg: Path) -> None:
    (jcfg / "jupyter_server_config.json").write_text(
        json.dumps({"BudgetGuard": {"max_total": "x" * 1_000_000}})
    )
    code, _, err = run_cli("shares")
    assert code == 1 and "jupyter_server_config.json: c.BudgetGuard.max_total = 'xxx" in err
    assert len(err) < 500


def test_the_file_that_sets_it_is_named(jcfg: Path, tmp_path: Path) -> None:
    (jcfg / "jupyter_server_config.py").write_text("c.BudgetGuard.max_total = 5.0\n")
    given = tmp_path / "mine.json"
    given.write_text(json.dumps({"BudgetGuard": {"max_per_machine": -3}}))
    code, _, err = run_cli("--config", str(given), "shares")
    assert code == 1 and err.startswith(f"jupyter remote-hw shares: {given}: ")


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("jupyter_server_config.py", "c = = 1\n", "line 1: syntax error"),
        (
            "jupyter_server_config.py",
            "x = 1\nc.A.b = undefined\n",
            "line 2: NameError: name 'undefined' is not defined",
        ),
        (
            "jupyter_server_config.json",
            '{"BudgetGuard": {\n"max_total": 1,}}',
            "line 2: JSONDecodeError",
        ),
        ("jupyter_config.json", "[", "JSONDecodeError"),
    ],
)
def test_a_config_file_that_does_not_load_stops_the_command(
    jcfg: Path, name: str, text: str, said: str
) -> None:
    (jcfg / name).write_text(text)
    code, out, err = run_cli("shares")
    assert code == 1 and out == ""
    assert err.startswith(f"jupyter remote-hw shares: configuration file {jcfg / name}")
    assert said in err and err.count("\n") == 1 and "fix or remove it" in err


def test_good_settings_pass(jcfg: Path, tmp_path: Path) -> None:
    (jcfg / "jupyter_server_config.py").write_text(
        "c.BudgetGuard.max_per_machine = 2\nc.AWSProvider.idle_stop = 0\n"
        "c.SSHProvider.hosts = [{'host': 'box'}]\nc.SSHProvider.exclude_hosts.append('x')\n"
        f"c.MachineManager.ledger_path = {str(tmp_path / 'l.sqlite3')!r}\n"
    )
    code, out, err = run_cli("shares")
    assert code == 0 and "No shares" in out, err


def test_a_budget_cannot_be_set_to_no_limit_by_nan_or_a_negative() -> None:
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(TraitError):
            BudgetGuard(max_per_machine=bad)
        with pytest.raises(TraitError):
            BudgetGuard(max_total=bad)
    assert BudgetGuard(max_total=0).max_total == 0.0


def _server_exit(dirs: dict[str, Path], log: Path, args: Sequence[str] = ()) -> tuple[int, str]:
    """Start a server that is expected to refuse to start; its exit code and its log."""
    server = start_server(dirs, log, args=args)
    try:
        code = server.process.wait(timeout=60)
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    return code, log.read_text()


async def test_the_server_refuses_to_start_with_a_bad_setting(tmp_path: Path) -> None:
    dirs = server_dirs(tmp_path)
    config = dirs["config"] / "jupyter_server_config.py"
    config.write_text(
        "c.ServerApp.jpserver_extensions = {'jupyter_remote_hw': True}\n"
        "c.BudgetGuard.max_per_machine = float('nan')\n"
    )
    code, text = _server_exit(dirs, tmp_path / "server.log")
    assert code == 1, text
    assert f"jupyter_remote_hw: {config}: c.BudgetGuard.max_per_machine = nan is refused" in text
    assert "The server does not start." in text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "jupyter_server_config.py",
            "c.BudgetGuard.max_total = 20.0\nc.ServerApp.x = (\n",
            ", line 2: syntax error",
        ),
        (
            "jupyter_server_config.json",
            '{"BudgetGuard": {"max_total": 20.0,}}',
            ", line 1: JSONDecodeError",
        ),
    ],
)
async def test_the_server_refuses_to_start_when_a_config_file_does_not_load(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    """jupyter_server logs the error and starts without the file: its budget would be
    missing, so our extension stops the start, naming the file and the line."""
    dirs = {d: tmp_path / d for d in ("config", "data", "runtime", "nb")}
    for directory in dirs.values():
        directory.mkdir()
    (dirs["config"] / "jupyter_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}}})
    )
    broken = dirs["config"] / name
    broken.write_text(text)
    code, logged = _server_exit(dirs, tmp_path / "server.log")
    assert code == 1, logged
    ours = [line for line in logged.splitlines() if "jupyter_remote_hw:" in line]
    assert len(ours) == 1, logged
    assert f"configuration file {broken}{where}" in ours[0]
    assert ours[0].endswith("fix or remove it. The server does not start.")


def test_a_config_file_given_on_the_command_line_replaces_the_searched_one(tmp_path: Path) -> None:
    """With ``--config``, a jupyter_server_config.py in the config directories is not
    loaded by design, and is not taken for one that failed."""
    searched = tmp_path / "jupyter_server_config.py"
    searched.write_text("c.ServerApp.x = (\n")
    given = tmp_path / "mine.py"
    given.write_text("c.BudgetGuard.max_total = 1.0\n")
    candidates = config_file_candidates(
        ["jupyter_config", "jupyter_server_config"], [str(tmp_path)], str(given)
    )
    assert str(searched) not in candidates and str(given) in candidates
    assert unloaded_config_file(candidates, [str(given)]) is None
    searching = config_file_candidates(["jupyter_config", "jupyter_server_config"], [str(tmp_path)])
    broken = unloaded_config_file(searching, [])
    assert broken is not None and broken.path == str(searched)
    assert f"{searched}, line 1: syntax error" in str(broken)


def test_the_command_line_itself_exits_1_with_one_line(jcfg: Path) -> None:
    (jcfg / "jupyter_server_config.py").write_text('c.BudgetGuard.max_per_machine = "lots"\n')
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_remote_hw.cli", "shares"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "max_per_machine = 'lots' is refused" in done.stderr


def test_numbers_given_on_the_command_line_are_numbers() -> None:
    """``--Class.name=value`` reaches the configuration as a string that traitlets
    converts when the class loads it; the check converts it the same way."""
    good = KVArgParseConfigLoader(
        argv=[
            "--RemoteHWExtension.orphan_reap_interval=0",
            "--BudgetGuard.max_total=12.5",
            "--TransportManager.keepalive_count_max=3",
            "--RemoteHWExtension.list_targets=False",
        ]
    ).load_config()
    check_config(good)
    bad = KVArgParseConfigLoader(argv=["--BudgetGuard.max_total=lots"]).load_config()
    with pytest.raises(ConfigError, match=r"c\.BudgetGuard\.max_total = 'lots' is refused"):
        check_config(bad)
    negative = KVArgParseConfigLoader(argv=["--BudgetGuard.max_total=-1"]).load_config()
    with pytest.raises(ConfigError, match=r"max_total = -1\.0 is refused"):
        check_config(negative)


async def test_the_server_starts_with_numbers_on_its_command_line(tmp_path: Path) -> None:
    dirs = server_dirs(tmp_path)
    (dirs["config"] / "jupyter_server_config.py").write_text(
        "c.ServerApp.jpserver_extensions = {'jupyter_remote_hw': True}\n"
        "c.SSHProvider.include_ssh_config = False\n"
    )
    server = start_server(
        dirs,
        tmp_path / "server.log",
        args=["--RemoteHWExtension.orphan_reap_interval=0", "--BudgetGuard.max_total=12.5"],
    )
    try:
        await server.ready()
        assert "is refused" not in server.log.read_text()
    finally:
        server.stop()
    code, said = _server_exit(dirs, tmp_path / "refused.log", args=["--BudgetGuard.max_total=lots"])
    assert code == 1, said
    assert "c.BudgetGuard.max_total = 'lots' is refused" in said, said
    assert "Traceback" not in said
