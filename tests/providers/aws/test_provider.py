"""The aws provider against moto's server: what RunInstances gets, budget, errors, reap."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.aws import (
    CREATED_BY_TAG,
    LEDGER_TAG,
    OWNER_TAG,
    AWSProvider,
)
from jupyter_remote_hw.providers.aws.host_keys import fingerprint, host_keys_from_console
from jupyter_remote_hw.providers.aws.key_pair import ec2_fingerprints
from jupyter_remote_hw.providers.launch_steps import LaunchError

from ...cloudinit import InstanceHost, instance_host  # noqa: F401
from ...motoserver import aws_env, client, moto_endpoint  # noqa: F401
from ...testhosts import keygen, loopback_host

AMI_PARAMETER = "/test/jupyter-remote-hw/ami-id"
OWNER = "tester@test-host"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path / "ledger.sqlite3")
    yield opened
    opened.close()


@pytest.fixture
def ami(aws_env: str) -> str:
    """A moto AMI, published under the SSM parameter the provider is told to read."""
    image = client(aws_env, "ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client(aws_env, "ssm").put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    return str(image)


@pytest.fixture
def provider(aws_env: str, ami: str, ledger: Ledger, tmp_path: Path) -> Iterator[AWSProvider]:
    key = keygen(tmp_path / "id_ed25519")
    made = AWSProvider(
        endpoint_url=aws_env,
        ami_ssm_parameter=AMI_PARAMETER,
        ssh_cidr="203.0.113.7/32",
        public_key_file=f"{key}.pub",
        owner=OWNER,
        poll_interval=0.05,
        state_dir=str(tmp_path / "aws"),
        ledger=ledger,
    )
    yield made
    made.close()


def record_calls(provider: AWSProvider, operation: str, region: str = "us-east-1") -> list[dict]:
    """The parameters of every ``operation`` call the provider's client makes."""
    calls: list[dict] = []

    def keep(params: dict[str, Any], **_kwargs: Any) -> None:
        calls.append(dict(params))

    provider.client("ec2", region).meta.events.register(
        f"provide-client-params.ec2.{operation}", keep
    )
    return calls


def instances(endpoint: str, region: str = "us-east-1") -> dict[str, dict]:
    reply = client(endpoint, "ec2", region).describe_instances()
    return {i["InstanceId"]: i for r in reply["Reservations"] for i in r["Instances"]}


def tags_of(instance: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


async def test_run_instances_gets_ami_type_market_tags_key_and_group(
    provider: AWSProvider, aws_env: str, ami: str, ledger: Ledger
) -> None:
    calls = record_calls(provider, "RunInstances")
    record = await provider.launch("A10G", spot=True, connect=False)
    assert record.state == "running" and record.instance_type == "g5.xlarge"
    assert record.market == "spot" and record.price_per_hour == 1.006
    [params] = calls
    assert params["ImageId"] == ami
    assert params["InstanceType"] == "g5.xlarge"
    assert params["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {"SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"},
    }
    assert params["InstanceInitiatedShutdownBehavior"] == "stop"
    # IMDSv2 only; the root volume (the AMI's root device) encrypted, gone with the instance.
    assert params["MetadataOptions"] == {"HttpTokens": "required", "HttpEndpoint": "enabled"}
    [root] = params["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/sda1" and root["Ebs"]["Encrypted"] is True
    assert root["Ebs"]["DeleteOnTermination"] is True
    # The boot config stops share keys from making UNIX-socket listeners (docs/sharing.md).
    assert "AllowStreamLocalForwarding local" in params["UserData"]
    # What EC2 (moto) made of it.
    instance = instances(aws_env)[record.resource_id]
    assert instance["ImageId"] == ami and instance["InstanceType"] == "g5.xlarge"
    assert instance.get("InstanceLifecycle") == "spot"
    tags = tags_of(instance)
    assert tags[CREATED_BY_TAG] == "jupyter-remote-hw" and tags[OWNER_TAG] == OWNER
    assert tags[LEDGER_TAG] == record.machine_id
    assert instance["KeyName"].startswith("jupyter-remote-hw-tester-test-host-")
    ec2 = client(aws_env, "ec2")
    assert ec2.describe_key_pairs(KeyNames=[instance["KeyName"]])["KeyPairs"]
    [group] = instance["SecurityGroups"]
    rules = ec2.describe_security_groups(GroupIds=[group["GroupId"]])["SecurityGroups"][0]
    ssh_rules = [p for p in rules["IpPermissions"] if p.get("FromPort") == 22]
    assert [r["CidrIp"] for r in ssh_rules[0]["IpRanges"]] == ["203.0.113.7/32"]
    assert instance["MetadataOptions"]["HttpTokens"] == "required"
    assert instance["MetadataOptions"]["HttpEndpoint"] == "enabled"
    [volume] = ec2.describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [record.resource_id]}]
    )["Volumes"]
    assert volume["Encrypted"] is True
    user_data = ec2.describe_instance_attribute(
        InstanceId=record.resource_id, Attribute="userData"
    )["UserData"]["Value"]
    config = yaml.safe_load(base64.b64decode(user_data).decode())
    assert config["write_files"][0]["content"] == "AllowStreamLocalForwarding local\n"
    # The instance's host key was made here: its public half is recorded, the private half
    # went only to the instance (cloud-init ssh_keys), never to a file here.
    keys = config["ssh_keys"]
    assert keys["ed25519_public"] == record.info["host_key_public"]
    assert record.info["host_key_source"] == "injected at launch"
    assert record.info["host_key"].startswith("SHA256:")
    assert config["ssh_deletekeys"] is True and config["ssh_genkeytypes"] == []
    secret = keys["ed25519_private"].split("\n")[1]
    assert "PRIVATE KEY" in keys["ed25519_private"]
    for path in Path(provider.state_dir).rglob("*"):
        assert not path.is_file() or secret not in path.read_text()
    for path in Path(ledger.path).parent.glob(Path(ledger.path).name + "*"):
        assert secret.encode() not in path.read_bytes()
    behaviour = ec2.describe_instance_attribute(
        InstanceId=record.resource_id, Attribute="instanceInitiatedShutdownBehavior"
    )
    assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "stop"
    events = [e.event for e in ledger.machine_events(record.machine_id)]
    assert events == ["requested", "pending", "running"]


