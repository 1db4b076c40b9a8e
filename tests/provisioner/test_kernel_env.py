"""What a kernel on a hardware target starts with: its working directory and environment,
and its end once the process that started it is killed.

Each test runs a real client process (jupyter_client's ``KernelManager`` on
kernelspecs installed in ``JUPYTER_PATH``, as ``jupyter run`` or nbclient use
them) that starts a kernel on the local target or the loopback SSH test host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.providers import Target
from jupyter_remote_hw.provisioner.kernelspecs import target_kernel_spec

from ..conftest import TEST_TRANSPORT
from ..processes import kill_processes_mentioning
from ..testhosts import SSHTestHost

SSH_TARGET = "ssh-testhost"
GRACE = 3.0

# Starts a kernel with KernelManager, prints what the kernel sees and the launch
# notes as one JSON line, then shuts it down or waits to be killed.
CLIENT = textwrap.dedent("""
    import json, os, sys, time
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    kernel_name, cwd, then = sys.argv[1], sys.argv[2], sys.argv[3]
    km = KernelManager(kernel_name=kernel_name, config=Config(json.loads(sys.argv[4])))
    km.start_kernel(cwd=cwd or None, env={**os.environ, "RHW_CALL_VAR": "from-call"})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    out = []
    kc.execute_interactive(
        "import json, os; print(json.dumps({'cwd': os.getcwd(), 'pid': os.getpid(), "
        "'env': dict(os.environ)}))",
        timeout=60,
        output_hook=lambda m: out.append(m["content"].get("text", "")),
    )
    seen = json.loads("".join(out))
    seen["notes"] = km.provisioner.run.steps.notes
    print(json.dumps(seen), flush=True)
    if then == "shutdown":
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    else:
        time.sleep(3600)
""")


@dataclass
class Setup:
    root: Path
    env: dict[str, str]

    def run(
        self, kernel: str, cwd: str | Path | None, then: str = "shutdown", **extra_env: str
    ) -> tuple[subprocess.Popen[str], dict[str, Any]]:
        """Start a client process; return it and what its kernel saw."""
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                CLIENT,
                kernel,
                str(cwd or ""),
                then,
                json.dumps({"RemoteHWProvisioner": {"orphan_grace": GRACE}}),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **extra_env},
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the client printed nothing; its stderr:\n{err[-3000:]}")
        return proc, json.loads(line)


@pytest.fixture
def setup(ssh_host: SSHTestHost) -> Iterator[Setup]:
    """Config and kernelspecs (with an env of their own) below a fresh short directory."""
    root = Path(tempfile.mkdtemp(prefix="jrhw-env-", dir="/tmp"))
    config_dir, path_dir = root / "config", root / "path"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "MachineManager": {"ledger_path": str(root / "ledger.sqlite3")},
                "TransportManager": {
                    "ssh_config_files": [str(ssh_host.ssh_config)],
                    **TEST_TRANSPORT,
                    "forward_wait_timeout": 30.0,
                },
                "SSHProvider": {
                    "hosts": [
                        {
                            "host": ssh_host.alias,
                            "python": sys.executable,
                            "root": str(root / "r"),
                            "workdir": str(root / "work"),
                        }
                    ],
                    "include_ssh_config": False,
                },
                "LocalProvider": {"state_dir": str(root / "l")},
                "RemoteHWProvisioner": {"launch_timeout": 90.0},
            }
        )
    )
    (root / "work").mkdir()
    for target in (
        Target(
            name=SSH_TARGET,
            provider="ssh",
            where=ssh_host.alias,
            hardware="Test GPU",
            host=ssh_host.alias,
            python=sys.executable,
        ),
        Target(
            name="local",
            provider="local",
            where="this machine",
            hardware="CPU",
            python=sys.executable,
        ),
    ):
        spec = target_kernel_spec(target)
        spec["env"] = {"RHW_SPEC_VAR": "from-spec"}
        folder = path_dir / "kernels" / target.kernel_name
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps(spec))
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(root / "data"),
        "JUPYTER_PATH": str(path_dir),
        "LANG": "C.UTF-8",
        "LC_TIME": "C.UTF-8",
        "RHW_CLIENT_VAR": "the client's own",
        "AWS_SECRET_ACCESS_KEY": "not-for-hosts",
    }
    try:
        yield Setup(root, env)
    finally:
        kill_processes_mentioning(str(root))
        shutil.rmtree(root, ignore_errors=True)


def gone_within(pid: int, limit: float) -> float:
    """Seconds until ``pid`` has ended (fails after ``limit``)."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return time.monotonic() - began
        if state in ("Z", "X"):
            return time.monotonic() - began
        time.sleep(0.05)
    pytest.fail(f"kernel {pid} still runs after {limit} s")


