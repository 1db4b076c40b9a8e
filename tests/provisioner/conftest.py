"""A real jupyter_server (pytest-jupyter) configured with our provisioner and test hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from ..conftest import TEST_TRANSPORT
from ..kernelws import KernelChannels
from ..processes import processes_under
from ..serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
from ..testhosts import SSHTestHost, free_port

HARDWARE = "Test GPU 24GB"
#: How kernel pickers name it: memory in GiB.
SHOWN = "Test GPU 24 GiB"
SSH_TARGET = "ssh-testhost"
SSH_KERNEL = "remote-hw-" + SSH_TARGET
LOCAL_KERNEL = "remote-hw-local"

TRANSPORT = {**TEST_TRANSPORT, "forward_wait_timeout": 30.0}


def bare_python(directory: Path) -> str:
    """A Python without ipykernel: a fresh venv without pip."""
    venv = directory / "bare"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


def write_config(
    path: Path,
    ssh_config: Path,
    remote_root: Path,
    local_state: Path,
    hosts: list[dict[str, Any]],
    **extra: dict[str, Any],
) -> dict[str, Any]:
    """Build (and, when ``path`` is given, write as JSON) a server config for the tests."""
    config: dict[str, Any] = {
        "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
        "TransportManager": {"ssh_config_files": [str(ssh_config)], **TRANSPORT},
        "SSHProvider": {"hosts": hosts},
        "LocalProvider": {"state_dir": str(local_state)},
        "RemoteHWProvisioner": {"launch_timeout": 90.0, "poll_timeout": 3.0},
    }
    for section, values in extra.items():
        config.setdefault(section, {}).update(values)
    path.write_text(json.dumps(config))
    return config


@pytest.fixture
def remote_root(short_tmp: Path) -> Path:
    """The agent's directory on the test host (the host is this machine)."""
    return short_tmp / "r"


@pytest.fixture
def hosts(ssh_host: SSHTestHost, remote_root: Path) -> list[dict[str, Any]]:
    """The SSH hosts the server offers: the loopback test host, labelled."""
    return [
        {
            "host": ssh_host.alias,
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root),
        }
    ]


@pytest.fixture
def jp_server_config(
    ssh_host: SSHTestHost, short_tmp: Path, remote_root: Path, hosts: list[dict[str, Any]]
) -> dict[str, Any]:
    return write_config(
        short_tmp / "config.json", ssh_host.ssh_config, remote_root, short_tmp / "l", hosts
    )


Fetch = Callable[..., Awaitable[Any]]
StartKernel = Callable[[str], Awaitable[str]]
OpenChannels = Callable[[str], Awaitable[KernelChannels]]


@pytest.fixture
async def start_kernel(jp_fetch: Fetch, jp_serverapp: Any) -> AsyncIterator[StartKernel]:
    """POST /api/kernels; every kernel started is shut down through the API afterwards."""
    started: list[str] = []

    async def start(name: str) -> str:
        response = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": name}))
        kernel_id = str(json.loads(response.body)["id"])
        started.append(kernel_id)
        return kernel_id

    yield start
    for kernel_id in started:
        if kernel_id in jp_serverapp.kernel_manager:
            try:
                await jp_fetch("api", "kernels", kernel_id, method="DELETE")
            except HTTPClientError:
                pass


@pytest.fixture
async def channels(jp_ws_fetch: Fetch) -> AsyncIterator[OpenChannels]:
    """Open a kernel's websocket; all are closed afterwards."""
    opened: list[KernelChannels] = []

    async def open_channels(kernel_id: str) -> KernelChannels:
        ws = await jp_ws_fetch("api", "kernels", kernel_id, "channels")
        kc = KernelChannels(ws)
        opened.append(kc)
        await kc.wait_ready()
        return kc

    yield open_channels
    for kc in opened:
        await kc.close()


__all__ = ["free_port", "processes_under"]
