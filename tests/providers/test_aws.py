"""The aws provider against moto's server: what RunInstances gets, budget, errors, reap."""

from __future__ import annotations

import asyncio
import base64
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.launch_steps import LaunchError
from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.providers.aws import (
    CREATED_BY_TAG,
    LEDGER_TAG,
    OWNER_TAG,
    AWSProvider,
    host_keys_from_console,
)

from ..motoserver import aws_env, client, moto_endpoint  # noqa: F401
from ..testhosts import keygen

AMI_PARAMETER = "/test/jupyter-remote-hw/ami-id"
OWNER = "tester@test-host"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger(tmp_path / "ledger.sqlite3")
    yield opened
    opened.close()


@pytest.fixture
def ami(aws_env: str) -> str:  # noqa: F811
    """A moto AMI, published under the SSM parameter the provider is told to read."""
    image = client(aws_env, "ec2").describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    client(aws_env, "ssm").put_parameter(Name=AMI_PARAMETER, Value=image, Type="String")
    return str(image)


@pytest.fixture
def provider(aws_env: str, ami: str, ledger: Ledger,  # noqa: F811
             tmp_path: Path) -> Iterator[AWSProvider]:
    key = keygen(tmp_path / "id_ed25519")
    made = AWSProvider(
        endpoint_url=aws_env, ami_ssm_parameter=AMI_PARAMETER, ssh_cidr="203.0.113.7/32",
        public_key_file=f"{key}.pub", owner=OWNER, poll_interval=0.05,
        state_dir=str(tmp_path / "aws"), ledger=ledger,
    )
    yield made
    made.close()


def record_calls(provider: AWSProvider, operation: str, region: str = "us-east-1") -> list[dict]:
    """The parameters of every ``operation`` call the provider's client makes."""
    calls: list[dict] = []

    def keep(params: dict[str, Any], **_kwargs: Any) -> None:
        calls.append(dict(params))

    provider.client("ec2", region).meta.events.register(
        f"provide-client-params.ec2.{operation}", keep)
    return calls


def instances(endpoint: str, region: str = "us-east-1") -> dict[str, dict]:
    reply = client(endpoint, "ec2", region).describe_instances()
    return {i["InstanceId"]: i for r in reply["Reservations"] for i in r["Instances"]}


def tags_of(instance: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


async def test_run_instances_gets_ami_type_market_tags_key_and_group(
        provider: AWSProvider, aws_env: str, ami: str, ledger: Ledger) -> None:  # noqa: F811
    calls = record_calls(provider, "RunInstances")
    record = await provider.launch("A10G", spot=True, connect=False)
    assert record.state == "running" and record.instance_type == "g5.xlarge"
    assert record.market == "spot" and record.price_per_hour == 1.006
    [params] = calls
    assert params["ImageId"] == ami
    assert params["InstanceType"] == "g5.xlarge"
    assert params["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {
        "SpotInstanceType": "persistent", "InstanceInterruptionBehavior": "stop"}}
    assert params["InstanceInitiatedShutdownBehavior"] == "stop"
    # The boot script stops share keys from making UNIX-socket listeners (docs/sharing.md).
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
    user_data = ec2.describe_instance_attribute(InstanceId=record.resource_id,
                                                Attribute="userData")["UserData"]["Value"]
    assert "AllowStreamLocalForwarding local" in base64.b64decode(user_data).decode()
    behaviour = ec2.describe_instance_attribute(
        InstanceId=record.resource_id, Attribute="instanceInitiatedShutdownBehavior")
    assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "stop"
    events = [e.event for e in ledger.machine_events(record.machine_id)]
    assert events == ["requested", "pending", "running"]


