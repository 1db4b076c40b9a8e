"""Hardware kernelspecs installed the way a user of plain jupyter_client installs them.

Clients outside a Jupyter server (``jupyter run``, nbclient, papermill,
``KernelManager``) find the kernelspecs in a ``JUPYTER_PATH`` directory and
the hosts in ``jupyter_server_config.json`` of ``JUPYTER_CONFIG_DIR``, which
the provisioner reads when it creates the machine manager.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.providers import Target
from jupyter_remote_hw.provisioner.kernelspecs import target_kernel_spec

from ..conftest import TEST_TRANSPORT
from ..processes import kill_processes_mentioning, processes_under
from ..testhosts import SSHTestHost

SSH_TARGET = "ssh-testhost"
SSH_KERNEL = "remote-hw-" + SSH_TARGET
LOCAL_KERNEL = "remote-hw-local"

#: What a kernel process's command line holds (the agent runs ipykernel so).
KERNEL_MARK = "ipykernel_launcher"


@dataclass
class ClientEnv:
    """Where the kernelspecs and config of one test live, and the environment that finds them."""

    root: Path
    remote_root: Path
    local_state: Path
    env: dict[str, str]

    def kernels(self) -> list[str]:
        """Kernel processes that the test's agents run (on the SSH host or here)."""
        return [line for line in processes_under(str(self.root)) if KERNEL_MARK in line]

    def agents(self) -> list[str]:
        """Agents of the test still running."""
        return [line for line in processes_under(str(self.root)) if KERNEL_MARK not in line]

    def wait_for_no_processes(self, timeout: float = 10.0) -> list[str]:
        """Wait until no agent or kernel of the test runs; what is left after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := processes_under(str(self.root))) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left


def write_client_env(root: Path, ssh_host: SSHTestHost) -> ClientEnv:
    """Write the config and the local and SSH kernelspecs below ``root``."""
    remote_root, local_state = root / "r", root / "l"
    config_dir, data_dir, path_dir = root / "config", root / "data", root / "path"
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
                        {"host": ssh_host.alias, "python": sys.executable, "root": str(remote_root)}
                    ],
                    "include_ssh_config": False,
                },
                "LocalProvider": {"state_dir": str(local_state)},
                "RemoteHWProvisioner": {"launch_timeout": 90.0, "poll_timeout": 3.0},
            }
        )
    )
    targets = [
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
    ]
    for target in targets:
        folder = path_dir / "kernels" / target.kernel_name
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(json.dumps(target_kernel_spec(target)))
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(data_dir),
        "JUPYTER_PATH": str(path_dir),
        "PYTHONUNBUFFERED": "1",
    }
    return ClientEnv(root, remote_root, local_state, env)


@contextlib.contextmanager
def client_env(ssh_host: SSHTestHost) -> Iterator[ClientEnv]:
    """A :class:`ClientEnv` in a fresh short directory, also set in this process's environment.

    This process's machine manager is made afresh from it by the first
    provisioner, and stopped afterwards as at process exit; every agent and
    kernel left is killed.
    """
    root = Path(tempfile.mkdtemp(prefix="jrhw-", dir="/tmp"))
    try:
        setup = write_client_env(root, ssh_host)
        MachineManager.clear_instance()
        with pytest.MonkeyPatch.context() as patch:
            for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_PATH"):
                patch.setenv(name, setup.env[name])
            try:
                yield setup
            finally:
                if MachineManager.initialized():
                    MachineManager.instance().stop_own_loop()
                MachineManager.clear_instance()
    finally:
        kill_processes_mentioning(str(root))
        shutil.rmtree(root, ignore_errors=True)
