"""``jupyter remote-hw``: the catalog, launch, list, stop, start, terminate and reap,
against moto's server (and the loopback sshd where a host is reached)."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.cli.commands import main
from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.aws import CREATED_BY_TAG, LEDGER_TAG, OWNER_TAG

from ..cloudinit import InstanceHost, instance_host  # noqa: F401
from ..motoserver import aws_env, client, moto_endpoint  # noqa: F401
from ..testhosts import SSHTestHost

AMI_PARAMETER = "/test/jupyter-remote-hw/cli-ami"
OWNER = "tester@cli"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary home and Jupyter paths, so the user's own config and ledger are untouched."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jcfg"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jdata"))
    return home


@pytest.fixture
def config(
    aws_env: str,
    ssh_host: SSHTestHost,
    short_tmp: Path,
    tmp_path: Path,
    instance_host: InstanceHost,
) -> dict[str, Any]:
    ec2 = client(aws_env, "ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client(aws_env, "ssm").put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    return {
        "MachineManager": {"ledger_path": str(tmp_path / "ledger.sqlite3")},
        "TransportManager": {
            "ssh_config_files": [str(ssh_host.ssh_config)],
            "connect_timeout": 5.0,
        },
        "LocalProvider": {"state_dir": str(short_tmp / "l")},
        "SSHProvider": {
            "hosts": [
                {"host": ssh_host.alias, "python": sys.executable, "root": str(short_tmp / "s")}
            ],
            "include_ssh_config": False,
        },
        "AWSProvider": {
            "endpoint_url": aws_env,
            "ami_ssm_parameter": AMI_PARAMETER,
            "ssh_cidr": "203.0.113.7/32",
            "public_key_file": f"{instance_host.host.user_key}.pub",
            "ssh_user": instance_host.host.user,
            "python": sys.executable,
            "remote_root": str(short_tmp / "r"),
            "state_dir": str(short_tmp / "aws"),
            "ssh_endpoint_redirect": instance_host.redirect,
            "poll_interval": 0.05,
            "owner": OWNER,
            "stop_command": ["true"],
            "idle_stop": 600,
            "deadman": 1200,
        },
    }


def cli(config: dict[str, Any], tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    path = tmp_path / "jupyter_server_config.json"
    path.write_text(json.dumps(config))
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(path), *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_catalog_query_table(config: dict[str, Any], tmp_path: Path) -> None:
    code, out, _ = cli(config, tmp_path, "catalog", "a100:8", "--region", "us-east-1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "PROVIDER", "REGION/WHERE", "HARDWARE"]
    assert [line.split()[0] for line in lines[2:4]] == ["p4d.24xlarge", "p4de.24xlarge"]
    assert "$32.77" in lines[2] and "2024-08-01" in lines[2]
    assert re.search(r"\n2 of \d+ catalog rows", out)


def test_catalog_lists_local_and_ssh_hosts_with_their_agents_report(
    config: dict[str, Any], tmp_path: Path
) -> None:
    code, out, err = cli(config, tmp_path, "catalog", "--probe", "--region", "us-west-2")
    assert code == 0, out
    # Each host is named before it is asked, and its launch steps show as they happen.
    assert "Asking ssh-testhost for its hardware…" in err
    assert re.search(r"^\[ *\d+\.\d s\] ✓ connect \(\d+\.\d s\)$", err, re.MULTILINE), err
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line.strip()}
    assert "local" in rows and "ssh-testhost" in rows and "g5.xlarge" in rows
    import os

    # The SSH host's agent reported this machine's CPUs (the host is this machine).
    assert f" {os.cpu_count()} " in rows["ssh-testhost"]
    assert "us-east-1" not in out


def test_unknown_hardware_suggests(config: dict[str, Any], tmp_path: Path) -> None:
    code, out, err = cli(config, tmp_path, "catalog", "a10")
    assert code == 1 and out == ""
    assert "unknown hardware 'a10'" in err and "did you mean 'A10G'" in err


def test_launch_list_stop_start_terminate(
    config: dict[str, Any], tmp_path: Path, aws_env: str
) -> None:
    code, out, err = cli(config, tmp_path, "launch", "A10G", "--name", "box", "--spot")
    assert code == 0, err
    for step in ("requested", "running", "SSH reachable", "host prepared"):
        assert re.search(rf"^\[ *\d+\.\d s\] ✓ {step} \(\d+\.\d s\)$", err, re.MULTILINE), err
    assert "box" in out and "g5.xlarge" in out and "spot" in out
    assert "stops itself after 10 min idle or 20 min without a client" in out
    time.sleep(0.3)
    code, out, _ = cli(config, tmp_path, "list")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("box "))
    assert "running" in row and "$1.01" in row
    assert "ready" not in out  # hardware without kernels is not a machine (`catalog` lists it)
    assert "running now: $1.01/h" in out
    code, out, err = cli(config, tmp_path, "stop", "box")
    assert code == 0 and ("stopping" in out or "stopped" in out)
    assert err.startswith("Stopping box (i-")  # said before waiting on EC2
    code, out, _ = cli(config, tmp_path, "start", "box")
    assert code == 0 and "running at $1.01/h" in out
    # The instance stops itself (its agent's idle stop): `list` asks EC2 and shows it.
    ledger = Ledger(Path(config["MachineManager"]["ledger_path"]))
    instance_id = ledger.machines()[0].resource_id
    ledger.close()
    client(aws_env, "ec2").stop_instances(InstanceIds=[instance_id])
    code, out, _ = cli(config, tmp_path, "list")
    row = next(line for line in out.splitlines() if line.startswith("box "))
    assert "stopp" in row and "running now: $0/h" in out
    code, out, err = cli(config, tmp_path, "terminate", "box", "--yes")
    assert code == 0 and "terminated; it cost $0.0" in out
    assert err.startswith(f"Terminating box ({instance_id})…")
    ledger = Ledger(Path(config["MachineManager"]["ledger_path"]))
    [record] = ledger.machines()
    ledger.close()
    assert record.state == "terminated" and record.cost() > 0
    code, out, _ = cli(config, tmp_path, "list", "--all")
    assert "terminated" in out
    code, _, err = cli(config, tmp_path, "stop", "box")
    assert code == 1 and "already terminated" in err
    code, _, err = cli(config, tmp_path, "stop", "nothing")
    assert code == 1 and "no machine 'nothing'" in err


def test_launch_over_budget_is_refused(
    config: dict[str, Any], tmp_path: Path, aws_env: str
) -> None:
    config["BudgetGuard"] = {"max_per_machine": 10.0}
    code, out, err = cli(config, tmp_path, "launch", "H100:8", "--no-prepare")
    assert code == 1 and out == ""
    assert "p5.48xlarge (on-demand) in us-east-1 costs $98.32/h" in err
    assert "above the limit of $10/h per machine" in err
    reservations = client(aws_env, "ec2").describe_instances()["Reservations"]
    assert reservations == []


def test_reap_lists_with_cost_and_asks(
    config: dict[str, Any], tmp_path: Path, aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = cli(config, tmp_path, "launch", "t3.medium", "--name", "quiet", "--no-prepare")
    assert code == 0, err
    ledger = Ledger(Path(config["MachineManager"]["ledger_path"]))
    [quiet] = ledger.machines()
    ledger.touch_machine(quiet.machine_id, at=time.time() - 3 * 3600)
    ledger.close()
    ec2 = client(aws_env, "ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ours = ec2.run_instances(
        ImageId=image,
        InstanceType="g5.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
                    {"Key": OWNER_TAG, "Value": OWNER},
                    {"Key": LEDGER_TAG, "Value": "m-from-a-lost-laptop"},
                ],
            }
        ],
    )
    orphan = ours["Instances"][0]["InstanceId"]
    other = ec2.run_instances(ImageId=image, InstanceType="t3.medium", MinCount=1, MaxCount=1)[
        "Instances"
    ][0]["InstanceId"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = cli(config, tmp_path, "reap")
    assert code == 1 and "Pass --yes" in err
    assert quiet.resource_id in out and "no client for 180 min" in out
    assert orphan in out and "not launched from this ledger" in out and "g5.xlarge" in out
    assert f"left running: {orphan}: tagged as yours, but not launched" in out
    code, out, err = cli(config, tmp_path, "reap", "--yes")
    assert code == 0 and f"terminated 1: {quiet.resource_id}" in out
    looking = "Looking for instances tagged as yours in the configured regions…"
    assert err.splitlines() == [looking, "Terminating 1 instance(s)…"]
    states = {
        i["InstanceId"]: i["State"]["Name"]
        for r in ec2.describe_instances()["Reservations"]
        for i in r["Instances"]
    }
    assert states[other] == states[orphan] == "running"
    assert states[quiet.resource_id] in ("shutting-down", "terminated")
    code, out, _ = cli(config, tmp_path, "reap", "--yes")
    assert code == 0 and f"left running: {orphan}" in out and "terminated 1" not in out


def test_catalog_refresh_writes_the_user_catalog(config: dict[str, Any], tmp_path: Path) -> None:
    code, out, err = cli(config, tmp_path, "catalog", "refresh", "--region", "eu-west-1")
    assert code == 0, err
    written = tmp_path / "jdata" / "jupyter_remote_hw" / "catalog" / "aws.csv"
    assert str(written) in out
    assert "Pricing API did not answer" in err  # moto has no Pricing API
    code, out, _ = cli(config, tmp_path, "catalog", "a10g:1", "--region", "eu-west-1")
    assert code == 0 and "g5.xlarge" in out and str(written) in out


def test_runs_as_a_program(tmp_path: Path) -> None:
    """`python -m jupyter_remote_hw.cli` (what the `jupyter-remote-hw` script runs)."""
    import os
    import subprocess

    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "c"),
        "JUPYTER_DATA_DIR": str(tmp_path / "d"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_remote_hw.cli",
            "catalog",
            "H100:8",
            "--region",
            "us-west-2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "p5.48xlarge" in done.stdout and "$98.32" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "jupyter_remote_hw.cli", "launch"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "the following arguments are required: hardware" in bad.stderr
