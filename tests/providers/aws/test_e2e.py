"""End to end: a kernelspec of an AWS machine launches an "instance" on moto's server, whose
SSH endpoint is redirected to the loopback sshd; a cell runs there; terminating it leaves
the ledger with its cost and the state terminated."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.providers.aws import LEDGER_TAG, AWSProvider

from ...cloudinit import InstanceHost, instance_host  # noqa: F401
from ...motoserver import aws_env, client, moto_endpoint  # noqa: F401
from ...provisioner.conftest import (  # noqa: F401 (fixtures)
    Fetch,
    OpenChannels,
    StartKernel,
    channels,
    start_kernel,
    write_config,
)
from ...serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
from ...testhosts import SSHTestHost

AMI_PARAMETER = "/test/jupyter-remote-hw/e2e-ami"
KERNEL = "remote-hw-aws-gpu"


@pytest.fixture
def lifetime(request: pytest.FixtureRequest, moto_endpoint: str) -> dict[str, Any]:
    """The lifetime settings of the AWS machines: idle stop after 3 s with a stop command
    that stops the "instance" in moto when a test asks for ``idle-stop``."""
    if getattr(request, "param", None) == "idle-stop":
        return {"idle_stop": 3, "stop_command": [sys.executable, "-c", STOP_SCRIPT, moto_endpoint]}
    return {"stop_command": ["true"]}


@pytest.fixture
def jp_server_config(
    ssh_host: SSHTestHost,
    short_tmp: Path,
    aws_env: str,
    lifetime: dict[str, Any],
    instance_host: InstanceHost,
) -> dict[str, Any]:
    ec2 = client(aws_env, "ec2")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client(aws_env, "ssm").put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    return write_config(
        short_tmp / "config.json",
        ssh_host.ssh_config,
        short_tmp / "r",
        short_tmp / "l",
        [],
        MachineManager={"ledger_path": str(short_tmp / "ledger.sqlite3")},
        AWSProvider={
            "endpoint_url": aws_env,
            "ami_ssm_parameter": AMI_PARAMETER,
            "ssh_cidr": "203.0.113.7/32",
            "public_key_file": f"{instance_host.host.user_key}.pub",
            "ssh_user": instance_host.host.user,
            "python": sys.executable,
            "remote_root": str(short_tmp / "r"),
            "state_dir": str(short_tmp / "aws"),
            "ssh_endpoint_redirect": instance_host.redirect,
            "machines": [{"name": "gpu", "hardware": "A10G"}],
            "poll_interval": 0.1,
            "heartbeat_interval": 0.5,
            "owner": "tester@e2e",
            **lifetime,
        },
    )


async def test_launch_run_a_cell_terminate(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
    aws_env: str,
    ssh_host: SSHTestHost,
    instance_host: InstanceHost,
) -> None:
    specs = json.loads((await jp_fetch("api", "kernelspecs")).body)["kernelspecs"]
    assert (
        specs[KERNEL]["spec"]["display_name"] == "Python 3 · A10G 22.4 GiB · g5.xlarge · us-east-1"
    )

    kernel_id = await start_kernel(KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute("import getpass; print('ran as', getpass.getuser()); 6 * 7")
    assert ran.status == "ok", ran
    assert ran.stdout.strip() == f"ran as {ssh_host.user}"

    manager = MachineManager.instance()
    aws = manager.providers["aws"]
    assert isinstance(aws, AWSProvider)
    record = aws.live_machine("aws-gpu")
    assert record is not None and record.state == "running"
    assert record.instance_type == "g5.xlarge" and record.price_per_hour == 1.006
    # The host key was made for the instance at launch and given to it at first boot.
    assert record.info["host_key_source"] == "injected at launch"
    assert record.info["host_key"] == instance_host.host.fingerprint()
    assert instance_host.booted == [record.resource_id]
    events = [e.event for e in manager.ledger.machine_events(record.machine_id)]
    assert events[:3] == ["requested", "pending", "running"]
    # The launch went through the cloud steps, each timed.
    steps = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.run.steps
    names = [r.name for r in steps.records]
    assert names[:6] == [
        "resolve hardware",
        "requested",
        "running",
        "SSH reachable",
        "host prepared",
        "start kernel",
    ]
    assert all(r.ok and r.seconds >= 0 for r in steps.records)
    # The instance carries our tags; the agent enforces the lifetime policy.
    reservations = client(aws_env, "ec2").describe_instances(InstanceIds=[record.resource_id])[
        "Reservations"
    ]
    tags = {t["Key"]: t["Value"] for t in reservations[0]["Instances"][0]["Tags"]}
    assert tags[LEDGER_TAG] == record.machine_id
    machine = manager.cached("aws-gpu")
    assert machine is not None
    lifetime = await (await machine.agent()).call("lifetime")
    assert lifetime["idle_stop"] == 1800 and lifetime["stop_command"] == ["true"]
    seen = manager.ledger.get_machine(record.machine_id)
    assert seen is not None and seen.last_seen is not None

    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    ended = await aws.terminate(record)
    assert ended.state == "terminated"
    assert ended.cost() > 0
    final = manager.ledger.get_machine(record.machine_id)
    assert final is not None and final.state == "terminated" and final.cost() == ended.cost()
    state = client(aws_env, "ec2").describe_instances(InstanceIds=[record.resource_id])[
        "Reservations"
    ][0]["Instances"][0]["State"]["Name"]
    assert state in ("shutting-down", "terminated")


#: What ``shutdown -h now`` does to an EC2 instance, done to moto's: our running
#: instances stop. (The agent runs it on the "instance", which is this machine.)
STOP_SCRIPT = """
import sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="testing", aws_secret_access_key="testing")
found = ec2.describe_instances(Filters=[
    {"Name": "tag:created-by", "Values": ["jupyter-remote-hw"]},
    {"Name": "instance-state-name", "Values": ["running"]}])
