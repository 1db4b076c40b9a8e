"""Launching an instance for a hardware query, leaving nothing billing when it fails."""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from ...catalog import CatalogEntry
from ...errors import log_failure
from ...ledger import FINAL_STATES, MachineExistsError, MachineRecord
from ..target import slug
from .access import InstanceAccess
from .account import AWSAccount
from .errors import AWSError, error_code, launch_error
from .host_keys import (
    INJECTED,
    HostKeyPair,
    new_host_key,
    user_data,
)
from .instances import Instances
from .launch_options import METADATA_OPTIONS, root_volume, spot_options
from .reach import InstanceReach
from .tags import CREATED_BY, CREATED_BY_TAG, LEDGER_TAG, OWNER_TAG, TARGET_TAG

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps


class InstanceLauncher:
    """Launching an instance: budget, AMI, network, key pair, RunInstances, then the wait
    until it runs; an instance whose launch failed is terminated again.

    Args:
        account: The provider's settings and clients.
        access: The security group and key pair to launch with.
        instances: Instances' state (waiting for one to run, terminating one).
        reach: Reaching the instance once it runs.
    """

    def __init__(
        self,
        account: AWSAccount,
        access: InstanceAccess,
        instances: Instances,
        reach: InstanceReach,
    ) -> None:
        self.account = account
        self.access = access
        self.instances = instances
        self.reach = reach

    def _alternatives(self, entry: CatalogEntry) -> tuple[list[str], list[str]]:
        same_gpu = [
            e.instance_type
            for e in self.account.catalog.search(
                # The same GPU, else the same accelerator (Trainium2, Gaudi), else CPU only.
                (entry.gpu_name or entry.accelerator_name.split(" ")[0] or "cpu").lower(),
                region=entry.region,
            )
            if e.instance_type != entry.instance_type and e.price() is not None
        ]
        elsewhere = {
            e.region: e
            for e in self.account.catalog.entries
            if e.instance_type == entry.instance_type and e.region != entry.region
        }
        # Nearest first (the same part of the world: us-, eu-, ap-...), priced before unpriced.
        area = entry.region.split("-", 1)[0]
        regions = sorted(
            elsewhere,
            key=lambda r: (r.split("-", 1)[0] != area, elsewhere[r].price() is None, r),
        )
        return same_gpu, regions

    async def launch(
        self,
        hardware: str,
        *,
        name: str | None = None,
        region: str | None = None,
        spot: bool | None = None,
        steps: LaunchSteps | None = None,
        connect: bool = True,
    ) -> MachineRecord:
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
        from ..launch_steps import LaunchSteps

        region = region or self.account.region
        steps = steps or LaunchSteps(name or hardware, "-", self.account.log)
        with steps.step("requested"):
            entry = self.account.catalog.resolve(hardware, region)
            use_spot = (
                spot
                if spot is not None
                else (wants_spot(hardware) or self.account.market == "spot")
            )
            market = "spot" if use_spot else "on-demand"
            price = entry.price(spot=use_spot)
            name = name or "aws-" + slug(entry.instance_type.replace(".", "-"))
            ledger = self.account.require_ledger()
            if self.account.live_machine(name) is not None:
                raise AWSError(
                    f"a machine named {name} already exists: start it "
                    f"(`jupyter remote-hw start {name}`) or pick another name",
                    kind="config",
                )
            what = f"{entry.instance_type} ({market}) in {region}"
            self.account.budget.check(what, price, ledger)  # before anything is asked of AWS
            if (blocked := await asyncio.to_thread(self.account.usability)) is not None:
                raise AWSError(f"AWS: {blocked.text}", kind="credentials")
            network = await self.access.network(region)
            key_name = await self.access.key_pair(region)
            ami = await self._ami(region)
            host_key = new_host_key() if self.account.host_key_source == "injected" else None
            known = (
                {
                    "host_key_public": host_key.public,
                    "host_key": host_key.fingerprint,
                    "host_key_source": INJECTED,
                }
                if host_key is not None
                else {}
            )
            machine_id = "m-" + secrets.token_hex(6)
            try:
                record = ledger.add_machine(
                    machine_id,
                    name,
                    self.account.name,
                    owner=self.account.owner,
                    instance_type=entry.instance_type,
                    region=region,
                    market=market,
                    price_per_hour=price or 0.0,
                    info={"ami": ami, "key_name": key_name, **network, **known},
                    detail=f"{entry.instance_type} {market} at ${price or 0:.4g}/h",
                    admit=lambda running: self.account.budget.check(
                        what, price, ledger, running=running
                    ),
                )
            except MachineExistsError as exc:  # launched meanwhile by another process
                raise AWSError(
                    f"{exc}: start it (`jupyter remote-hw start {name}`) or pick another name",
                    kind="config",
                ) from None
            steps.note(f"requested: {entry.instance_type} ({market}) in {region}, {ami}")
            try:
                instance_id = await self._run_instance(
                    record, entry, ami, key_name, network, host_key
                )
            except Exception as exc:
                ledger.set_machine_state(machine_id, "failed", str(exc))
                raise
            ledger.update_machine(machine_id, resource_id=instance_id)
            ledger.set_machine_state(machine_id, "pending", instance_id)
            ledger.touch_machine(machine_id)
        try:
            with steps.step("running"):
                await self.instances.wait_state(machine_id, "running", steps)
            if connect:
                target = self.account.target_for(name, entry)
                machine = await self.reach.connect(target, steps)
                await machine.close()
        except BaseException as exc:
            await self.abandon(machine_id, exc)
            raise
        updated = ledger.get_machine(machine_id)
        assert updated is not None
        return updated

    async def abandon(self, machine_id: str, exc: BaseException) -> None:
        """Terminate an instance whose launch failed, so nothing is left billing."""
        record = self.account.require_ledger().get_machine(machine_id)
        if record is None or not record.resource_id or record.state in FINAL_STATES:
            return
        self.account.log.warning(
            "launch of %s failed (%s): terminating %s", record.name, exc, record.resource_id
        )
        try:
            await self.instances.terminate(record, detail=f"launch failed: {exc}")
        except Exception as terminate_exc:  # noqa: BLE001 (logged, traceback if a bug)
            log_failure(
                self.account.log,
                terminate_exc,
                f"could not terminate {record.resource_id} after a failed launch; "
                "`jupyter remote-hw reap` will find it",
            )

    async def _ami(self, region: str) -> str:
        ssm = self.account.client("ssm", region)
        from botocore.exceptions import ClientError

        try:
            reply = await self.account.call(
                "read the AMI parameter", ssm.get_parameter, Name=self.account.ami_ssm_parameter
            )
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                raise AWSError(
                    f"the AMI parameter {self.account.ami_ssm_parameter} does not exist in {region}: "
                    "set c.AWSProvider.ami_ssm_parameter to a parameter naming an AMI "
                    "(aws ssm get-parameters-by-path --path /aws/service/deeplearning/ami "
                    "lists the Deep Learning AMIs)",
                    "ParameterNotFound",
                    "config",
                ) from None
            raise
        return str(reply["Parameter"]["Value"])

    def _tags(self, record: MachineRecord) -> list[dict[str, str]]:
        return [
            {"Key": "Name", "Value": f"jupyter-remote-hw {record.name}"},
            {"Key": CREATED_BY_TAG, "Value": CREATED_BY},
            {"Key": OWNER_TAG, "Value": record.owner},
            {"Key": LEDGER_TAG, "Value": record.machine_id},
            {"Key": TARGET_TAG, "Value": record.name},
        ]

    async def _run_instance(
        self,
        record: MachineRecord,
        entry: CatalogEntry,
        ami: str,
        key_name: str,
        network: dict[str, Any],
        host_key: HostKeyPair | None,
    ) -> str:
        from botocore.exceptions import ClientError

        ec2 = self.account.client("ec2", record.region)
        params: dict[str, Any] = {
            "ImageId": ami,
            "InstanceType": entry.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "KeyName": key_name,
            "SecurityGroupIds": [network["security_group_id"]],
            "InstanceInitiatedShutdownBehavior": self.account.shutdown_behavior,
            "MetadataOptions": dict(METADATA_OPTIONS),
            "BlockDeviceMappings": [
                await root_volume(self.account.call, ec2, ami, self.account.root_volume_gib)
            ],
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": self._tags(record)}
                for kind in ("instance", "volume")
            ],
        }
        if network.get("subnet_id"):
            params["SubnetId"] = network["subnet_id"]
        if (data := user_data(host_key, self.account.harden_sshd)) is not None:
            params["UserData"] = data
        if record.market == "spot":
            # A spot instance that stops on shutdown must be persistent.
            params["InstanceMarketOptions"] = spot_options(self.account.shutdown_behavior == "stop")
        try:
            reply = await self.account.call(
                f"launch {entry.instance_type}", ec2.run_instances, **params
            )
        except ClientError as exc:
            alternatives, regions = self._alternatives(entry)
            raise launch_error(
                exc, entry.instance_type, record.region, record.market, alternatives, regions
            ) from None
        return str(reply["Instances"][0]["InstanceId"])


__all__ = ["InstanceLauncher"]
