"""A switch to hardware that cannot be reached: a clear error naming the step, and the
notebook keeps its kernel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..provisioner.conftest import LOCAL_KERNEL, write_config
from ..testhosts import SSHTestHost, free_port
from .apiclient import Fetch, failure


@pytest.fixture
def jp_server_config(ssh_host: SSHTestHost, short_tmp: Path, remote_root: Path) -> dict[str, Any]:
    """Local; "deadhost": the test host's address on a port nothing listens on; and a cloud
    machine offered but never launched (no AWS call is made here)."""
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(
        ssh_host.ssh_config.read_text() + ssh_host.config_block("deadhost", Port=free_port())
    )
    return write_config(
        short_tmp / "config.json",
        ssh_config,
        remote_root,
        short_tmp / "l",
        [{"host": "deadhost", "hardware": "Gone GPU 80GB"}],
        AWSProvider={"machines": [{"name": "g5", "hardware": "g5.xlarge"}]},
    )


async def test_a_switch_that_cannot_launch_keeps_the_session_as_it_was(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    response = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps(
            {
                "path": "work.ipynb",
                "name": "work.ipynb",
                "type": "notebook",
                "kernel": {"name": LOCAL_KERNEL},
            }
        ),
    )
    session = json.loads(response.body)
    old_id = session["kernel"]["id"]
    code, error = await failure(
        jp_fetch, "switch", session["id"], body={"hardware": "ssh-deadhost", "carry": "all"}
    )
    assert code == 502
    assert error["step"] == "connect"
    assert "Check that `ssh deadhost` works" in error["hint"]  # the command to paste
    assert "deadhost" in error["message"]
    model = json.loads((await jp_fetch("api", "sessions", session["id"])).body)
    assert model["kernel"]["id"] == old_id
    assert jp_serverapp.kernel_manager.list_kernel_ids() == [old_id]
    await jp_fetch("api", "kernels", old_id, method="DELETE")


async def test_stopping_a_cloud_target_with_no_machine_says_there_is_nothing_to_stop(
    jp_fetch: Fetch,
) -> None:
    code, error = await failure(jp_fetch, "machines", "aws-g5", "stop", method="POST")
    assert code == 409
    assert error["message"].endswith(
        "has no machine running, so there is nothing to stop: one is launched when a kernel "
        "first needs it."
    )
    assert "hardware you already have" not in error["message"]