ids = [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]]
if ids:
    ec2.stop_instances(InstanceIds=ids)
"""


@pytest.mark.parametrize("lifetime", ["idle-stop"], indirect=True)
async def test_idle_machine_stops_itself_and_the_ledger_stops_billing(
    start_kernel: StartKernel,
    channels: OpenChannels,
    aws_env: str,
) -> None:
    kernel_id = await start_kernel(KERNEL)
    kc = await channels(kernel_id)
    began = time.monotonic()
    ran = await kc.execute("import time; time.sleep(5); 'done'")
    assert ran.status == "ok" and time.monotonic() - began >= 5
    aws = MachineManager.instance().providers["aws"]
    assert isinstance(aws, AWSProvider)
    record = aws.live_machine("aws-gpu")
    assert record is not None
    ec2 = client(aws_env, "ec2")

    def state() -> str:
        reservations = ec2.describe_instances(InstanceIds=[record.resource_id])["Reservations"]
        return str(reservations[0]["Instances"][0]["State"]["Name"])

    assert state() == "running"  # the 5 s cell was activity: no idle stop meanwhile
    deadline = time.monotonic() + 30
    while state() == "running" and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    assert state() in ("stopping", "stopped"), "the idle machine did not stop itself"
    [synced] = await aws.sync_all()
    assert synced.state in ("stopping", "stopped")
    frozen = synced.cost()
    assert frozen > 0 and synced.cost(now=time.time() + 3600) == frozen


async def test_a_hibernated_kernel_stops_its_instance_and_the_next_cell_starts_it(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    aws_env: str,
) -> None:
    kernel_id = await start_kernel(KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    manager = MachineManager.instance()
    aws = manager.providers["aws"]
    assert isinstance(aws, AWSProvider)
    record = aws.live_machine("aws-gpu")
    assert record is not None and record.state == "running"

    answer = await jp_fetch(
        "jupyter-remote-hw", "api", "hibernate", kernel_id, method="POST", body="{}"
    )
    assert json.loads(answer.body)["hibernated"] is True
    # Its last kernel hibernated: the instance is stopped, and the ledger stops billing.
    ec2 = client(aws_env, "ec2")

    def state() -> str:
        found = ec2.describe_instances(InstanceIds=[record.resource_id])
        return str(found["Reservations"][0]["Instances"][0]["State"]["Name"])

    assert state() in ("stopping", "stopped")
    stopped = manager.ledger.get_machine(record.machine_id)
    assert stopped is not None and stopped.state in ("stopping", "stopped")
    assert (
        "its last kernel hibernated" in manager.ledger.machine_events(record.machine_id)[-1].detail
    )
    cost = stopped.cost()
    await asyncio.sleep(0.5)
    assert manager.ledger.get_machine(record.machine_id).cost() == cost  # type: ignore[union-attr]
    # Its variables wait on the instance's own disk (the test host's, under its root),
    # kept while it is stopped; the server's store holds the manifest alone.
    far = Path(aws.remote_root) / "hibernated" / kernel_id
    assert sorted(p.name for p in far.iterdir()) == ["index.json", "var-0000.bin"]
    entry = manager.hibernation_store.entry(kernel_id)
    assert sorted(p.name for p in entry.path.iterdir()) == ["manifest.json"]
    assert entry.far is not None and entry.far["host"] == f"aws:{record.resource_id}"

    # The next cell starts the same instance and wakes the kernel with its variables.
    ran = await kc.execute("print(x + 1)", timeout=120)
    assert ran.status == "ok" and ran.stdout.strip() == "42", ran
    assert state() == "running"
    # Read there by the woken kernel, then removed by it.
    assert not far.exists() and manager.hibernation_store.entries() == []
    woken = aws.live_machine("aws-gpu")
    assert woken is not None and woken.machine_id == record.machine_id
    assert woken.state == "running"
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    await aws.terminate(woken)


async def test_an_instance_terminated_outside_leaves_a_dead_kernel_that_answers_every_cell(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, aws_env: str
) -> None:
    kernel_id = await start_kernel(KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    aws = MachineManager.instance().providers["aws"]
    assert isinstance(aws, AWSProvider)
    record = aws.live_machine("aws-gpu")
    assert record is not None
    # Someone terminates the instance in the console; the server's upkeep round sees it.
    client(aws_env, "ec2").terminate_instances(InstanceIds=[record.resource_id])
    [synced] = await aws.sync_all()
    assert synced.state == "terminated"

    began = time.monotonic()
    ran = await kc.execute("x + 1", timeout=30)
    assert ran.status == "error" and ran.ename == "KernelDead", ran
    assert time.monotonic() - began < 15
    model = json.loads((await jp_fetch("api", "kernels", kernel_id)).body)
    assert model["execution_state"] == "dead"
    assert "the EC2 instance of aws-gpu was terminated" in model["reason"], model
    # A restart would quietly take a new instance: it is refused, saying why.
    refused = await jp_fetch(
        "api", "kernels", kernel_id, "restart", method="POST", body="", raise_error=False
    )
    assert refused.code == 409
    assert "start a new kernel" in json.loads(refused.body)["message"]
    deleted = await jp_fetch("api", "kernels", kernel_id, method="DELETE", raise_error=False)
    assert deleted.code == 204
