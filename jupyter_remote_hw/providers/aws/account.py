"""The ``aws`` provider's settings, and the clients and files every part of it uses."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Dict, Enum, Float, Instance, List, Unicode

from ...catalog import Catalog, CatalogEntry
from ...ledger import FINAL_STATES, Ledger, MachineRecord
from ...ledger.budget import BudgetGuard
from ...transport import TransportManager
from ..base import Provider
from ..target import Target, slug
from .errors import AUTH_CODES, AWSError, credentials_error, error_code
from .tags import default_owner

if TYPE_CHECKING:
    from .machine import AWSMachine


T = TypeVar("T")

DEFAULT_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/"
    "latest/ami-id"
)
"""The PyTorch GPU Deep Learning AMI (Ubuntu), latest release."""


class AWSAccount(Provider):
    """The settings of the ``aws`` provider and its plumbing: boto3 clients, the ledger,
    the catalog and the directory of the instances' SSH files.

    The other parts of the provider build on it; configure them all as
    ``c.AWSProvider.*``.
    """

    name = "aws"

    region = Unicode("us-east-1", config=True, help="The AWS region machines are launched in.")
    endpoint_url = Unicode(
        "",
        config=True,
        help="An EC2/SSM endpoint to use instead of AWS's own (a test server such as moto).",
    )
    machines = List(
        Dict(),
        config=True,
        help="Cloud machines to offer in the kernel picker, each a dict: 'name' (required), "
        "'hardware' (a catalog query such as 'A10G' or an instance type, required), "
        "'region', 'market' ('on-demand' or 'spot'). The instance is launched when a "
        "kernel first needs it.",
    )
    ami_ssm_parameter = Unicode(
        DEFAULT_AMI_PARAMETER,
        config=True,
        help="The SSM parameter whose value is the AMI id to launch (default: the latest "
        "PyTorch GPU Deep Learning AMI).",
    )
    market = Enum(
        ["on-demand", "spot"], "on-demand", config=True, help="Default purchase option of a launch."
    )
    ssh_cidr = Unicode(
        "",
        config=True,
        help="Addresses (CIDR, e.g. '203.0.113.7/32') allowed to reach port 22 of our "
        "security group. Empty: none, and a launch says how to set it, unless "
        "security_group_id names a group of your own.",
    )
    security_group_id = Unicode(
        "", config=True, help="Use this security group instead of ours (it must allow SSH here)."
    )
    subnet_id = Unicode("", config=True, help="Subnet to launch in; empty: the default VPC's.")
    key_name = Unicode(
        "",
        config=True,
        help="An EC2 key pair to launch with; empty: public_key_file is imported as "
        "'jupyter-remote-hw-<owner>'.",
    )
    public_key_file = Unicode(
        "~/.ssh/id_ed25519.pub", config=True, help="The SSH public key put on instances."
    )
    identity_file = Unicode(
        "", config=True, help="The private key to log in with; empty: public_key_file without .pub."
    )
    ssh_user = Unicode("ubuntu", config=True, help="The login user of the AMI.")
    python = Unicode(
        "/opt/pytorch/bin/python",
        config=True,
        help="The Python on the instance that runs the agent and kernels.",
    )
    remote_root = Unicode(
        "",
        config=True,
        help="Directory on the instance for the agent's files; empty: the login user's home.",
    )
    root_volume_gib = Float(
        0, config=True, help="Size of the root volume in GiB; 0: the AMI's default."
    )
    harden_sshd = Bool(
        True,
        config=True,
        help="Have the instance's sshd refuse remote UNIX-socket forwards "
        "(AllowStreamLocalForwarding local, through the boot cloud-config), which no "
        "authorized_keys option can forbid a teammate's share key; jupyter-remote-hw needs "
        "only local ones.",
    )
    host_key_source = Enum(
        ["injected", "console"],
        "injected",
        config=True,
        help="Where an instance's SSH host key is learnt, once, before it is trusted: "
        "'injected' makes the key here and gives it to the instance at first boot (cloud-init "
        "ssh_keys in the user data, which principals allowed ec2:DescribeInstanceAttribute "
        "can read); 'console' reads the keys cloud-init prints on the console output, "
        "waiting until they are there. Either way the key is recorded and every later "
        "connection must present it; nothing is trusted on first use.",
    )
    shutdown_behavior = Enum(
        ["stop", "terminate"],
        "stop",
        config=True,
        help="What a shutdown from inside the instance (idle stop, dead-man switch) does: "
        "'stop' keeps the disk (cheap; terminated later by terminate_after_stopped) or "
        "'terminate' ends it.",
    )
    hibernate_after = Float(
        20 * 60,
        min=0.0,
        config=True,
        help="Seconds a kernel on an instance may stay idle before it hibernates: its state "
        "is saved on the Jupyter server's disk, and the instance stops once no kernel runs "
        "there; the next cell starts it and wakes the kernel (docs/hibernation.md). 0: "
        "never. Keep it below idle_stop, which stops the instance with its kernels.",
    )
    idle_stop = Float(
        30 * 60,
        config=True,
        help="Seconds without kernel activity after which the instance stops "
        "itself (a running cell is activity); 0: never.",
    )
    deadman = Float(
        60 * 60,
        config=True,
        help="Seconds without a heartbeat from a Jupyter server or the command "
        "line after which the instance stops itself, kernels or not; 0: never.",
    )
    stop_command = List(
        Unicode(),
        default_value=["sudo", "shutdown", "-h", "now"],
        config=True,
        help="The command (argv) the agent runs on the instance to stop it.",
    )
    terminate_after_stopped = Float(
        3 * 24 * 3600,
        config=True,
        help="Seconds a machine may stay stopped before `jupyter remote-hw reap` (or the "
        "server) terminates it; 0: never.",
    )
    reap_after = Float(
        2 * 3600,
        config=True,
        help="Seconds without a heartbeat after which `reap` counts a running instance "
        "as having no live client.",
    )
    heartbeat_interval = Float(
        60.0, config=True, help="Seconds between heartbeats to a held machine."
    )
    owner = Unicode(config=True, help="The owner tag of our instances (default user@host).")
    ssh_endpoint_redirect = Unicode(
        "",
        config=True,
        help="For tests: reach every instance at this 'host:port' instead of its public "
        "address and port 22 (a loopback sshd).",
    )
    boot_timeout = Float(
        600.0, config=True, help="Seconds to wait for an instance to reach 'running'."
    )
    ssh_timeout = Float(
        300.0, config=True, help="Seconds to wait for a running instance to accept SSH."
    )
    poll_interval = Float(5.0, config=True, help="Seconds between state checks while waiting.")
    state_dir = Unicode(
        "",
        config=True,
        help="Where the instances' ssh_config and known_hosts are written; empty: "
        "<jupyter data dir>/jupyter_remote_hw/aws.",
    )
    catalog_path = Unicode(
        "", config=True, help="The catalog file; empty: the refreshed one, else the shipped one."
    )

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
        self.held: weakref.WeakSet[AWSMachine] = weakref.WeakSet()

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

    async def call(self, step: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
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

    def require_ledger(self) -> Ledger:
        """The ledger (MachineManager gives it).

        Raises:
            AWSError: There is none.
        """
        if self.ledger is None:
            raise AWSError(
                "the aws provider has no ledger (it is created by MachineManager)", kind="config"
            )
        return self.ledger

    def state_path(self) -> Path:
        """The directory of the instances' ssh_config and known_hosts (made owner-only)."""
        path = Path(self.state_dir or Path(jupyter_data_dir()) / "jupyter_remote_hw" / "aws")
        path = path.expanduser()
        if not path.exists():
            path.mkdir(parents=True, mode=0o700)
            os.chmod(path, 0o700)
        return path

    def lifetime_policy(self) -> dict[str, Any]:
        """What the agent on an instance enforces (the ``set_lifetime`` op's arguments)."""
        return {
            "idle_stop": self.idle_stop,
            "deadman": self.deadman,
            "stop_command": list(self.stop_command),
        }

    @staticmethod
    def alias(name: str) -> str:
        """The ssh_config alias of a machine's instance."""
        return f"jrhw-{slug(name)}"

    def target_for(self, name: str, entry: CatalogEntry) -> Target:
        """The target of a machine called ``name`` with the catalog's ``entry``."""
        return Target(
            name=name,
            provider=self.name,
            where=f"{entry.instance_type} · {entry.region}",
            hardware=entry.hardware,
            host=self.alias(name),
            python=self.python,
            root=self.remote_root or None,
        )

    def live_machine(self, name: str) -> MachineRecord | None:
        """The newest machine of that name that is not terminated, if any."""
        records = [
            m
            for m in self.require_ledger().machines(provider=self.name)
            if m.name == name and m.state not in FINAL_STATES
        ]
        return records[-1] if records else None

    async def transport_close(
        self, record: MachineRecord, ended: str = "terminated", outside: str = ""
    ) -> None:
        """Let go of a machine that stopped or ended: its held links and its SSH connection.

        A held :class:`AWSMachine` then answers that its instance is gone, so the
        next kernel opens (starts or launches) it again instead of reconnecting.
        ``outside``: why, when the instance ended by something other than this server
        (EC2's reason); a machine that still holds kernels then keeps their relays, so
        that they are dead in their clients' eyes with that reason (see
        :meth:`AWSMachine.end_reason`), and closes with them.
        """
        for machine in list(self.held):
            if machine.machine_id == record.machine_id:
                machine.ended = ended
                machine.ended_outside = outside
                if not (outside and machine.exposed):
                    await machine.close()
        if self.transport is not None:
            await self.transport.close(self.alias(record.name))