def test_local_kernel_gets_the_clients_cwd_and_environment_not_the_first_agent_starters(
    setup: Setup,
    tmp_path: Path,
) -> None:
    # The local agent is first started by a process with a variable of its own.
    starter = (
        "import asyncio, sys; from pathlib import Path; "
        "from jupyter_remote_hw.agent_client import start_local_agent; "
        "asyncio.run(start_local_agent(Path(sys.argv[1])))"
    )
    first = subprocess.run(
        [sys.executable, "-c", starter, str(setup.root / "l")],
        check=False,
        env={**setup.env, "RHW_FIRST_STARTER": "leaked"},
        capture_output=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    proc, seen = setup.run("remote-hw-local", notebooks)
    proc.communicate(timeout=30)
    env = seen["env"]
    assert seen["cwd"] == str(notebooks)
    assert seen["notes"][-1] == f"working directory {notebooks} (the notebook's)"
    assert env["RHW_SPEC_VAR"] == "from-spec"
    assert env["RHW_CALL_VAR"] == "from-call"
    assert env["RHW_CLIENT_VAR"] == "the client's own"  # as with jupyter_client's kernels
    assert env["LANG"] == env["LC_TIME"] == "C.UTF-8"
    assert "RHW_FIRST_STARTER" not in env
    assert "JPY_PARENT_PID" not in env


def test_ssh_kernel_gets_the_notebooks_directory_and_the_launchs_environment(
    setup: Setup,
    tmp_path: Path,
) -> None:
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    proc, seen = setup.run("remote-hw-" + SSH_TARGET, notebooks)
    proc.communicate(timeout=30)
    env = seen["env"]
    assert seen["cwd"] == str(notebooks)
    assert seen["notes"][-1] == f"working directory {notebooks} (the notebook's)"
    assert env["RHW_SPEC_VAR"] == "from-spec"
    assert env["RHW_CALL_VAR"] == "from-call"
    assert env["LANG"] == env["LC_TIME"] == "C.UTF-8"
    for not_passed in (
        "RHW_CLIENT_VAR",
        "AWS_SECRET_ACCESS_KEY",
        "JUPYTER_CONFIG_DIR",
        "JUPYTER_PATH",
        "JPY_PARENT_PID",
    ):
        assert not_passed not in env
    assert env["HOME"] and env["PATH"]  # the host's login environment


def test_ssh_kernel_starts_in_the_hosts_working_directory_when_the_notebooks_is_missing(
    setup: Setup,
    ssh_host: SSHTestHost,
) -> None:
    missing = "/nonexistent/notebooks"
    proc, seen = setup.run("remote-hw-" + SSH_TARGET, missing)
    proc.communicate(timeout=30)
    work = setup.root / "work"
    assert seen["cwd"] == str(work)
    assert seen["notes"][-1] == (
        f"working directory {work} (the notebook's {missing} does not exist on {ssh_host.alias})"
    )


@pytest.mark.parametrize("kernel", ["remote-hw-local", "remote-hw-" + SSH_TARGET])
def test_kernel_of_a_killed_client_ends_after_the_orphan_grace(setup: Setup, kernel: str) -> None:
    proc, seen = setup.run(kernel, None, then="wait")
    time.sleep(GRACE + 1)
    assert gone_within_or_none(seen["pid"]) is None  # its client lives
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    waited = gone_within(seen["pid"], GRACE + 15)
    assert GRACE - 0.5 <= waited <= GRACE + 3, waited


def gone_within_or_none(pid: int) -> float | None:
    """0 when ``pid`` has ended, None while it runs."""
    return None if Path(f"/proc/{pid}").exists() else 0.0