async def test_on_demand_terminate_behaviour_and_group_reused(
    provider: AWSProvider, aws_env: str
) -> None:
    provider.shutdown_behavior = "terminate"
    calls = record_calls(provider, "RunInstances")
    first = await provider.launch("t3.medium", name="aws-small", connect=False)
    second = await provider.launch("gpu_mem>=40 cheapest", connect=False)
    assert second.instance_type == "g6e.xlarge" and second.name == "aws-g6e-xlarge"
    assert "InstanceMarketOptions" not in calls[0]
    assert calls[0]["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert calls[0]["SecurityGroupIds"] == calls[1]["SecurityGroupIds"]
    assert calls[0]["KeyName"] == calls[1]["KeyName"]
    found = instances(aws_env)
    assert found[first.resource_id].get("InstanceLifecycle") is None
    with pytest.raises(LaunchError, match="already exists"):
        await provider.launch("t3.medium", name="aws-small", connect=False)


async def test_no_ssh_access_configured_launches_nothing(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.ssh_cidr = ""
    with pytest.raises(LaunchError, match=r"step 'requested'.*c\.AWSProvider\.ssh_cidr"):
        await provider.launch("A10G", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []


async def test_missing_ami_parameter_is_named(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.ami_ssm_parameter = "/test/nothing/here"
    with pytest.raises(LaunchError, match="AMI parameter /test/nothing/here does not exist"):
        await provider.launch("A10G", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []


async def test_missing_credentials_are_named(
    provider: AWSProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    provider._clients.clear()
    with pytest.raises(LaunchError, match="credentials.*aws configure"):
        await provider.launch("A10G", connect=False)


async def test_budget_refuses_with_figures(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.budget.max_per_machine = 5.0
    with pytest.raises(LaunchError, match=r"p4d.24xlarge.*\$32.77/h, above the limit of \$5/h"):
        await provider.launch("A100:8", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []
    provider.budget.max_total = 2.0
    await provider.launch("A10G", connect=False)  # $1.006/h
    await provider.launch("L4", connect=False)  # $0.8048/h more makes $1.81/h: allowed
    with pytest.raises(
        LaunchError,
        match=r"g4dn.xlarge \(on-demand\) in us-east-1 at \$0.526/h "
        r"plus the \$1.811/h .* makes \$2.337/h, above the total limit of \$2/h",
    ):
        await provider.launch("T4", connect=False)
    assert len(instances(aws_env)) == 2 and len(ledger.machines()) == 2


class _Body:
    """A raw HTTP body as botocore reads it."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **_kwargs: Any) -> Iterator[bytes]:
        yield self.data


def ec2_error(code: str, message: str) -> Any:
    """A before-send hook answering as EC2 does with ``code`` (moto cannot run out of
    capacity nor reach a quota)."""
    from botocore.awsrequest import AWSResponse

    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
        "<RequestID>jrhw-test</RequestID></Response>"
    ).encode()

    def answer(request: Any, **_kwargs: Any) -> Any:
        return AWSResponse(request.url, 400, {}, _Body(body))

    return answer


no_capacity = ec2_error(
    "InsufficientInstanceCapacity",
    "We currently do not have sufficient "
    "g5.xlarge capacity in the Availability Zone you requested.",
)


async def test_capacity_error_suggests_region_type_and_market(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.client("ec2").meta.events.register("before-send.ec2.RunInstances", no_capacity)
    with pytest.raises(LaunchError) as caught:
        await provider.launch("A10G", connect=False)
    message = str(caught.value)
    assert "step 'requested'" in message
    assert "AWS has no g5.xlarge capacity in us-east-1 right now" in message
    assert "InsufficientInstanceCapacity" in message
    assert "us-west-2" in message and "g5.2xlarge" in message
    assert "spot instead of on-demand" in message
    [record] = ledger.machines()
    assert record.state == "failed" and record.resource_id == ""
    assert instances(aws_env) == {}


async def test_quota_error_names_the_quota(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.client("ec2").meta.events.register(
        "before-send.ec2.RunInstances",
        ec2_error("VcpuLimitExceeded", "You have requested more vCPU capacity than allowed."),
    )
    with pytest.raises(LaunchError) as caught:
        await provider.launch("a100:8", spot=True, connect=False)
    message = str(caught.value)
    assert "vCPU quota for p4d.24xlarge's family in us-east-1 is reached" in message
    assert "Service Quotas" in message and "on-demand instead of spot" in message
    assert [m.state for m in ledger.machines()] == ["failed"] and instances(aws_env) == {}


async def test_stop_start_terminate_accrue_cost(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    record = await provider.launch("A10G", connect=False)
    await asyncio.sleep(0.2)
    stopped = await provider.sync(await provider.stop(record))
    assert stopped.state in ("stopping", "stopped")
    assert instances(aws_env)[record.resource_id]["State"]["Name"] in ("stopping", "stopped")
    cost_when_stopped = stopped.cost()
    assert cost_when_stopped > 0
    await asyncio.sleep(0.1)
    assert ledger.get_machine(record.machine_id).cost() == cost_when_stopped  # type: ignore
    started = await provider.start(stopped)
    assert started.state == "running"
    ended = await provider.terminate(started)
    assert ended.state == "terminated" and ended.cost() > cost_when_stopped
    assert instances(aws_env)[record.resource_id]["State"]["Name"] in (
        "shutting-down",
        "terminated",
    )
    events = [e.event for e in ledger.machine_events(record.machine_id)]
    assert events[-1] == "terminated" and "pending" in events[3:]


async def test_reap_ends_exactly_our_unclaimed_instances(
    provider: AWSProvider, aws_env: str, ami: str, ledger: Ledger
) -> None:
    quiet = await provider.launch("t3.medium", name="aws-quiet", connect=False)
    live = await provider.launch("t3.medium", name="aws-live", connect=False)
    now = time.time()
    ledger.touch_machine(quiet.machine_id, at=now - 3 * 3600)  # no client for 3 h
    ledger.touch_machine(live.machine_id, at=now - 60)
    ec2 = client(aws_env, "ec2")

    def run(tags: list[dict[str, str]]) -> str:
        spec = [{"ResourceType": "instance", "Tags": tags}] if tags else []
        reply = ec2.run_instances(
            ImageId=ami, InstanceType="t3.medium", MinCount=1, MaxCount=1, TagSpecifications=spec
        )
        return str(reply["Instances"][0]["InstanceId"])

    ours = [
        {"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
        {"Key": OWNER_TAG, "Value": OWNER},
    ]
    untagged = run([])
    orphan = run([*ours, {"Key": LEDGER_TAG, "Value": "m-gone"}])
    # Tagged with a real machine of this ledger, but not the instance it launched.
    lookalike = run([*ours, {"Key": LEDGER_TAG, "Value": quiet.machine_id}])
    someone_else = run(
        [
            {"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
            {"Key": OWNER_TAG, "Value": "other@elsewhere"},
        ]
    )
    candidates = await provider.reap_candidates(now=now)
    by_id = {c.instance_id: c for c in candidates}
    assert set(by_id) == {quiet.resource_id, orphan, lookalike}
    assert "no client for 180 min" in by_id[quiet.resource_id].reason
    assert by_id[quiet.resource_id].launched and by_id[quiet.resource_id].cost > 0
    for reported in (orphan, lookalike):  # reported, never terminated
        assert not by_id[reported].launched
        assert "not launched from this ledger: not terminated" in by_id[reported].reason
        assert f"--instance-ids {reported}" in by_id[reported].reason
    ended = await provider.reap(candidates)
    assert ended == [quiet.resource_id]
    states = {i: d["State"]["Name"] for i, d in instances(aws_env).items()}
    for kept in (untagged, someone_else, live.resource_id, orphan, lookalike):
        assert states[kept] == "running"
    assert states[quiet.resource_id] in ("shutting-down", "terminated")
    assert ledger.get_machine(quiet.machine_id).state == "terminated"  # type: ignore
    # A candidate made up elsewhere is checked against the ledger again before it is ended.
    forged = dataclasses.replace(by_id[orphan], launched=True, machine_id=live.machine_id)
    assert await provider.reap([forged]) == []
    assert instances(aws_env)[orphan]["State"]["Name"] == "running"
    # A stopped machine is terminated once it has been stopped too long.
    await provider.stop(live)
    assert {c.instance_id for c in await provider.reap_candidates(now=time.time())} == {
        orphan,
        lookalike,
    }
    later = await provider.reap_candidates(now=time.time() + 4 * 24 * 3600)
    assert [c.instance_id for c in later if c.launched] == [live.resource_id]
    assert next(c for c in later if c.launched).reason.startswith("stopped for")


async def test_terminate_timer_ends_only_overdue_stopped_machines(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    provider.terminate_after_stopped = 3600
    stopped = await provider.launch("t3.medium", name="aws-stopped", connect=False)
    running = await provider.launch("t3.medium", name="aws-running", connect=False)
    await provider.stop(stopped)
    # A stopped instance tagged as this stopped machine's, but not the one it launched.
    ec2 = client(aws_env, "ec2")
    lookalike = ec2.run_instances(
        ImageId=instances(aws_env)[stopped.resource_id]["ImageId"],
        InstanceType="t3.medium",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
                    {"Key": OWNER_TAG, "Value": OWNER},
                    {"Key": LEDGER_TAG, "Value": stopped.machine_id},
                ],
            }
        ],
    )["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[lookalike])
    assert await provider.terminate_overdue() == []
    later = time.time() + 2 * 3600
    ledger.touch_machine(running.machine_id, at=later)  # a client is there: not reaped
    assert await provider.terminate_overdue(now=later) == [stopped.resource_id]
    assert ledger.get_machine(stopped.machine_id).state == "terminated"  # type: ignore
    assert ledger.get_machine(running.machine_id).state == "running"  # type: ignore
    assert instances(aws_env)[lookalike]["State"]["Name"] == "stopped"


async def test_a_machine_that_stopped_itself_is_billed_until_ec2_says(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    record = await provider.launch("A10G", connect=False)
    await asyncio.sleep(1.1)
    # The instance shuts itself down (the agent's stop command), not through us.
    client(aws_env, "ec2").stop_instances(InstanceIds=[record.resource_id])
    stopped_at = time.time()
    await asyncio.sleep(1.5)
    [synced] = await provider.sync_all()
    assert synced.state in ("stopping", "stopped")
    last = ledger.machine_events(record.machine_id)[-1]
    assert "User initiated" in last.detail
    assert stopped_at - 1.0 <= last.time <= stopped_at  # EC2's time, to the second
    assert synced.cost(now=time.time() + 3600) == pytest.approx(
        (last.time - record.running_since) * 1.006 / 3600  # type: ignore[operator]
    )


def test_host_keys_from_console_output() -> None:
    output = (
        "cloud-init boot\n-----BEGIN SSH HOST KEY KEYS-----\n"
        "ecdsa-sha2-nistp256 AAAAE2VjZHNh root@ip-10-0-0-1\n"
        "ssh-ed25519 AAAAC3NzaC1lZDI1 root@ip-10-0-0-1\n"
        "-----END SSH HOST KEY KEYS-----\nlogin:"
    )
    assert host_keys_from_console(output) == [
        "ecdsa-sha2-nistp256 AAAAE2VjZHNh",
        "ssh-ed25519 AAAAC3NzaC1lZDI1",
    ]
    assert host_keys_from_console("Linux version 2.6.16-xenU") == []


def test_targets_from_configuration_and_ledger(provider: AWSProvider, ledger: Ledger) -> None:
    provider.machines = [
        {"name": "gpu", "hardware": "A10G"},
        {"name": "big", "hardware": "a100:8", "region": "us-west-2"},
        {"name": "bad", "hardware": "a10"},
    ]
    ledger.add_machine(
        "m-1",
        "aws-cli-box",
        "aws",
        owner=OWNER,
        instance_type="g6.xlarge",
        region="us-east-1",
        state="stopped",
    )
    targets = {t.name: t for t in provider.targets()}
    assert set(targets) == {"aws-gpu", "aws-big", "aws-cli-box"}
    assert targets["aws-gpu"].display_name == "Python 3 · A10G 22.4 GiB · g5.xlarge · us-east-1"
    assert targets["aws-big"].hardware == "8 × A100 40 GiB"
    assert targets["aws-big"].where == "p4d.24xlarge · us-west-2"
    assert targets["aws-cli-box"].host == "jrhw-aws-cli-box"


async def test_upkeep_syncs_and_terminates_overdue(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    import logging

    from jupyter_remote_hw.providers.aws.upkeep import CloudUpkeep

    upkeep = CloudUpkeep(provider, interval=0.2, log=logging.getLogger("test"))
    assert (await upkeep.run_once()).synced == 0  # nothing launched: nothing asked of EC2
    record = await provider.launch("t3.medium", connect=False)
    client(aws_env, "ec2").stop_instances(InstanceIds=[record.resource_id])
    provider.terminate_after_stopped = 0.5
    upkeep.start()
    try:
        deadline = time.monotonic() + 15
        while ledger.get_machine(record.machine_id).state != "terminated":  # type: ignore
            assert time.monotonic() < deadline, "upkeep did not terminate the stopped machine"
            await asyncio.sleep(0.1)
    finally:
        await upkeep.stop()
    events = [e.event for e in ledger.machine_events(record.machine_id)]
    assert events[-1] == "terminated" and "stopped" in events
    assert "reaped: stopped for" in ledger.machine_events(record.machine_id)[-1].detail


def console_output(text: str) -> Any:
    """A before-send hook answering GetConsoleOutput with ``text`` (moto's console is fixed)."""
    import base64

    from botocore.awsrequest import AWSResponse

    body = (
        '<GetConsoleOutputResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        "<requestId>jrhw-test</requestId><instanceId>i-test</instanceId>"
        "<timestamp>2030-01-01T00:00:00.000Z</timestamp>"
        f"<output>{base64.b64encode(text.encode()).decode()}</output>"
        "</GetConsoleOutputResponse>"
    ).encode()

    def answer(request: Any, **_kwargs: Any) -> Any:
        return AWSResponse(request.url, 200, {}, _Body(body))

    return answer


@pytest.fixture
def reachable(provider: AWSProvider, instance_host: InstanceHost, short_tmp: Path) -> AWSProvider:
    """The provider, with every instance's SSH endpoint redirected to the loopback sshd that
    boots with the host key of the instance's user data."""
    from jupyter_remote_hw.transport import TransportManager

    from ...conftest import TEST_TRANSPORT

    provider.transport = TransportManager(**TEST_TRANSPORT)
    provider.ssh_endpoint_redirect = instance_host.redirect
    provider.ssh_user = instance_host.host.user
    provider.public_key_file = f"{instance_host.host.user_key}.pub"
    provider.python = sys.executable
    provider.remote_root = str(short_tmp / "r")
    provider.stop_command = ["true"]
    provider.ssh_timeout = 5
    return provider


async def reopen(provider: AWSProvider, name: str) -> None:
    """Open the machine ``name`` again (start it when stopped, connect), then let go."""
    from jupyter_remote_hw.providers.launch_steps import LaunchSteps

    [target] = [t for t in provider.targets() if t.name == name]
    machine = await provider.open_machine(target, LaunchSteps(name, "-", logging.getLogger()))
    await machine.close()


async def test_injected_host_key_is_checked_on_every_later_connection(
    reachable: AWSProvider, instance_host: InstanceHost, ledger: Ledger, short_tmp: Path
) -> None:
    assert reachable.transport is not None
    try:
        record = await reachable.launch("t3.medium", name="aws-keyed")
        # The instance booted with the key made for it; the first connection verified it.
        assert instance_host.booted == [record.resource_id]
        assert record.info["host_key"] == instance_host.host.fingerprint()
        assert record.info["host_key_source"] == "injected at launch"
        known = Path(reachable.state_dir, "known_hosts.d", "jrhw-aws-keyed")
        assert (
            known.read_text() == f"[127.0.0.1]:{instance_host.host.port} "
            f"{record.info['host_key_public']}\n"
        )
        assert oct(known.stat().st_mode & 0o777) == "0o600"
        # Stopped and started, it comes back at another address: the same key is expected.
        await reachable.stop(record)
        reachable.ssh_endpoint_redirect = instance_host.move()
        await reopen(reachable, "aws-keyed")
        again = ledger.get_machine(record.machine_id)
        assert again is not None and again.info["host_key"] == record.info["host_key"]
        assert again.info["port"] == instance_host.host.port
        assert [e.event for e in ledger.machine_events(record.machine_id)].count("host key") == 0
        # After the next stop and start, something else answers there: refused, not trusted.
        await reachable.stop(again)
        with loopback_host(short_tmp / "impostor", alias="impostor") as impostor:
            reachable.ssh_endpoint_redirect = f"127.0.0.1:{impostor.port}"
            with pytest.raises(LaunchError) as caught:
                await reopen(reachable, "aws-keyed")
        message = str(caught.value)
        assert "HOST KEY MISMATCH" in message and record.resource_id in message
        assert impostor.fingerprint() in message and record.info["host_key"] in message
        assert "Nothing was trusted" in message
        after = ledger.get_machine(record.machine_id)
        assert after is not None and after.info["host_key"] == record.info["host_key"]
        assert after.info["host_key_public"] == record.info["host_key_public"]
    finally:
        await reachable.transport.close_all()


async def test_host_key_listed_on_the_console_is_verified(
    reachable: AWSProvider, instance_host: InstanceHost, ledger: Ledger
) -> None:
    reachable.host_key_source = "console"
    host = instance_host.host
    pub = (host.root / "ssh_host_ed25519_key.pub").read_text().split()
    reachable.client("ec2").meta.events.register(
        "before-send.ec2.GetConsoleOutput",
        console_output(
            "cloud-init...\n-----BEGIN SSH HOST KEY KEYS-----\n"
            f"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAA root@ip\n{pub[0]} {pub[1]} root@ip\n"
            "-----END SSH HOST KEY KEYS-----\n"
        ),
    )
    try:
        record = await reachable.launch("t3.medium", name="aws-console")
        assert instance_host.booted == []  # no key was given to it
        assert record.info["host_key_source"] == "console output"
        assert record.info["host_key"] == host.fingerprint()
        known = Path(reachable.state_dir, "known_hosts.d", "jrhw-aws-console").read_text()
        assert known == f"[127.0.0.1]:{host.port} {pub[0]} {pub[1]}\n"
    finally:
        assert reachable.transport is not None
        await reachable.transport.close_all()


async def test_host_key_not_on_the_console_is_refused(
    reachable: AWSProvider, aws_env: str, ledger: Ledger, tmp_path: Path
) -> None:
    reachable.host_key_source = "console"
    other = keygen(tmp_path / "other_host_key")  # the instance's real key, per its console
    listed = Path(f"{other}.pub").read_text().split()
    reachable.client("ec2").meta.events.register(
        "before-send.ec2.GetConsoleOutput",
        console_output(
            f"-----BEGIN SSH HOST KEY KEYS-----\n{listed[0]} {listed[1]} root@ip\n"
            "-----END SSH HOST KEY KEYS-----\n"
        ),
    )
    with pytest.raises(LaunchError, match="SSH reachable.*not one of the keys its console output"):
        await reachable.launch("t3.medium", name="aws-spoofed")
    [record] = ledger.machines()
    assert record.state == "terminated"  # the failed launch left nothing running
    assert "host_key" not in record.info
    assert not any(Path(reachable.state_dir, "known_hosts.d").iterdir())
    assert instances(aws_env)[record.resource_id]["State"]["Name"] in (
        "shutting-down",
        "terminated",
    )


async def test_no_host_key_on_the_console_is_never_trusted_on_first_use(
    reachable: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    reachable.host_key_source = "console"
    reachable.ssh_timeout = 1
    # moto's console output is a fixed kernel log, without cloud-init's host keys.
    with pytest.raises(
        LaunchError, match="lists no SSH host key yet.*no host key is trusted on first use"
    ):
        await reachable.launch("t3.medium", name="aws-unlisted")
    [record] = ledger.machines()
    assert "host_key" not in record.info and record.state == "terminated"
    assert not any(Path(reachable.state_dir, "known_hosts.d").iterdir())


async def test_fingerprint_recorded_by_an_earlier_version_is_checked(
    reachable: AWSProvider, instance_host: InstanceHost, ledger: Ledger
) -> None:
    """A machine an earlier version launched has only a fingerprint in the ledger (and an
    old address): the key presented must have it, before and after it is learnt."""
    reachable.host_key_source = "console"
    record = await reachable.launch("t3.medium", name="aws-old", connect=False)
    ledger.update_machine(
        record.machine_id,
        info={
            "host_key": "SHA256:notTheKeyOfThisHostXXXXXXXXXXXXXXXXXXXXXXXX",
            "host_key_source": "trust on first use",
            "address": "198.51.100.9",
            "port": 22,
        },
    )
    assert reachable.transport is not None
    try:
        with pytest.raises(LaunchError) as caught:
            await reopen(reachable, "aws-old")
        assert "HOST KEY MISMATCH" in str(caught.value)
        assert instance_host.host.fingerprint() in str(caught.value)
        assert "host_key_public" not in ledger.get_machine(record.machine_id).info  # type: ignore
        ledger.update_machine(
            record.machine_id, info={"host_key": instance_host.host.fingerprint()}
        )
        await reopen(reachable, "aws-old")
        learnt = ledger.get_machine(record.machine_id)
        assert learnt is not None and learnt.info["host_key_source"] == "recorded fingerprint"
        assert fingerprint(learnt.info["host_key_public"]) == instance_host.host.fingerprint()
    finally:
        await reachable.transport.close_all()


async def test_one_security_group_per_user_allowing_only_the_current_address(
    provider: AWSProvider, aws_env: str
) -> None:
    ec2 = client(aws_env, "ec2")
    first = await provider.launch("t3.medium", name="aws-one", connect=False)
    group_id = first.info["security_group_id"]
    [group] = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    assert group["GroupName"] == "jupyter-remote-hw-ssh-tester-test-host"
    assert tags_of(group)[OWNER_TAG] == OWNER
    # Rules from before (an old address, another port) and a new address: only the new stays.
    ec2.authorize_security_group_ingress(
        GroupId=group_id,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "IpRanges": [{"CidrIp": "198.51.100.0/24"}],
            },
            {
                "IpProtocol": "tcp",
                "FromPort": 8888,
                "ToPort": 8888,
                "IpRanges": [{"CidrIp": "0.0.0.0/0"}],
            },
        ],
    )
    provider.ssh_cidr = "192.0.2.44/32"
    second = await provider.launch("t3.medium", name="aws-two", connect=False)
    assert second.info["security_group_id"] == group_id
    [group] = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    assert [
        (p["FromPort"], [r["CidrIp"] for r in p["IpRanges"]]) for p in group["IpPermissions"]
    ] == [(22, ["192.0.2.44/32"])]
    # Starting a stopped machine again brings the group to the current address too.
    await provider.stop(first)
    provider.ssh_cidr = "192.0.2.45/32"
    await provider.start(first)
    [group] = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]
    assert [[r["CidrIp"] for r in p["IpRanges"]] for p in group["IpPermissions"]] == [
        ["192.0.2.45/32"]
    ]
    # Another user of the account gets a group of their own.
    provider.owner = "colleague@other-host"
    theirs = await provider.launch("t3.medium", name="aws-theirs", connect=False)
    assert theirs.info["security_group_id"] != group_id
    assert len(ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"]) == 1


async def test_security_group_of_our_name_not_tagged_as_ours_is_refused(
    provider: AWSProvider, aws_env: str, ledger: Ledger
) -> None:
    ec2 = client(aws_env, "ec2")
    planted = ec2.create_security_group(
        GroupName="jupyter-remote-hw-ssh-tester-test-host", Description="not ours"
    )["GroupId"]
    with pytest.raises(
        LaunchError, match=f"security group .*{planted}.* is not tagged as jupyter-remote-hw's"
    ):
        await provider.launch("t3.medium", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []
    [group] = ec2.describe_security_groups(GroupIds=[planted])["SecurityGroups"]
    assert group["IpPermissions"] == []


def adopt_spot_instance(aws_env: str, ami: str, ledger: Ledger, name: str) -> tuple[str, str, str]:
    """A persistent spot request fulfilled by moto, recorded as a machine we launched (moto
    makes no request for RunInstances' spot options); its machine, instance and request."""
    ec2 = client(aws_env, "ec2")
    [request] = ec2.request_spot_instances(
        InstanceCount=1,
        Type="persistent",
        LaunchSpecification={"ImageId": ami, "InstanceType": "t3.medium"},
    )["SpotInstanceRequests"]
    instance_id = request["InstanceId"]
    machine_id = f"m-{name}"
    ec2.create_tags(
        Resources=[instance_id],
        Tags=[
            {"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
            {"Key": OWNER_TAG, "Value": OWNER},
            {"Key": LEDGER_TAG, "Value": machine_id},
        ],
    )
    ledger.add_machine(
        machine_id,
        name,
        "aws",
        owner=OWNER,
        instance_type="t3.medium",
        region="us-east-1",
        market="spot",
        price_per_hour=0.01,
    )
    ledger.update_machine(machine_id, resource_id=instance_id)
    ledger.set_machine_state(machine_id, "running", instance_id)
    return machine_id, instance_id, request["SpotInstanceRequestId"]


async def test_ending_a_spot_machine_cancels_its_request(
    provider: AWSProvider, aws_env: str, ami: str, ledger: Ledger
) -> None:
    ec2 = client(aws_env, "ec2")

    def open_requests() -> set[str]:
        return {
            r["SpotInstanceRequestId"]
            for r in ec2.describe_spot_instance_requests()["SpotInstanceRequests"]
            if r["State"] not in ("cancelled", "closed")
        }

    machine_id, instance_id, request = adopt_spot_instance(aws_env, ami, ledger, "aws-spot")
    reaped_id, reaped_instance, reaped_request = adopt_spot_instance(
        aws_env, ami, ledger, "aws-spot-quiet"
    )
    assert open_requests() == {request, reaped_request}
    record = ledger.get_machine(machine_id)
    assert record is not None
    await provider.terminate(record)
    assert open_requests() == {reaped_request}
    assert instances(aws_env)[instance_id]["State"]["Name"] in ("shutting-down", "terminated")
    assert [
        e.detail for e in ledger.machine_events(machine_id) if e.event == "spot request cancelled"
    ] == [request]
    # The reaper ends a spot machine's request with it too.
    ledger.touch_machine(reaped_id, at=time.time() - 3 * 3600)
    [candidate] = await provider.reap_candidates()
    assert await provider.reap([candidate]) == [reaped_instance]
    assert open_requests() == set()
    # Where a spot machine need not stop, its request is one-time.
    provider.shutdown_behavior = "terminate"
    calls = record_calls(provider, "RunInstances")
    await provider.launch("t3.medium", spot=True, connect=False)
    assert calls[0]["InstanceMarketOptions"]["SpotOptions"] == {
        "SpotInstanceType": "one-time",
        "InstanceInterruptionBehavior": "terminate",
    }


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
async def test_key_pair_fingerprint_is_ec2s_for_the_local_key(
    provider: AWSProvider, aws_env: str, tmp_path: Path, kind: str
) -> None:
    key = keygen(tmp_path / f"id_{kind}_check", kind=kind)
    provider.public_key_file = f"{key}.pub"
    first = await provider.launch("t3.medium", name="aws-k1", connect=False)
    second = await provider.launch("t3.medium", name="aws-k2", connect=False)  # found, checked
    assert first.info["key_name"] == second.info["key_name"]
    [pair] = client(aws_env, "ec2").describe_key_pairs(KeyNames=[first.info["key_name"]])[
        "KeyPairs"
    ]
    public = Path(f"{key}.pub").read_text()
    assert ec2_fingerprints(public) & {pair["KeyFingerprint"]}


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_ec2_fingerprint_forms_are_those_its_docs_compute(tmp_path: Path, kind: str) -> None:
    """EC2's docs: an imported RSA key's fingerprint is the MD5 of its DER public key
    (openssl), an ED25519 key's the base64 SHA-256 that ssh-keygen -l prints."""
    key = keygen(tmp_path / f"id_{kind}", kind=kind)
    public = Path(f"{key}.pub").read_text()
    if kind == "ed25519":
        shown = subprocess.run(
            ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[1]
        assert shown.removeprefix("SHA256:") in ec2_fingerprints(public)
    else:
        pem = subprocess.run(
            ["ssh-keygen", "-e", "-f", f"{key}.pub", "-m", "PKCS8"], check=True, capture_output=True
        ).stdout
        der = subprocess.run(
            ["openssl", "pkey", "-pubin", "-outform", "DER"],
            input=pem,
            check=True,
            capture_output=True,
        ).stdout
        md5 = hashlib.md5(der, usedforsecurity=False).hexdigest()
        assert ":".join(md5[i : i + 2] for i in range(0, 32, 2)) in ec2_fingerprints(public)
    with pytest.raises(ValueError, match="RSA or ED25519"):
        ec2_fingerprints(Path(f"{keygen(tmp_path / 'id_ecdsa', kind='ecdsa')}.pub").read_text())


async def test_key_pair_of_our_name_with_another_key_is_refused(
    provider: AWSProvider, aws_env: str, ledger: Ledger, tmp_path: Path
) -> None:
    calls = record_calls(provider, "ImportKeyPair")
    await provider.launch("t3.medium", name="aws-first", connect=False)
    [imported] = calls
    name = imported["KeyName"]
    ec2 = client(aws_env, "ec2")
    # Someone replaces it with their own key under the same name.
    ec2.delete_key_pair(KeyName=name)
    theirs = keygen(tmp_path / "their_key")
    ec2.import_key_pair(KeyName=name, PublicKeyMaterial=Path(f"{theirs}.pub").read_bytes())
    with pytest.raises(LaunchError, match=f"key pair {name} in us-east-1 is not your key"):
        await provider.launch("t3.medium", name="aws-second", connect=False)
    assert len(instances(aws_env)) == 1 and len(ledger.machines()) == 1
    # A configured key pair is checked against the key beside identity_file.
    provider.key_name = name
    provider.identity_file = str(tmp_path / "id_ed25519")
    with pytest.raises(LaunchError, match="is not your key"):
        await provider.launch("t3.medium", name="aws-third", connect=False)
    provider.identity_file = str(theirs)
    third = await provider.launch("t3.medium", name="aws-third", connect=False)
    assert third.info["key_name"] == name
