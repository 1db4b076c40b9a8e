"""The ipywidgets hardware picker in a real notebook kernel: it lists the hardware, its
search filters the list, and the row chosen is where a plain ``%%remote`` cell runs."""

from __future__ import annotations

import ast
import getpass
import os
import re
import sys
from pathlib import Path

import pytest

from jupyter_remote_hw.catalog import SHIPPED_CATALOG, read_catalog

from ..conftest import TEST_TRANSPORT
from ..notebooks import kernel_env, run_notebook, text_of
from ..testhosts import SSHTestHost

TARGET = "ssh-testhost"


@pytest.fixture
def env(ssh_host: SSHTestHost, short_tmp: Path) -> dict[str, str]:
    """A local kernel whose Jupyter config offers the test host (a labelled GPU) and local."""
    config = {
        "TransportManager": {"ssh_config_files": [str(ssh_host.ssh_config)], **TEST_TRANSPORT},
        "SSHProvider": {
            "hosts": [
                {
                    "host": ssh_host.alias,
                    "python": sys.executable,
                    "hardware": "Test GPU 24GB",
                    "root": str(short_tmp / "r"),
                }
            ]
        },
        "LocalProvider": {"state_dir": str(short_tmp / "l")},
        "MachineManager": {"ledger_path": str(short_tmp / "ledger.sqlite3")},
        "RemoteHWProvisioner": {"launch_timeout": 90.0},
    }
    env = kernel_env(config, short_tmp)
    # No AWS credentials anywhere: the catalog's AWS rows fold into one line.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        env.pop(name, None)
    env.update(
        AWS_SHARED_CREDENTIALS_FILE=str(short_tmp / "none"),
        AWS_CONFIG_FILE=str(short_tmp / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def test_the_row_chosen_is_where_remote_cells_run(
    env: dict[str, str], short_tmp: Path, ssh_host: SSHTestHost
) -> None:
    cells = [
        "import jupyter_remote_hw, os\npick = jupyter_remote_hw.picker()\npick",
        "print(pick.value, pick.shown_names)",
        (
            "print([f.text for f in pick.folds], len(pick.grid.children))\n"
            "pick.toggle(pick.folds[0].key)\nprint(len(pick.shown_names), len(pick.grid.children))\n"
            "print(pick.grid.children[-1].value)\npick.toggle(pick.folds[0].key)"
        ),
        "pick.search.value = 'test gpu'\nprint(pick.shown_names)",
        f"pick.choose({TARGET!r})\nprint(pick.value)\nprint(pick.status.value)",
        "%%remote\nimport os, getpass\nprint(os.getpid(), getpass.getuser())",
        "print(os.getpid())",
    ]
    nb, _ = run_notebook(cells, env, short_tmp)
    shown = nb.cells[0].outputs[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in shown
    default, listed = text_of(nb.cells[1]).split(" ", 1)
    assert default == "None"  # nothing chosen yet
    assert ast.literal_eval(listed) == ["local", TARGET]  # the AWS rows are folded
    # One line for the AWS rows of the region (us-east-1, the default), in words with
    # what to do; a header of 8 columns, 2 rows (a button and one HTML widget of 7 cells
    # each) and the fold line share one grid; the fold expands.
    aws = len([e for e in read_catalog(SHIPPED_CATALOG) if e.region == "us-east-1"])
    folds, expanded, availability = text_of(nb.cells[2]).splitlines()
    assert folds == (
        f"['AWS: no credentials — set AWS_PROFILE or run `aws configure`'] {8 + 2 * 2 + 1}"
    )
    assert expanded == f"{2 + aws} {8 + 2 * 2 + 1 + aws * 2}"
    # A folded row's availability says why in a few words, what to do in its tooltip.
    assert availability.endswith(
        "<div class='jp-RemoteHW-cell jp-RemoteHW-unusable' title='no credentials — set "
        "AWS_PROFILE or run `aws configure`'>no credentials</div>"
    )
    assert availability.count("jp-RemoteHW-cell") == 7
    assert ast.literal_eval(text_of(nb.cells[3])) == [TARGET]  # only the test host matches
    chosen, status = text_of(nb.cells[4]).splitlines()
    assert chosen == TARGET and f"<b>{TARGET}</b>" in status
    # The cell's own output follows the launch steps.
    found = re.search(r"(\d+) (\S+)\n$", text_of(nb.cells[5]))
    assert found is not None
    remote_pid, user = found.groups()
    assert user == ssh_host.user == getpass.getuser()
    assert remote_pid != text_of(nb.cells[6]).strip() and int(remote_pid) != os.getpid()


def test_an_unusable_row_says_why_in_a_few_words_and_its_price() -> None:
    from jupyter_remote_hw.machines.hardware import HardwareOption
    from jupyter_remote_hw.notebook.widgets import columns

    p5e = HardwareOption(
        name="p5e.48xlarge",
        kernel_name="remote-hw-p5e.48xlarge",
        provider="aws",
        label="8 × H200 141 GiB · p5e.48xlarge",
        hardware="8 × H200 141 GiB",
        where="p5e.48xlarge · us-east-1",
        gpu="H200",
        gpu_count=8,
        gpu_memory_gib=141.0,
        vcpus=192,
        memory_gib=2048.0,
        price_per_hour=None,
        usable=False,
        why_not="no credentials — set AWS_PROFILE or run `aws configure`",
        reason="no credentials",
        hint="set AWS_PROFILE or run `aws configure`",
    )
    assert columns(p5e) == [
        "8 × H200 141 GiB · p5e.48xlarge",
        "8 × H200",
        "141 GiB",
        "192",
        "2048 GiB",
        "price unknown",
        "p5e.48xlarge · us-east-1",
        "no credentials",
    ]
