"""What a Jupyter server answers when a SLURM launch cannot go ahead: a 4xx for a request
the cluster's settings make impossible, and the login node named when it cannot be
reached."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.machines import MachineManager
from jupyter_remote_hw.server.user_errors import install_filter

from ...testhosts import SSHTestHost, free_port
from .conftest import CLUSTER, cluster_entry, server_config


@pytest.fixture
def jp_server_config(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> dict[str, Any]:
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(
        login_host.ssh_config.read_text() + login_host.config_block("dead-login", Port=free_port())
    )
    login = login_host.alias
    return server_config(
        ssh_config,
        short_tmp,
        {
            CLUSTER: cluster_entry(login, short_tmp / "c", partitions=["gpu", "nope"]),
            "big": cluster_entry(login, short_tmp / "c", gpus=3),
            "long": cluster_entry(login, short_tmp / "c", time="30", partitions=["debug"]),
            "dead": cluster_entry("dead-login", short_tmp / "c"),
        },
    )


async def start(jp_fetch: Any, kernel_name: str) -> tuple[int, str]:
    answer = await jp_fetch(
        "api", "kernels", method="POST", body=json.dumps({"name": kernel_name}), raise_error=False
    )
    return answer.code, json.loads(answer.body or b"{}").get("message", "")


@pytest.mark.parametrize(
    ("kernel_name", "said"),
    [
        (
            "remote-hw-slurm-dev-nope-gpu",
            (
                "SLURM cluster dev: sbatch refused the job: partition 'nope' does not exist "
                "(there are: debug, gpu)"
            ),
        ),
        (
            "remote-hw-slurm-big-gpu-a100",
            "no node of partition 'gpu' can ever hold gpu:a100:3: ask for fewer GPUs",
        ),
        (
            "remote-hw-slurm-long-debug-t4",
            (
                "the time limit 30 is over partition 'debug''s maximum of 5:00: lower the "
                "cluster's 'time'"
            ),
        ),
    ],
)
async def test_a_request_the_cluster_cannot_run_is_a_422_logged_in_one_line(
    manager: MachineManager,
    jp_serverapp: Any,
    jp_fetch: Any,
    kernel_name: str,
    said: str,
) -> None:
    # The server's log as its handlers write it (with the filters the server puts there).
    logged = Records()
    jp_serverapp.log.addHandler(logged)
    install_filter(jp_serverapp.log)
    try:
        code, message = await start(jp_fetch, kernel_name)
    finally:
        jp_serverapp.log.removeHandler(logged)
    assert code == 422, message
    assert said in message and "\n" not in message
    lines = [r.getMessage() for r in logged.records]
    assert [line for line in lines if said in line], lines
    assert not [r for r in logged.records if r.exc_info or r.levelno >= logging.ERROR], lines


class Records(logging.Handler):
    """Keeps the records its filters let through."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_a_cluster_whose_login_node_was_never_reached_names_it(
    manager: MachineManager, jp_fetch: Any
) -> None:
    # The kernel name comes from a notebook saved when the cluster answered.
    code, message = await start(jp_fetch, "remote-hw-slurm-dead-gpu-a100")
    assert code == 502, message
    assert "SLURM cluster dead: the login node dead-login cannot be reached" in message
    assert "Check that `ssh dead-login` works from the Jupyter server's machine" in message
    assert "unknown hardware" not in message and "SSHProvider" not in message
    # A name no configured cluster could have is still unknown hardware.
    code, message = await start(jp_fetch, "remote-hw-slurm-elsewhere-gpu-a100")
    assert code == 404 and "unknown hardware 'slurm-elsewhere-gpu-a100'" in message


async def test_an_unreachable_cluster_leaves_the_others_usable_in_the_picker(
    manager: MachineManager, jp_fetch: Any
) -> None:
    listing = json.loads((await jp_fetch("jupyter-remote-hw", "api", "hardware")).body)
    options = [o for o in listing["hardware"] if o["provider"] == "slurm"]
    assert "slurm-dev-gpu-a100" in [o["name"] for o in options]
    assert all(o["usable"] for o in options), [o["why_not"] for o in options]


async def test_stopping_a_slurm_target_says_its_machine_ends_with_its_last_kernel(
    manager: MachineManager, jp_fetch: Any
) -> None:
    answer = await jp_fetch(
        "jupyter-remote-hw",
        "api",
        "machines",
        "slurm-dev-gpu-a100",
        "stop",
        method="POST",
        body="{}",
        raise_error=False,
    )
    message = json.loads(answer.body)["message"]
    assert answer.code == 409, message
    assert message.endswith(
        "cannot be stopped: its slurm machine ends when its last kernel does. Terminate it "
        "to shut its kernels down."
    )
    assert "hardware you already have" not in message
