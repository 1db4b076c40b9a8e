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

from typing import TYPE_CHECKING, Any

from ...hibernation.far import FarPlace
from ...ledger import FINAL_STATES, MachineRecord
from ..base import Machine
from ..target import Target, slug
from ..usability import Unusable
from .access import InstanceAccess
from .account import AWSAccount
from .credentials import credentials_status
from .instances import Instances
from .launch import InstanceLauncher
from .reach import InstanceReach
from .reaping import ReapCandidate, Reaper

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

#: The place's ``host`` of an instance: ``aws:<instance id>``.
PLACE_PREFIX = "aws:"


class AWSProvider(AWSAccount):
    """EC2 instances, launched on demand, stopped when idle, terminated when done.

    Configure as ``c.AWSProvider.*`` (the settings are :class:`~.account.AWSAccount`'s);
    credentials come from the usual AWS chain (environment, ``~/.aws``, instance role).
    Each concern is an object of its own, given the account: :attr:`access`,
    :attr:`instances`, :attr:`reach`, :attr:`launcher` and :attr:`reaper`.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.access = InstanceAccess(self)
        """The security group and key pair instances are launched with."""
        self.instances = Instances(self, self.access)
        """Instances' state: synced from EC2, stopped, started, terminated."""
        self.reach = InstanceReach(self, self.access, self.instances)
        """SSH to a running instance with its recorded host key."""
        self.launcher = InstanceLauncher(self, self.access, self.instances, self.reach)
        """RunInstances, and what a failed launch leaves: nothing."""
        self.reaper = Reaper(self, self.instances)
        """Our instances that nothing live claims."""

    # ------------------------------------------------------------------ the machines' API

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
        """Launch an instance for ``hardware`` (see :meth:`.launch.InstanceLauncher.launch`,
        which says what each keyword does)."""
        return await self.launcher.launch(
            hardware, name=name, region=region, spot=spot, steps=steps, connect=connect
        )

    async def sync(self, record: MachineRecord) -> MachineRecord:
        """Bring the ledger's state of a machine in line with EC2's."""
        return await self.instances.sync(record)

    async def sync_all(self) -> list[MachineRecord]:
        """Bring every machine the ledger has as not ended in line with EC2."""
        return await self.instances.sync_all()

    async def stop(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Stop an instance (its disk stays; it costs nothing per hour while stopped)."""
        return await self.instances.stop(record, detail)

    async def start(
        self, record: MachineRecord, steps: LaunchSteps | None = None, detail: str = "by the user"
    ) -> MachineRecord:
        """Start a stopped instance again (the budget is checked first)."""
        return await self.instances.start(record, steps, detail)

    async def terminate(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Terminate an instance: it and its disk are gone, and it costs nothing more."""
        return await self.instances.terminate(record, detail)

    async def reap_candidates(
        self, regions: list[str] | None = None, now: float | None = None
    ) -> list[ReapCandidate]:
        """Our instances that nothing live claims (see :class:`.reaping.Reaper`)."""
        return await self.reaper.reap_candidates(regions, now)

    async def reap(self, candidates: list[ReapCandidate]) -> list[str]:
        """Terminate the candidates this ledger launched; return their instance ids."""
        return await self.reaper.reap(candidates)

    async def terminate_overdue(
        self, regions: list[str] | None = None, now: float | None = None
    ) -> list[str]:
        """End machines stopped for longer than ``terminate_after_stopped``."""
        return await self.reaper.terminate_overdue(regions, now)

    # ------------------------------------------------------------------ the provider

    def targets(self) -> list[Target]:
        found: dict[str, Target] = {}
        for spec in self.machines:
            name = "aws-" + slug(str(spec.get("name") or spec.get("hardware", "")))
            try:
                entry = self.catalog.resolve(
                    str(spec.get("hardware", "")), str(spec.get("region") or self.region)
                )
            except ValueError as exc:
                self.log.warning("AWSProvider.machines: %s is not offered: %s", name, exc)
                continue
            found[name] = self.target_for(name, entry)
        if self.ledger is not None:
            for record in self.ledger.machines(provider=self.name):
                if record.state in FINAL_STATES or record.name in found:
                    continue
                try:
                    entry = self.catalog.entry(record.instance_type, record.region)
                except ValueError:
                    continue
                found[record.name] = self.target_for(record.name, entry)
        return list(found.values())

    def price_per_hour(self, target: Target) -> float | None:
        """The recorded price of the target's live machine, else the catalog's for its
        instance type, region and market; None when the catalog does not know it."""
        if self.ledger is not None and (record := self.live_machine(target.name)) is not None:
            return record.price_per_hour
        spec = self._spec(target.name) or {}
        instance_type, _, region = target.where.partition(" · ")
        try:
            entry = self.catalog.entry(instance_type, region or self.region)
        except ValueError:
            return None
        market = spec.get("market") or self.market
        return entry.price(spot=market == "spot")

    def usability(self) -> Unusable | None:
        """No credentials in the AWS chain, said in words; None when there are some."""
        return credentials_status()

    def _spec(self, name: str) -> dict[str, Any] | None:
        for spec in self.machines:
            if "aws-" + slug(str(spec.get("name") or spec.get("hardware", ""))) == name:
                return dict(spec)
        return None

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
            launched = await self.launch(
                hardware,
                name=target.name,
                region=spec.get("region"),
                spot=None if market is None else market == "spot",
                steps=steps,
                connect=False,
            )
        elif record.state in ("stopped", "stopping"):
            with steps.step("running"):
                if record.state == "stopping":
                    await self.instances.wait_state(record.machine_id, "stopped", steps)
                    record = self.require_ledger().get_machine(record.machine_id) or record
                await self.start(record, steps)
        elif record.state == "pending":
            with steps.step("running"):
                await self.instances.wait_state(record.machine_id, "running", steps)
        try:
            return await self.reach.connect(target, steps)
        except BaseException as exc:
            if launched is not None:  # launched for this kernel: leave nothing billing
                await self.launcher.abandon(launched.machine_id, exc)
            raise

    async def after_hibernation(self, target: Target) -> str | None:
        """Stop the instance its last kernel hibernated on: its disk stays, it costs
        nothing per hour, and the next cell starts it again."""
        record = self.live_machine(target.name)
        if record is None or record.state not in ("running", "pending"):
            return None
        stopped = await self.stop(record, "its last kernel hibernated")
        return f"instance {stopped.resource_id} stopped ({stopped.state})"

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """The instance's own disk: hibernating stops the instance, and a stopped
        instance keeps its disk. Not a spot instance's (the server's disk instead):
        its capacity can be taken back, ending it with its disk, and a stopped one may
        find no capacity to start again."""
        record = self.live_machine(target.name)
        if record is None or record.market == "spot":
            return None
        root = (target.root or "~/.jupyter-remote-hw").rstrip("/")
        return FarPlace(
            self.name,
            PLACE_PREFIX + record.resource_id,
            f"{root}/hibernated",
            f"the disk of instance {record.resource_id}",
        )

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """Never: the instance is stopped (starting it only to copy would bill it)."""
        raise OSError(
            f"{place.label} is read only by a kernel on that instance: wake the kernel on "
            "the target it hibernated on (if the instance was terminated, its state went "
            "with it)"
        )

    async def remove_hibernated(self, place: FarPlace) -> str:
        """Nothing to do while the instance is stopped: its disk goes when it is
        terminated."""
        return f"its saved state stays in {place.path} on {place.label} until it is terminated"