async def test_on_demand_terminate_behaviour_and_group_reused(
        provider: AWSProvider, aws_env: str) -> None:  # noqa: F811
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
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    provider.ssh_cidr = ""
    with pytest.raises(LaunchError, match=r"step 'requested'.*c\.AWSProvider\.ssh_cidr"):
        await provider.launch("A10G", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []


async def test_missing_ami_parameter_is_named(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    provider.ami_ssm_parameter = "/test/nothing/here"
    with pytest.raises(LaunchError, match="AMI parameter /test/nothing/here does not exist"):
        await provider.launch("A10G", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []


async def test_missing_credentials_are_named(
        provider: AWSProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    provider._clients.clear()
    with pytest.raises(LaunchError, match="credentials.*aws configure"):
        await provider.launch("A10G", connect=False)


async def test_budget_refuses_with_figures(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    provider.budget.max_per_machine = 5.0
    with pytest.raises(LaunchError, match=r"p4d.24xlarge.*\$32.77/h, above the limit of \$5/h"):
        await provider.launch("A100:8", connect=False)
    assert instances(aws_env) == {} and ledger.machines() == []
    provider.budget.max_total = 2.0
    await provider.launch("A10G", connect=False)  # $1.006/h
    await provider.launch("L4", connect=False)  # $0.8048/h more makes $1.81/h: allowed
    with pytest.raises(LaunchError, match=r"g4dn.xlarge \(on-demand\) in us-east-1 at \$0.526/h "
                       r"plus the \$1.811/h .* makes \$2.337/h, above the total limit of \$2/h"):
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

    body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>"
            f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            "<RequestID>jrhw-test</RequestID></Response>").encode()

    def answer(request: Any, **_kwargs: Any) -> Any:
        return AWSResponse(request.url, 400, {}, _Body(body))

    return answer


no_capacity = ec2_error("InsufficientInstanceCapacity", "We currently do not have sufficient "
                        "g5.xlarge capacity in the Availability Zone you requested.")


async def test_capacity_error_suggests_region_type_and_market(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
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
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    provider.client("ec2").meta.events.register(
        "before-send.ec2.RunInstances",
        ec2_error("VcpuLimitExceeded", "You have requested more vCPU capacity than allowed."))
    with pytest.raises(LaunchError) as caught:
        await provider.launch("a100:8", spot=True, connect=False)
    message = str(caught.value)
    assert "vCPU quota for p4d.24xlarge's family in us-east-1 is reached" in message
    assert "Service Quotas" in message and "on-demand instead of spot" in message
    assert [m.state for m in ledger.machines()] == ["failed"] and instances(aws_env) == {}


async def test_stop_start_terminate_accrue_cost(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
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
        "shutting-down", "terminated")
    events = [e.event for e in ledger.machine_events(record.machine_id)]
    assert events[-1] == "terminated" and "pending" in events[3:]


async def test_reap_ends_exactly_our_unclaimed_instances(
        provider: AWSProvider, aws_env: str, ami: str, ledger: Ledger) -> None:  # noqa: F811
    quiet = await provider.launch("t3.medium", name="aws-quiet", connect=False)
    live = await provider.launch("t3.medium", name="aws-live", connect=False)
    now = time.time()
    ledger.touch_machine(quiet.machine_id, at=now - 3 * 3600)   # no client for 3 h
    ledger.touch_machine(live.machine_id, at=now - 60)
    ec2 = client(aws_env, "ec2")

    def run(tags: list[dict[str, str]]) -> str:
        spec = [{"ResourceType": "instance", "Tags": tags}] if tags else []
        reply = ec2.run_instances(ImageId=ami, InstanceType="t3.medium", MinCount=1,
                                  MaxCount=1, TagSpecifications=spec)
        return str(reply["Instances"][0]["InstanceId"])

    untagged = run([])
    orphan = run([{"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
                  {"Key": OWNER_TAG, "Value": OWNER}, {"Key": LEDGER_TAG, "Value": "m-gone"}])
    someone_else = run([{"Key": CREATED_BY_TAG, "Value": "jupyter-remote-hw"},
                        {"Key": OWNER_TAG, "Value": "other@elsewhere"}])
    candidates = await provider.reap_candidates(now=now)
    by_id = {c.instance_id: c for c in candidates}
    assert set(by_id) == {quiet.resource_id, orphan}
    assert "no client for 180 min" in by_id[quiet.resource_id].reason
    assert "not in this ledger" in by_id[orphan].reason
    assert by_id[quiet.resource_id].cost > 0
    ended = await provider.reap(candidates)
    assert sorted(ended) == sorted([quiet.resource_id, orphan])
    states = {i: d["State"]["Name"] for i, d in instances(aws_env).items()}
    assert states[untagged] == states[someone_else] == states[live.resource_id] == "running"
    assert states[quiet.resource_id] in ("shutting-down", "terminated")
    assert states[orphan] in ("shutting-down", "terminated")
    assert ledger.get_machine(quiet.machine_id).state == "terminated"  # type: ignore
    # A stopped machine is terminated once it has been stopped too long.
    await provider.stop(live)
    assert await provider.reap_candidates(now=time.time()) == []
    later = await provider.reap_candidates(now=time.time() + 4 * 24 * 3600)
    assert [c.instance_id for c in later] == [live.resource_id]
    assert later[0].reason.startswith("stopped for")


async def test_terminate_timer_ends_only_overdue_stopped_machines(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    provider.terminate_after_stopped = 3600
    stopped = await provider.launch("t3.medium", name="aws-stopped", connect=False)
    running = await provider.launch("t3.medium", name="aws-running", connect=False)
    await provider.stop(stopped)
    assert await provider.terminate_overdue() == []
    later = time.time() + 2 * 3600
    ledger.touch_machine(running.machine_id, at=later)  # a client is there: not reaped
    assert await provider.terminate_overdue(now=later) == [stopped.resource_id]
    assert ledger.get_machine(stopped.machine_id).state == "terminated"  # type: ignore
    assert ledger.get_machine(running.machine_id).state == "running"  # type: ignore


async def test_a_machine_that_stopped_itself_is_billed_until_ec2_says(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
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
        (last.time - record.running_since) * 1.006 / 3600)  # type: ignore[operator]


def test_host_keys_from_console_output() -> None:
    output = ("cloud-init boot\n-----BEGIN SSH HOST KEY KEYS-----\n"
              "ecdsa-sha2-nistp256 AAAAE2VjZHNh root@ip-10-0-0-1\n"
              "ssh-ed25519 AAAAC3NzaC1lZDI1 root@ip-10-0-0-1\n"
              "-----END SSH HOST KEY KEYS-----\nlogin:")
    assert host_keys_from_console(output) == ["ecdsa-sha2-nistp256 AAAAE2VjZHNh",
                                               "ssh-ed25519 AAAAC3NzaC1lZDI1"]
    assert host_keys_from_console("Linux version 2.6.16-xenU") == []


def test_targets_from_configuration_and_ledger(provider: AWSProvider, ledger: Ledger) -> None:
    provider.machines = [{"name": "gpu", "hardware": "A10G"},
                         {"name": "big", "hardware": "a100:8", "region": "us-west-2"},
                         {"name": "bad", "hardware": "a10"}]
    ledger.add_machine("m-1", "aws-cli-box", "aws", owner=OWNER, instance_type="g6.xlarge",
                       region="us-east-1", state="stopped")
    targets = {t.name: t for t in provider.targets()}
    assert set(targets) == {"aws-gpu", "aws-big", "aws-cli-box"}
    assert targets["aws-gpu"].display_name == "Python 3 · A10G 22.4 GiB · g5.xlarge · us-east-1"
    assert targets["aws-big"].hardware == "8 × A100 40 GiB"
    assert targets["aws-big"].where == "p4d.24xlarge · us-west-2"
    assert targets["aws-cli-box"].host == "jrhw-aws-cli-box"


async def test_upkeep_syncs_and_terminates_overdue(
        provider: AWSProvider, aws_env: str, ledger: Ledger) -> None:  # noqa: F811
    import logging

    from jupyter_remote_hw.providers.aws_upkeep import CloudUpkeep

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

    body = ("<GetConsoleOutputResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
            "<requestId>jrhw-test</requestId><instanceId>i-test</instanceId>"
            "<timestamp>2030-01-01T00:00:00.000Z</timestamp>"
            f"<output>{base64.b64encode(text.encode()).decode()}</output>"
            "</GetConsoleOutputResponse>").encode()

    def answer(request: Any, **_kwargs: Any) -> Any:
        return AWSResponse(request.url, 200, {}, _Body(body))

    return answer


@pytest.fixture
def reachable(provider: AWSProvider, ssh_host: Any, short_tmp: Path) -> AWSProvider:
    """The provider, with every instance's SSH endpoint redirected to the loopback sshd."""
    from jupyter_remote_hw.transport import TransportManager

    from ..conftest import TEST_TRANSPORT

    provider.transport = TransportManager(**TEST_TRANSPORT)
    provider.ssh_endpoint_redirect = f"127.0.0.1:{ssh_host.port}"
    provider.ssh_user = ssh_host.user
    provider.public_key_file = f"{ssh_host.user_key}.pub"
    provider.python = sys.executable
    provider.remote_root = str(short_tmp / "r")
    provider.stop_command = ["true"]
    provider.ssh_timeout = 5
    return provider


async def test_host_key_listed_on_the_console_is_verified(
        reachable: AWSProvider, ssh_host: Any, ledger: Ledger) -> None:
    pub = (ssh_host.root / "ssh_host_ed25519_key.pub").read_text().split()
    reachable.client("ec2").meta.events.register("before-send.ec2.GetConsoleOutput", console_output(
        "cloud-init...\n-----BEGIN SSH HOST KEY KEYS-----\n"
        f"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAA root@ip\n{pub[0]} {pub[1]} root@ip\n"
        "-----END SSH HOST KEY KEYS-----\n"))
    try:
        record = await reachable.launch("t3.medium", name="aws-console")
        assert record.info["host_key_source"] == "console output"
        assert record.info["host_key"] == ssh_host.fingerprint()
        known = (Path(reachable.state_dir) / "known_hosts").read_text()
        assert f"[127.0.0.1]:{ssh_host.port} {pub[0]} {pub[1]}" in known
        assert oct(Path(reachable.state_dir, "known_hosts").stat().st_mode & 0o777) == "0o600"
    finally:
        assert reachable.transport is not None
        await reachable.transport.close_all()


async def test_host_key_not_on_the_console_is_refused(
        reachable: AWSProvider, aws_env: str, ledger: Ledger, tmp_path: Path) -> None:  # noqa: F811
    other = keygen(tmp_path / "other_host_key")  # the instance's real key, per its console
    listed = Path(f"{other}.pub").read_text().split()
    reachable.client("ec2").meta.events.register("before-send.ec2.GetConsoleOutput", console_output(
        f"-----BEGIN SSH HOST KEY KEYS-----\n{listed[0]} {listed[1]} root@ip\n"
        "-----END SSH HOST KEY KEYS-----\n"))
    with pytest.raises(LaunchError, match="SSH reachable.*not one of the keys its console output"):
        await reachable.launch("t3.medium", name="aws-spoofed")
    [record] = ledger.machines()
    assert record.state == "terminated"  # the failed launch left nothing running
    assert "host_key" not in record.info
    assert not (Path(reachable.state_dir) / "known_hosts").exists()
    assert instances(aws_env)[record.resource_id]["State"]["Name"] in ("shutting-down",
                                                                       "terminated")
