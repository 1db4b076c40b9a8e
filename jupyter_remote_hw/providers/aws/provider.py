"""The ``aws`` provider: EC2 instances launched for the user, reached over SSH.

A launch resolves the hardware through the catalog, checks the budget, reads
the AMI from an SSM parameter, makes sure of a security group and a key pair,
and runs the instance with tags that mark it as ours, IMDSv2 required and its
root volume encrypted. Its SSH host key is made here and given to it at first
boot (``host_keys``), recorded, and checked on every connection; an
ssh_config alias is written for it, and the host is prepared like any SSH
host; the agent there enforces idle stop and the dead-man switch. Every step
is a launch step with its time; every state change is a ledger event, and the
ledger accrues the cost.

boto3 calls block, so they run in threads (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import base64
import getpass
import logging
import os
import re
import secrets
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Dict, Enum, Float, Instance, List, Unicode

from ...agent_client import AgentClient, AgentError, AgentUnavailableError, Progress
from ...budget import BudgetGuard
from ...catalog import Catalog, CatalogEntry
from ...ledger import ACTIVE_STATES, FINAL_STATES, Ledger, MachineExistsError, MachineRecord
from ...transport import HostKeyError, SSHConnection, TransportError, TransportManager
from ...user_errors import log_failure
from ..ssh import SSHMachine
from ..target import Target, slug
from ..usability import Unusable
from .credentials import credentials_status
from .errors import AUTH_CODES, AWSError, credentials_error, error_code, launch_error
from .host_keys import (
    INJECTED,
    HostKeyPair,
    fingerprint,
    known_hosts_file,
    known_hosts_text,
    learn_host_key,
    mismatch_error,
    new_host_key,
    user_data,
)
from .instance import METADATA_OPTIONS, cancel_spot_request, root_volume, spot_options
from .key_pair import checked_key_pair, user_public_key
from .network import user_security_group

if TYPE_CHECKING:
    from ...launch_steps import LaunchSteps

from ..base import Machine, Provider

T = TypeVar("T")

CREATED_BY_TAG = "created-by"
CREATED_BY = "jupyter-remote-hw"
OWNER_TAG = "jupyter-remote-hw:owner"
LEDGER_TAG = "jupyter-remote-hw:ledger-id"
TARGET_TAG = "jupyter-remote-hw:target"

DEFAULT_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/"
    "latest/ami-id"
)
"""The PyTorch GPU Deep Learning AMI (Ubuntu), latest release."""

LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped"]

_TRANSITION_TIME = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")

def default_owner() -> str:
    """``user@host`` of whoever runs this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def transition_time(reason: str | None) -> float | None:
    """When EC2 says a state change happened (``User initiated (2024-05-01 10:00:00 GMT)``)."""
    found = _TRANSITION_TIME.search(reason or "")
    if not found:
        return None
    import calendar

    return float(calendar.timegm(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")))


@dataclass(frozen=True)
class ReapCandidate:
    """An instance tagged as ours that nothing live claims.

    Only an instance whose id the ledger recorded at its launch (with matching
    tags) is terminated; one that merely carries our tags is reported, never
    ended, since tags can be set by anyone allowed to tag in the account.

    Attributes:
        instance_id: The EC2 instance id.
        region: Its region.
        state: Its EC2 state.
        instance_type: Its type.
        machine_id: The ledger id from its tags, or ``""``.
        name: Its target name from its tags, or ``""``.
        reason: Why it is reaped (no ledger row, no client for so long...).
        cost: US dollars it cost so far (from the ledger, else price x time since launch).
        launched: Whether this ledger launched that instance id; False: reported only.
    """

    instance_id: str
    region: str
    state: str
    instance_type: str
    machine_id: str
    name: str
    reason: str
    cost: float
    launched: bool = True


class AWSMachine(SSHMachine):
    """An EC2 instance reached over SSH, whose agent enforces the lifetime policy.

    While this side holds it, a heartbeat goes to the agent (the dead-man
    switch) and to the ledger (``last_seen``, which ``reap`` reads).
    """

    def __init__(self, target: Target, transport: TransportManager, conn: SSHConnection,
                 log: logging.Logger, idle_exit: float, provider: AWSProvider,
                 machine_id: str) -> None:
        super().__init__(target, transport, conn, log, idle_exit,
                         provider.relay_buffer_mib * 1024 * 1024)
        self.provider = provider
        self.machine_id = machine_id
        self.ended = ""
        self._beat: asyncio.Task[None] | None = None

    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        if self.ended:
            raise AgentUnavailableError(f"{self.target.name}: the instance was {self.ended}")
        client = await super()._start_agent(progress)
        try:
            await client.call("set_lifetime", **self.provider.lifetime_policy())
        except AgentError as exc:
            self.log.warning("machine %s: lifetime policy not set: %s", self.target.name, exc)
        if self._beat is None or self._beat.done():
            self._beat = asyncio.create_task(self._heartbeats())
        return client

    async def _heartbeats(self) -> None:
        ledger = self.provider.ledger
        while True:
            if ledger is not None:
                await asyncio.to_thread(ledger.touch_machine, self.machine_id)
            client = self._client
            if client is not None and not client.closed:
                try:
                    await client.call("heartbeat", wait=30)
                except (AgentError, TimeoutError, OSError, TransportError) as exc:
                    self.log.debug("machine %s: heartbeat not sent: %s", self.target.name, exc)
                except Exception as exc:  # noqa: BLE001 (the link is down: the next beat tries)
                    self.log.debug("machine %s: heartbeat failed: %s", self.target.name, exc)
            await asyncio.sleep(self.provider.heartbeat_interval)

    async def close(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
            self._beat = None
        await super().close()


class AWSProvider(Provider):
    """EC2 instances, launched on demand, stopped when idle, terminated when done.

    Configure as ``c.AWSProvider.*``; credentials come from the usual AWS chain
    (environment, ``~/.aws``, instance role).
    """

    name = "aws"

    region = Unicode("us-east-1", config=True, help="The AWS region machines are launched in.")
    endpoint_url = Unicode(
        "", config=True,
        help="An EC2/SSM endpoint to use instead of AWS's own (a test server such as moto).",
    )
    machines = List(
        Dict(), config=True,
        help="Cloud machines to offer in the kernel picker, each a dict: 'name' (required), "
        "'hardware' (a catalog query such as 'A10G' or an instance type, required), "
        "'region', 'market' ('on-demand' or 'spot'). The instance is launched when a "
        "kernel first needs it.",
    )
    ami_ssm_parameter = Unicode(
        DEFAULT_AMI_PARAMETER, config=True,
        help="The SSM parameter whose value is the AMI id to launch (default: the latest "
        "PyTorch GPU Deep Learning AMI).",
    )
    market = Enum(["on-demand", "spot"], "on-demand", config=True,
                  help="Default purchase option of a launch.")
    ssh_cidr = Unicode(
        "", config=True,
        help="Addresses (CIDR, e.g. '203.0.113.7/32') allowed to reach port 22 of our "
        "security group. Empty: none, and a launch says how to set it, unless "
        "security_group_id names a group of your own.",
    )
    security_group_id = Unicode(
        "", config=True, help="Use this security group instead of ours (it must allow SSH here)."
    )
    subnet_id = Unicode("", config=True, help="Subnet to launch in; empty: the default VPC's.")
    key_name = Unicode(
        "", config=True,
        help="An EC2 key pair to launch with; empty: public_key_file is imported as "
        "'jupyter-remote-hw-<owner>'.",
    )
    public_key_file = Unicode("~/.ssh/id_ed25519.pub", config=True,
                              help="The SSH public key put on instances.")
    identity_file = Unicode(
        "", config=True, help="The private key to log in with; empty: public_key_file without .pub."
    )
    ssh_user = Unicode("ubuntu", config=True, help="The login user of the AMI.")
    python = Unicode("/opt/pytorch/bin/python", config=True,
                     help="The Python on the instance that runs the agent and kernels.")
    remote_root = Unicode(
        "", config=True,
        help="Directory on the instance for the agent's files; empty: the login user's home.",
    )
    root_volume_gib = Float(0, config=True,
                            help="Size of the root volume in GiB; 0: the AMI's default.")
    harden_sshd = Bool(
        True, config=True,
        help="Have the instance's sshd refuse remote UNIX-socket forwards "
        "(AllowStreamLocalForwarding local, through the boot cloud-config), which no "
        "authorized_keys option can forbid a teammate's share key; jupyter-remote-hw needs "
        "only local ones.",
    )
    host_key_source = Enum(
        ["injected", "console"], "injected", config=True,
        help="Where an instance's SSH host key is learnt, once, before it is trusted: "
        "'injected' makes the key here and gives it to the instance at first boot (cloud-init "
        "ssh_keys in the user data, which principals allowed ec2:DescribeInstanceAttribute "
        "can read); 'console' reads the keys cloud-init prints on the console output, "
        "waiting until they are there. Either way the key is recorded and every later "
        "connection must present it; nothing is trusted on first use.",
    )
    shutdown_behavior = Enum(
        ["stop", "terminate"], "stop", config=True,
        help="What a shutdown from inside the instance (idle stop, dead-man switch) does: "
        "'stop' keeps the disk (cheap; terminated later by terminate_after_stopped) or "
        "'terminate' ends it.",
    )
    idle_stop = Float(30 * 60, config=True,
                      help="Seconds without kernel activity after which the instance stops "
                      "itself (a running cell is activity); 0: never.")
    deadman = Float(60 * 60, config=True,
                    help="Seconds without a heartbeat from a Jupyter server or the command "
                    "line after which the instance stops itself, kernels or not; 0: never.")
    stop_command = List(
        Unicode(), default_value=["sudo", "shutdown", "-h", "now"], config=True,
        help="The command (argv) the agent runs on the instance to stop it.",
    )
    terminate_after_stopped = Float(
        3 * 24 * 3600, config=True,
        help="Seconds a machine may stay stopped before `jupyter remote-hw reap` (or the "
        "server) terminates it; 0: never.",
    )
    reap_after = Float(
        2 * 3600, config=True,
        help="Seconds without a heartbeat after which `reap` counts a running instance "
        "as having no live client.",
    )
    heartbeat_interval = Float(60.0, config=True,
                               help="Seconds between heartbeats to a held machine.")
    owner = Unicode(config=True, help="The owner tag of our instances (default user@host).")
    ssh_endpoint_redirect = Unicode(
        "", config=True,
        help="For tests: reach every instance at this 'host:port' instead of its public "
        "address and port 22 (a loopback sshd).",
    )
    boot_timeout = Float(600.0, config=True,
                         help="Seconds to wait for an instance to reach 'running'.")
    ssh_timeout = Float(300.0, config=True,
                        help="Seconds to wait for a running instance to accept SSH.")
    poll_interval = Float(5.0, config=True, help="Seconds between state checks while waiting.")
    state_dir = Unicode(
        "", config=True,
        help="Where the instances' ssh_config and known_hosts are written; empty: "
        "<jupyter data dir>/jupyter_remote_hw/aws.",
    )
    catalog_path = Unicode("", config=True,
                           help="The catalog file; empty: the refreshed one, else the shipped one.")

    transport = Instance(TransportManager, allow_none=True)
    ledger = Instance(Ledger, allow_none=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.owner:
            self.owner = default_owner()
        self.budget = BudgetGuard(parent=self)
        self._clients: dict[tuple[str, str], Any] = {}
        self._clients_lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._held: weakref.WeakSet[AWSMachine] = weakref.WeakSet()

    # ------------------------------------------------------------------ plumbing

    def client(self, service: str, region: str | None = None) -> Any:
        """A boto3 client (cached per service and region)."""
        key = (service, region or self.region)
        with self._clients_lock:
            if key not in self._clients:
                import boto3

                kwargs: dict[str, Any] = {"region_name": key[1]}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                self._clients[key] = boto3.session.Session().client(service, **kwargs)
            return self._clients[key]

    def close(self) -> None:
        """Close every cached boto3 client's connection pool; later calls make new clients."""
        with self._clients_lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()

    async def _call(self, step: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a boto3 call in a thread; missing credentials become an AWSError naming ``step``."""
        from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise credentials_error(exc, step) from None
        except ClientError as exc:
            if error_code(exc) in AUTH_CODES:
                raise credentials_error(exc, step) from None
            raise

    @property
    def catalog(self) -> Catalog:
        """The hardware catalog (read once)."""
        if self._catalog is None:
            self._catalog = Catalog.load(self.catalog_path or None)
        return self._catalog

    def _ledger(self) -> Ledger:
        if self.ledger is None:
            raise AWSError("the aws provider has no ledger (it is created by MachineManager)",
                           kind="config")
        return self.ledger

    def _state_path(self) -> Path:
        path = Path(self.state_dir or Path(jupyter_data_dir()) / "jupyter_remote_hw" / "aws")
        path = path.expanduser()
        if not path.exists():
            path.mkdir(parents=True, mode=0o700)
            os.chmod(path, 0o700)
        return path

    def lifetime_policy(self) -> dict[str, Any]:
        """What the agent on an instance enforces (the ``set_lifetime`` op's arguments)."""
        return {"idle_stop": self.idle_stop, "deadman": self.deadman,
                "stop_command": list(self.stop_command)}

    # ------------------------------------------------------------------ targets

    @staticmethod
    def alias(name: str) -> str:
        """The ssh_config alias of a machine's instance."""
        return f"jrhw-{slug(name)}"

    def _target(self, name: str, entry: CatalogEntry) -> Target:
        return Target(name=name, provider=self.name, where=f"{entry.instance_type} · {entry.region}",
                      hardware=entry.hardware, host=self.alias(name), python=self.python,
                      root=self.remote_root or None)

    def targets(self) -> list[Target]:
        found: dict[str, Target] = {}
        for spec in self.machines:
            name = "aws-" + slug(str(spec.get("name") or spec.get("hardware", "")))
            try:
                entry = self.catalog.resolve(str(spec.get("hardware", "")),
                                             str(spec.get("region") or self.region))
            except ValueError as exc:
                self.log.warning("AWSProvider.machines: %s is not offered: %s", name, exc)
                continue
            found[name] = self._target(name, entry)
        if self.ledger is not None:
            for record in self.ledger.machines(provider=self.name):
                if record.state in FINAL_STATES or record.name in found:
                    continue
                try:
                    entry = self.catalog.entry(record.instance_type, record.region)
                except ValueError:
                    continue
                found[record.name] = self._target(record.name, entry)
        return list(found.values())

    def usability(self) -> Unusable | None:
        """No credentials in the AWS chain, said in words; None when there are some."""
        return credentials_status()

    def _spec(self, name: str) -> dict[str, Any] | None:
        for spec in self.machines:
            if "aws-" + slug(str(spec.get("name") or spec.get("hardware", ""))) == name:
                return dict(spec)
        return None

    def live_machine(self, name: str) -> MachineRecord | None:
        """The newest machine of that name that is not terminated, if any."""
        records = [m for m in self._ledger().machines(provider=self.name)
                   if m.name == name and m.state not in FINAL_STATES]
        return records[-1] if records else None

    # ------------------------------------------------------------------ launch

    def _alternatives(self, entry: CatalogEntry) -> tuple[list[str], list[str]]:
        same_gpu = [e.instance_type for e in self.catalog.search(
            entry.gpu_name.lower() if entry.gpu_name else "cpu", region=entry.region)
            if e.instance_type != entry.instance_type and e.price() is not None]
        regions = sorted({e.region for e in self.catalog.entries
                          if e.instance_type == entry.instance_type and e.region != entry.region})
        return same_gpu, regions

    async def launch(self, hardware: str, *, name: str | None = None, region: str | None = None,
                     spot: bool | None = None, steps: LaunchSteps | None = None,
                     connect: bool = True) -> MachineRecord:
        """Launch an instance for ``hardware`` (a catalog query or an instance type).

        Steps: ``requested`` (budget, AMI, security group, key, RunInstances),
        ``running`` (waiting for EC2), then with ``connect`` ``SSH reachable`` and
        ``host prepared``.

        Args:
            hardware: A catalog query (``A10G``, ``a100:8``, ``gpu_mem>=40 cheapest``) or
                an instance type.
            name: The target name (default ``aws-<instance type>``).
            region: The region (default :attr:`region`).
            spot: Spot (True), on-demand (False), or the query/:attr:`market` (None).
            steps: Where the steps are reported; a new recorder when None.
            connect: Also wait for SSH and prepare the host (agent and lifetime policy).

        Returns:
            The machine's ledger row.

        Raises:
            LaunchError: A step failed (its message names the step and what to try);
                an instance that was created is terminated again.
        """
        from ...catalog import wants_spot
        from ...launch_steps import LaunchSteps

        region = region or self.region
        steps = steps or LaunchSteps(name or hardware, "-", self.log)
        with steps.step("requested"):
            entry = self.catalog.resolve(hardware, region)
            use_spot = spot if spot is not None else (wants_spot(hardware)
                                                      or self.market == "spot")
            market = "spot" if use_spot else "on-demand"
            price = entry.price(spot=use_spot)
            name = name or "aws-" + slug(entry.instance_type.replace(".", "-"))
            ledger = self._ledger()
            if self.live_machine(name) is not None:
                raise AWSError(f"a machine named {name} already exists: start it "
                               f"(`jupyter remote-hw start {name}`) or pick another name",
                               kind="config")
            what = f"{entry.instance_type} ({market}) in {region}"
            self.budget.check(what, price, ledger)  # before anything is asked of AWS
            if (blocked := await asyncio.to_thread(self.usability)) is not None:
                raise AWSError(f"AWS: {blocked.text}", kind="credentials")
            network = await self._network(region)
            key_name = await self._key_pair(region)
            ami = await self._ami(region)
            host_key = new_host_key() if self.host_key_source == "injected" else None
            known = {"host_key_public": host_key.public, "host_key": host_key.fingerprint,
                     "host_key_source": INJECTED} if host_key is not None else {}
            machine_id = "m-" + secrets.token_hex(6)
            try:
                record = ledger.add_machine(
                    machine_id, name, self.name, owner=self.owner,
                    instance_type=entry.instance_type, region=region, market=market,
                    price_per_hour=price or 0.0,
                    info={"ami": ami, "key_name": key_name, **network, **known},
                    detail=f"{entry.instance_type} {market} at ${price or 0:.4g}/h",
                    admit=lambda running: self.budget.check(what, price, ledger,
                                                            running=running),
                )
            except MachineExistsError as exc:  # launched meanwhile by another process
                raise AWSError(f"{exc}: start it (`jupyter remote-hw start {name}`) or pick "
                               "another name", kind="config") from None
            steps.note(f"requested: {entry.instance_type} ({market}) in {region}, {ami}")
            try:
                instance_id = await self._run_instance(record, entry, ami, key_name, network,
                                                       host_key)
            except Exception as exc:
                ledger.set_machine_state(machine_id, "failed", str(exc))
                raise
            ledger.update_machine(machine_id, resource_id=instance_id)
            ledger.set_machine_state(machine_id, "pending", instance_id)
            ledger.touch_machine(machine_id)
        try:
            with steps.step("running"):
                await self._wait_state(machine_id, "running", steps)
            if connect:
                target = self._target(name, entry)
                machine = await self.connect(target, steps)
                await machine.close()
        except BaseException as exc:
            await self._abandon(machine_id, exc)
            raise
        updated = ledger.get_machine(machine_id)
        assert updated is not None
        return updated

    async def _abandon(self, machine_id: str, exc: BaseException) -> None:
        """Terminate an instance whose launch failed, so nothing is left billing."""
        record = self._ledger().get_machine(machine_id)
        if record is None or not record.resource_id or record.state in FINAL_STATES:
            return
        self.log.warning("launch of %s failed (%s): terminating %s", record.name, exc,
                         record.resource_id)
        try:
            await self.terminate(record, detail=f"launch failed: {exc}")
        except Exception as terminate_exc:  # noqa: BLE001 (logged, traceback if a bug)
            log_failure(self.log, terminate_exc,
                        f"could not terminate {record.resource_id} after a failed launch; "
                        "`jupyter remote-hw reap` will find it")

    async def _ami(self, region: str) -> str:
        ssm = self.client("ssm", region)
        from botocore.exceptions import ClientError

        try:
            reply = await self._call("read the AMI parameter", ssm.get_parameter,
                                     Name=self.ami_ssm_parameter)
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                raise AWSError(
                    f"the AMI parameter {self.ami_ssm_parameter} does not exist in {region}: "
                    "set c.AWSProvider.ami_ssm_parameter to a parameter naming an AMI "
                    "(aws ssm get-parameters-by-path --path /aws/service/deeplearning/ami "
                    "lists the Deep Learning AMIs)", "ParameterNotFound", "config",
                ) from None
            raise
        return str(reply["Parameter"]["Value"])

    async def _network(self, region: str) -> dict[str, Any]:
        """The security group (and subnet) to launch with; ours is created when needed."""
        network: dict[str, Any] = {"subnet_id": self.subnet_id} if self.subnet_id else {}
        if self.security_group_id:
            return {**network, "security_group_id": self.security_group_id}
        if not self.ssh_cidr:
            raise AWSError(
                "no SSH access is configured, so the instance could not be reached: set "
                "c.AWSProvider.ssh_cidr to the addresses you connect from (e.g. "
                "'203.0.113.7/32'; `curl https://checkip.amazonaws.com` tells yours), or "
                "c.AWSProvider.security_group_id to a group of your own that allows SSH",
                kind="config",
            )
        group_id = await user_security_group(
            self._call, self.client("ec2", region), self.owner, self.ssh_cidr,
            (CREATED_BY_TAG, CREATED_BY), OWNER_TAG, self.log)
        return {**network, "security_group_id": group_id}

    def _public_key(self) -> str:
        path = Path(self.public_key_file).expanduser()
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise AWSError(
                f"cannot read the SSH public key {path} ({exc.strerror}): create one with "
                f"`ssh-keygen -t ed25519`, or set c.AWSProvider.public_key_file or key_name",
                kind="config",
            ) from None

    def identity(self) -> Path:
        """The private key used to log in to instances."""
        if self.identity_file:
            return Path(self.identity_file).expanduser()
        public = Path(self.public_key_file).expanduser()
        return public.with_suffix("") if public.suffix == ".pub" else public

    async def _key_pair(self, region: str) -> str:
        """The key pair to launch with, checked against the local public key."""
        from botocore.exceptions import ClientError

        ec2 = self.client("ec2", region)
        if self.key_name:
            local = user_public_key(self.identity_file, self.public_key_file)
            await checked_key_pair(self._call, ec2, self.key_name, region, local, self.log)
            return self.key_name
        material = self._public_key()
        digest = base64.b32encode(material.split()[1][-16:].encode()).decode()[:8].lower() \
            if len(material.split()) > 1 else "key"
        name = f"jupyter-remote-hw-{slug(self.owner)}-{digest}"
        try:
            await checked_key_pair(self._call, ec2, name, region,
                                   (material, self.public_key_file), self.log, required=True)
            return name
        except ClientError as exc:
            if error_code(exc) != "InvalidKeyPair.NotFound":
                raise
        await self._call("import the SSH key", ec2.import_key_pair, KeyName=name,
                         PublicKeyMaterial=material.encode(),
                         TagSpecifications=[{"ResourceType": "key-pair", "Tags": [
                             {"Key": CREATED_BY_TAG, "Value": CREATED_BY},
                             {"Key": OWNER_TAG, "Value": self.owner}]}])
        return name

    def _tags(self, record: MachineRecord) -> list[dict[str, str]]:
        return [
            {"Key": "Name", "Value": f"jupyter-remote-hw {record.name}"},
            {"Key": CREATED_BY_TAG, "Value": CREATED_BY},
            {"Key": OWNER_TAG, "Value": record.owner},
            {"Key": LEDGER_TAG, "Value": record.machine_id},
            {"Key": TARGET_TAG, "Value": record.name},
        ]

    async def _run_instance(self, record: MachineRecord, entry: CatalogEntry, ami: str,
                            key_name: str, network: dict[str, Any],
                            host_key: HostKeyPair | None) -> str:
        from botocore.exceptions import ClientError

        ec2 = self.client("ec2", record.region)
        params: dict[str, Any] = {
            "ImageId": ami, "InstanceType": entry.instance_type, "MinCount": 1, "MaxCount": 1,
            "KeyName": key_name, "SecurityGroupIds": [network["security_group_id"]],
            "InstanceInitiatedShutdownBehavior": self.shutdown_behavior,
            "MetadataOptions": dict(METADATA_OPTIONS),
            "BlockDeviceMappings": [await root_volume(self._call, ec2, ami,
                                                      self.root_volume_gib)],
            "TagSpecifications": [{"ResourceType": kind, "Tags": self._tags(record)}
                                  for kind in ("instance", "volume")],
        }
        if network.get("subnet_id"):
            params["SubnetId"] = network["subnet_id"]
        if (data := user_data(host_key, self.harden_sshd)) is not None:
            params["UserData"] = data
        if record.market == "spot":
            # A spot instance that stops on shutdown must be persistent.
            params["InstanceMarketOptions"] = spot_options(self.shutdown_behavior == "stop")
        try:
            reply = await self._call(f"launch {entry.instance_type}", ec2.run_instances, **params)
        except ClientError as exc:
            alternatives, regions = self._alternatives(entry)
            raise launch_error(exc, entry.instance_type, record.region, record.market,
                               alternatives, regions) from None
        return str(reply["Instances"][0]["InstanceId"])

    # ------------------------------------------------------------------ state

    async def describe(self, record: MachineRecord) -> dict[str, Any] | None:
        """The instance as EC2 describes it, or None when EC2 no longer knows it."""
        from botocore.exceptions import ClientError

        try:
            reply = await self._call("describe the instance",
                                     self.client("ec2", record.region).describe_instances,
                                     InstanceIds=[record.resource_id])
        except ClientError as exc:
            if error_code(exc) == "InvalidInstanceID.NotFound":
                return None
            raise
        for reservation in reply.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                return dict(instance)
        return None

    async def sync(self, record: MachineRecord) -> MachineRecord:
        """Bring the ledger's state of a machine in line with EC2's."""
        if not record.resource_id or record.state in FINAL_STATES:
            return record
        instance = await self.describe(record)
        state = "terminated" if instance is None else str(instance["State"]["Name"])
        if state == "shutting-down":
            state = "terminated"
        if state != record.state:
            # A machine that stopped itself is billed until EC2's time of the change,
            # not until now.
            at = transition_time(instance.get("StateTransitionReason")) \
                if instance is not None and state in ("stopping", "stopped") else None
            if at is not None and (at > time.time() or at < (record.running_since or 0)):
                at = None
            detail = str(instance.get("StateTransitionReason") or "") if instance else ""
            if state in ("stopping", "stopped", "terminated"):
                await self.transport_close(record, state)
            return self._ledger().set_machine_state(
                record.machine_id, state, f"reported by EC2 {detail}".strip(), at=at)
        return record

    async def sync_all(self) -> list[MachineRecord]:
        """Bring every machine the ledger has as not ended in line with EC2 (for ``list``
        and for a periodic call from the server)."""
        synced = []
        for record in self._ledger().machines(provider=self.name):
            if record.state not in FINAL_STATES and record.resource_id:
                synced.append(await self.sync(record))
        return synced

    async def _wait_state(self, machine_id: str, wanted: str, steps: LaunchSteps) -> None:
        ledger = self._ledger()
        deadline = time.monotonic() + self.boot_timeout
        while True:
            record = ledger.get_machine(machine_id)
            assert record is not None
            record = await self.sync(record)
            if record.state == wanted:
                return
            if record.state in FINAL_STATES:
                raise AWSError(f"{record.resource_id} ended ({record.state}) before it was "
                               f"{wanted}; its console output may say why")
            if time.monotonic() > deadline:
                raise AWSError(f"{record.resource_id} is still {record.state} after "
                               f"{self.boot_timeout:.0f} s (c.AWSProvider.boot_timeout)")
            steps.note(f"{record.resource_id} is {record.state}")
            await asyncio.sleep(self.poll_interval)

    async def stop(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Stop an instance (its disk stays; it costs nothing per hour while stopped)."""
        reply = await self._call("stop the instance",
                                 self.client("ec2", record.region).stop_instances,
                                 InstanceIds=[record.resource_id])
        state = str(reply["StoppingInstances"][0]["CurrentState"]["Name"])
        await self.transport_close(record, "stopped")
        return self._ledger().set_machine_state(record.machine_id, state, detail)

    async def start(self, record: MachineRecord, steps: LaunchSteps | None = None,
                    detail: str = "by the user") -> MachineRecord:
        """Start a stopped instance again (the budget is checked first)."""
        from ...launch_steps import LaunchSteps

        ledger = self._ledger()
        self.budget.check(f"{record.instance_type} ({record.market}) in {record.region}",
                          record.price_per_hour, ledger, exclude=record.machine_id)
        if record.info.get("security_group_id") and not self.security_group_id and self.ssh_cidr:
            await self._network(record.region)  # SSH from the current address only
        await self._call("start the instance", self.client("ec2", record.region).start_instances,
                         InstanceIds=[record.resource_id])
        ledger.set_machine_state(record.machine_id, "pending", detail)
        ledger.touch_machine(record.machine_id)
        await self._wait_state(record.machine_id, "running",
                               steps or LaunchSteps(record.name, "-", self.log))
        updated = ledger.get_machine(record.machine_id)
        assert updated is not None
        return updated

    async def _end_instance(self, record: MachineRecord, instance_id: str) -> None:
        """Terminate an instance we launched, cancelling its spot request first."""
        ec2 = self.client("ec2", record.region)
        if record.market == "spot":
            request = await cancel_spot_request(self._call, ec2, instance_id)
            if request:
                self._ledger().note_machine(record.machine_id, "spot request cancelled",
                                            request)
        await self._call("terminate the instance", ec2.terminate_instances,
                         InstanceIds=[instance_id])

    async def terminate(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Terminate an instance: it and its disk are gone, and it costs nothing more."""
        ledger = self._ledger()
        if record.resource_id:
            await self._end_instance(record, record.resource_id)
        await self.transport_close(record)
        return ledger.set_machine_state(record.machine_id, "terminated", detail)

    async def transport_close(self, record: MachineRecord, ended: str = "terminated") -> None:
        """Let go of a machine that stopped or ended: its held links and its SSH connection.

        A held :class:`AWSMachine` then answers that its instance is gone, so the
        next kernel opens (starts or launches) it again instead of reconnecting.
        """
        for machine in list(self._held):
            if machine.machine_id == record.machine_id:
                machine.ended = ended
                await machine.close()
        if self.transport is not None:
            await self.transport.close(self.alias(record.name))

    # ------------------------------------------------------------------ reaching it

    def _endpoint(self, instance: dict[str, Any]) -> tuple[str, int]:
        if self.ssh_endpoint_redirect:
            host, _, port = self.ssh_endpoint_redirect.rpartition(":")
            return host, int(port)
        address = instance.get("PublicIpAddress") or instance.get("PrivateIpAddress")
        if not address:
            raise AWSError(f"{instance.get('InstanceId')} has no address yet; it may be in a "
                           "subnet without public addresses (set c.AWSProvider.subnet_id)")
        return str(address), 22

    async def _known_host(self, record: MachineRecord, host: str, port: int) -> bool:
        """Write the machine's known_hosts file with its recorded host key at ``host:port``,
        learning the key first (once) when the ledger has none; False while it cannot be
        learnt yet (the console output lists no keys so far)."""
        ledger = self._ledger()
        record = ledger.get_machine(record.machine_id) or record
        public = str(record.info.get("host_key_public") or "")
        if not public:
            learnt = await learn_host_key(self._call, self.client("ec2", record.region),
                                          record, host, port, self.log)
            if learnt is None:
                return False
            public, source = learnt
            ledger.update_machine(record.machine_id, info={
                "host_key_public": public, "host_key": fingerprint(public),
                "host_key_source": source})
            ledger.note_machine(record.machine_id, "host key",
                                f"{fingerprint(public)} ({source})")
            self.log.info("machine %s: host key %s from the %s", record.name,
                          fingerprint(public), source)
        _write_private(known_hosts_file(self._state_path(), self.alias(record.name)),
                       known_hosts_text(host, port, [public]))
        if record.info.get("address") != host or record.info.get("port") != port:
            ledger.update_machine(record.machine_id, info={"address": host, "port": port})
        return True

    def _write_ssh_config(self, record: MachineRecord, host: str, port: int) -> Path:
        path = self._state_path() / "ssh_config"
        blocks = _ssh_blocks(path.read_text() if path.exists() else "")
        alias = self.alias(record.name)
        blocks[alias] = (
            f"Host {alias}\n    HostName {host}\n    Port {port}\n    User {self.ssh_user}\n"
            f"    IdentityFile {self.identity()}\n    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known_hosts_file(self._state_path(), alias)}\n"
            "    StrictHostKeyChecking yes\n"
        )
        _write_private(path, "".join(blocks.values()))
        if self.transport is not None:
            files = list(self.transport.ssh_config_files)
            if not files:
                default = Path("~/.ssh/config").expanduser()
                files = [str(default)] if os.access(default, os.R_OK) else []
            if str(path) not in files:
                self.transport.ssh_config_files = [*files, str(path)]
        return path

    async def connect(self, target: Target, steps: LaunchSteps) -> AWSMachine:
        """Reach a running machine over SSH and prepare it (agent, lifetime policy).

        Runs the ``SSH reachable`` and ``host prepared`` steps.
        """
        assert self.transport is not None
        record = self.live_machine(target.name)
        if record is None:
            raise AWSError(f"no live machine named {target.name}")
        with steps.step("SSH reachable"):
            instance = await self.describe(record)
            if instance is None:
                raise AWSError(f"{record.resource_id} no longer exists")
            host, port = self._endpoint(instance)
            self._write_ssh_config(record, host, port)
            conn = await self._wait_ssh(record, host, port, steps)
        machine = AWSMachine(target, self.transport, conn, self.log, self.agent_idle_exit,
                             self, record.machine_id)
        self._held.add(machine)
        with steps.step("host prepared"):
            await machine.agent(progress=steps.note)
        self._ledger().note_machine(record.machine_id, "host prepared",
                                    f"agent up after {steps.elapsed:.1f} s")
        return machine

    async def _wait_ssh(self, record: MachineRecord, host: str, port: int,
                        steps: LaunchSteps) -> SSHConnection:
        """Connect once the instance answers, presenting the host key recorded for it."""
        assert self.transport is not None
        deadline = time.monotonic() + self.ssh_timeout
        where = host if port == 22 else f"[{host}]:{port}"
        known = False
        last: Exception | str | None = None
        while time.monotonic() < deadline:
            try:
                known = known or await self._known_host(record, host, port)
                if known:
                    return await self.transport.connect(self.alias(record.name))
                last = "its console output lists no SSH host key yet"
                steps.note(f"waiting for the console output of {record.resource_id} to list "
                           "its SSH host keys")
            except HostKeyError as exc:
                current = self._ledger().get_machine(record.machine_id) or record
                raise mismatch_error(
                    record.resource_id, record.name, where,
                    str(current.info.get("host_key") or "(none)"),
                    str(current.info.get("host_key_source") or "recorded"),
                    exc.fingerprint) from None
            except AWSError:
                raise
            except Exception as exc:  # noqa: BLE001 (not up yet: refused, reset, no route...)
                last = exc
                steps.note(f"waiting for SSH on {host}:{port} ({exc})")
            await asyncio.sleep(self.poll_interval)
        if isinstance(last, str):
            raise AWSError(f"{record.resource_id}: {last} after {self.ssh_timeout:.0f} s "
                           "(c.AWSProvider.ssh_timeout), and no host key is trusted on first "
                           "use. Connect again later, or launch with "
                           "c.AWSProvider.host_key_source = 'injected'.", kind="hostkey")
        raise AWSError(f"{record.resource_id} runs but SSH at {host}:{port} did not answer "
                       f"within {self.ssh_timeout:.0f} s (c.AWSProvider.ssh_timeout): {last}. "
                       "Check that c.AWSProvider.ssh_cidr covers your address.")

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """The machine for a kernel: launch, start or reuse the instance, then prepare it."""
        record = self.live_machine(target.name)
        if record is not None:
            record = await self.sync(record)
        launched: MachineRecord | None = None
        if record is None or record.state in FINAL_STATES:
            spec = self._spec(target.name) or {}
            hardware = str(spec.get("hardware") or target.where.split(" · ")[0])
            market = spec.get("market")
            launched = await self.launch(hardware, name=target.name, region=spec.get("region"),
                                         spot=None if market is None else market == "spot",
                                         steps=steps, connect=False)
        elif record.state in ("stopped", "stopping"):
            with steps.step("running"):
                if record.state == "stopping":
                    await self._wait_state(record.machine_id, "stopped", steps)
                    record = self._ledger().get_machine(record.machine_id) or record
                await self.start(record, steps)
        elif record.state == "pending":
            with steps.step("running"):
                await self._wait_state(record.machine_id, "running", steps)
        try:
            return await self.connect(target, steps)
        except BaseException as exc:
            if launched is not None:  # launched for this kernel: leave nothing billing
                await self._abandon(launched.machine_id, exc)
            raise

    # ------------------------------------------------------------------ reaping

    async def owned_instances(self, region: str | None = None) -> list[dict[str, Any]]:
        """Live instances tagged as created by us for :attr:`owner`."""
        ec2 = self.client("ec2", region)
        reply = await self._call("list our instances", ec2.describe_instances, Filters=[
            {"Name": f"tag:{CREATED_BY_TAG}", "Values": [CREATED_BY]},
            {"Name": f"tag:{OWNER_TAG}", "Values": [self.owner]},
            {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES},
        ])
        return [dict(i) for r in reply.get("Reservations", []) for i in r.get("Instances", [])]

    async def reap_candidates(self, regions: list[str] | None = None,
                              now: float | None = None) -> list[ReapCandidate]:
        """Our instances that nothing live claims, and stopped ones past the terminate timer.

        An instance is reaped when its ledger row is missing or ended, when no
        client has sent a heartbeat for :attr:`reap_after` seconds while it
        runs, or when it has been stopped for :attr:`terminate_after_stopped`.
        """
        now = time.time() if now is None else now
        found: list[ReapCandidate] = []
        for region in regions or [self.region]:
            for instance in await self.owned_instances(region):
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                machine_id = tags.get(LEDGER_TAG, "")
                instance_id = str(instance["InstanceId"])
                record = self._launched(machine_id, instance_id, region, tags)
                state = str(instance["State"]["Name"])
                reason = ""
                if record is None:
                    reason = ("tagged as yours but not launched from this ledger: not "
                              "terminated; check it and end it yourself (`aws ec2 "
                              f"terminate-instances --region {region} --instance-ids "
                              f"{instance_id}`)")
                elif record.state in FINAL_STATES:
                    reason = f"the ledger has it {record.state}"
                elif state in ("pending", "running"):
                    seen = record.last_seen or record.created
                    if now - seen > self.reap_after > 0:
                        reason = f"no client for {(now - seen) / 60:.0f} min"
                elif state == "stopped" and \
                        now - record.updated > self.terminate_after_stopped > 0:
                    reason = f"stopped for {(now - record.updated) / 3600:.1f} h"
                if not reason:
                    continue
                found.append(ReapCandidate(
                    instance_id=instance_id, region=region, state=state,
                    instance_type=str(instance.get("InstanceType", "")), machine_id=machine_id,
                    name=tags.get(TARGET_TAG, ""), reason=reason,
                    cost=record.cost(now) if record is not None
                    else self._estimate(instance, region, now),
                    launched=record is not None,
                ))
        return found

    def _launched(self, machine_id: str, instance_id: str, region: str,
                  tags: dict[str, str]) -> MachineRecord | None:
        """The ledger's row of the machine that launched ``instance_id``, when the
        instance's tags name that row and our owner; else None."""
        record = self._ledger().get_machine(machine_id) if machine_id else None
        if record is None or record.provider != self.name or record.resource_id != instance_id \
                or record.region != region or tags.get(OWNER_TAG) != record.owner \
                or tags.get(CREATED_BY_TAG) != CREATED_BY:
            return None
        return record

    def _estimate(self, instance: dict[str, Any], region: str, now: float) -> float:
        """Price x time since launch, for an instance the ledger does not know."""
        launched = instance.get("LaunchTime")
        if launched is None or instance["State"]["Name"] not in ("pending", "running"):
            return 0.0
        try:
            price = self.catalog.entry(str(instance["InstanceType"]), region).price() or 0.0
        except ValueError:
            return 0.0
        return float(max(0.0, now - launched.timestamp()) * price / 3600.0)

    async def reap(self, candidates: list[ReapCandidate]) -> list[str]:
        """Terminate the candidates' instances that this ledger launched; return their ids.

        Each is checked again before it is ended: its id must be the one the
        ledger recorded for the machine its tags name. The others are logged and
        left running.
        """
        ended = []
        ledger = self._ledger()
        for candidate in candidates:
            record = ledger.get_machine(candidate.machine_id) if candidate.machine_id else None
            if not candidate.launched or record is None or record.provider != self.name \
                    or record.resource_id != candidate.instance_id:
                self.log.warning("reap: %s in %s is not one this ledger launched: left "
                                 "running", candidate.instance_id, candidate.region)
                continue
            await self._end_instance(record, candidate.instance_id)
            if record.state not in FINAL_STATES:
                await self.transport_close(record)
                ledger.set_machine_state(record.machine_id, "terminated",
                                         f"reaped: {candidate.reason}")
            ended.append(candidate.instance_id)
        return ended

    async def terminate_overdue(self, regions: list[str] | None = None,
                                now: float | None = None) -> list[str]:
        """The terminate timer: end machines stopped for longer than
        :attr:`terminate_after_stopped`; return their instance ids.

        For a periodic call from the server, and run by ``reap``.
        """
        overdue = [c for c in await self.reap_candidates(regions, now)
                   if c.reason.startswith("stopped for")]
        return await self.reap(overdue)

    def running_machines(self) -> list[MachineRecord]:
        """Machines that run or are about to, as the ledger has them."""
        return self._ledger().machines(provider=self.name, states=ACTIVE_STATES)


def _ssh_blocks(text: str) -> dict[str, str]:
    """The ``Host`` blocks of an ssh_config we wrote, by alias."""
    blocks: dict[str, str] = {}
    current = ""
    for line in text.splitlines(keepends=True):
        if line.startswith("Host "):
            current = line.split()[1]
            blocks[current] = ""
        if current:
            blocks[current] += line
    return blocks


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)
