"""Launch failures reach the REST API as clear errors and leave nothing running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.machines.manager import MachineManager

from ..testhosts import SSHTestHost, free_port
from .conftest import Fetch, bare_python, processes_under, write_config


@pytest.fixture
def jp_server_config(ssh_host: SSHTestHost, short_tmp: Path, remote_root: Path) -> dict[str, Any]:
    """The test host, a host nothing listens for, and the test host with a bare Python."""
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(
        ssh_host.ssh_config.read_text() + ssh_host.config_block("deadhost", Port=free_port())
    )
    hosts = [
        {"host": "deadhost", "hardware": "Gone GPU"},
        {
            "host": ssh_host.alias,
            "name": "bare",
            "python": bare_python(short_tmp),
            "root": str(remote_root),
        },
    ]
    return write_config(short_tmp / "config.json", ssh_config, remote_root, short_tmp / "l", hosts)


async def launch_error(jp_fetch: Fetch, name: str) -> tuple[int, str]:
    """POST /api/kernels, expecting an error; return its status and message."""
    with pytest.raises(HTTPClientError) as failure:
        await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": name}))
    response = failure.value.response
    assert response is not None
    return failure.value.code, str(json.loads(response.body)["message"])


async def test_unknown_hardware_is_404_naming_it(
    jp_fetch: Fetch, jp_serverapp: Any, jp_kernel_dir: Path
) -> None:
    # A kernelspec (like those in kernelspecs/) naming a target nobody configured.
    spec_dir = jp_kernel_dir / "remote-hw-gpu-a100"
    spec_dir.mkdir()
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 · A100 80GB · gpu-a100",
                "language": "python",
                "metadata": {
                    "kernel_provisioner": {
                        "provisioner_name": "remote-hw",
                        "config": {"target": "ssh-gpu-a100"},
                    }
                },
            }
        )
    )
    status, message = await launch_error(jp_fetch, "remote-hw-gpu-a100")
    assert status == 404
    assert "unknown hardware 'ssh-gpu-a100'" in message
    assert "local" in message and "ssh-deadhost" in message  # what is configured instead
    assert "resolve hardware" in message
    assert jp_serverapp.kernel_manager.list_kernel_ids() == []
    # A hardware kernel name that matches no target at all.
    status, message = await launch_error(jp_fetch, "remote-hw-no-such-target")
    assert status == 404
    assert "unknown hardware 'no-such-target'" in message and "ssh-deadhost" in message


async def test_unreachable_host_is_502_naming_host_and_step(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    status, message = await launch_error(jp_fetch, "remote-hw-ssh-deadhost")
    assert status == 502
    assert "deadhost" in message
    assert "step 'connect'" in message
    assert "Check that `ssh deadhost` works" in message  # the hint, with the host
    assert jp_serverapp.kernel_manager.list_kernel_ids() == []
    assert MachineManager.instance().ledger.kernels() == []


async def test_host_without_ipykernel_says_what_to_install_and_leaves_nothing(
    jp_fetch: Fetch, jp_serverapp: Any, remote_root: Path, short_tmp: Path
) -> None:
    status, message = await launch_error(jp_fetch, "remote-hw-ssh-bare")
    assert status == 500
    assert "step 'start kernel'" in message
    assert "ipykernel is not installed" in message
    assert f"{short_tmp}/bare/bin/python -m pip install ipykernel" in message
    for _ in range(50):
        if not processes_under(str(remote_root)):
            break
        await asyncio.sleep(0.1)
    assert processes_under(str(remote_root)) == []  # neither kernel nor agent
    assert jp_serverapp.kernel_manager.list_kernel_ids() == []
