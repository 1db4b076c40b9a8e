"""What a user may call hardware in %%remote: a target's name, its SSH host, a running machine."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from traitlets.config import Config

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.notebook.remote_sessions import find_target
from jupyter_remote_hw.providers import UnknownHardwareError


@pytest.fixture
async def machines(tmp_path: Path) -> AsyncIterator[MachineManager]:
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host gpu-box\nHost twin-a\nHost twin-b\n")
    manager = MachineManager(
        config=Config(
            {
                "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
                "TransportManager": {"ssh_config_files": [str(ssh_config)]},
                "SSHProvider": {"hosts": [{"host": "gpu-box", "hardware": "A10G 24GB"}]},
            }
        )
    )
    yield manager
    await manager.close()


async def test_a_target_by_its_name_or_its_ssh_host(machines: MachineManager) -> None:
    assert find_target(machines, "ssh-gpu-box").name == "ssh-gpu-box"
    assert find_target(machines, "gpu-box").name == "ssh-gpu-box"
    assert find_target(machines, "local").name == "local"
    with pytest.raises(UnknownHardwareError, match="gpu-bx"):
        find_target(machines, "gpu-bx")


async def test_a_running_machine_by_its_instance_or_ledger_id(machines: MachineManager) -> None:
    machines.ledger.add_machine(
        "m-123",
        "aws-a10g",
        "aws",
        owner="me@laptop",
        instance_type="g5.xlarge",
        region="us-east-1",
        price_per_hour=1.006,
        state="running",
    )
    machines.ledger.update_machine("m-123", resource_id="i-0abc1234")
    assert find_target(machines, "i-0abc1234").name == "aws-a10g"
    assert find_target(machines, "m-123").name == "aws-a10g"
    with pytest.raises(UnknownHardwareError):
        find_target(machines, "i-0ffff")
