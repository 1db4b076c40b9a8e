"""An instance's state in EC2 and in the ledger: sync, stop, start, terminate."""

from __future__ import annotations

import asyncio
import re
import time
from typing import TYPE_CHECKING, Any

from ...ledger import FINAL_STATES, MachineRecord
from .access import InstanceAccess
from .account import AWSAccount
from .errors import AWSError, error_code
from .launch_options import cancel_spot_request

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps


_TRANSITION_TIME = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")


def transition_time(reason: str | None) -> float | None:
    """When EC2 says a state change happened (``User initiated (2024-05-01 10:00:00 GMT)``)."""
    found = _TRANSITION_TIME.search(reason or "")
    if not found:
        return None
    import calendar

    return float(calendar.timegm(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")))


class Instances:
    """An instance's state: read from EC2 into the ledger, stopped, started, terminated.

    Args:
        account: The provider's settings and clients.
        access: How an instance lets us in (a start asks for SSH from here again).
    """

    def __init__(self, account: AWSAccount, access: InstanceAccess) -> None:
        self.account = account
        self.access = access

    async def describe(self, record: MachineRecord) -> dict[str, Any] | None:
        """The instance as EC2 describes it, or None when EC2 no longer knows it."""
        from botocore.exceptions import ClientError

        try:
            reply = await self.account.call(
                "describe the instance",
                self.account.client("ec2", record.region).describe_instances,
                InstanceIds=[record.resource_id],
            )
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
            at = (
                transition_time(instance.get("StateTransitionReason"))
                if instance is not None and state in ("stopping", "stopped")
                else None
            )
            if at is not None and (at > time.time() or at < (record.running_since or 0)):
                at = None
            detail = str(instance.get("StateTransitionReason") or "") if instance else ""
            if state in ("stopping", "stopped", "terminated"):
                # From running, not by us (our stop and terminate record their own
                # states first): its kernels are dead, and say so to their clients.
                outside = (detail or "not by this server") if record.state == "running" else ""
                await self.account.transport_close(record, state, outside)
            return self.account.require_ledger().set_machine_state(
                record.machine_id, state, f"reported by EC2 {detail}".strip(), at=at
            )
        return record

    async def sync_all(self) -> list[MachineRecord]:
        """Bring every machine the ledger has as not ended in line with EC2 (for ``list``
        and for a periodic call from the server)."""
        synced = []
        for record in self.account.require_ledger().machines(provider=self.account.name):
            if record.state not in FINAL_STATES and record.resource_id:
                synced.append(await self.sync(record))
        return synced

    async def wait_state(self, machine_id: str, wanted: str, steps: LaunchSteps) -> None:
        ledger = self.account.require_ledger()
        deadline = time.monotonic() + self.account.boot_timeout
        while True:
            record = ledger.get_machine(machine_id)
            assert record is not None
            record = await self.sync(record)
            if record.state == wanted:
                return
            if record.state in FINAL_STATES:
                raise AWSError(
                    f"{record.resource_id} ended ({record.state}) before it was "
                    f"{wanted}; its console output may say why"
                )
            if time.monotonic() > deadline:
                raise AWSError(
                    f"{record.resource_id} is still {record.state} after "
                    f"{self.account.boot_timeout:.0f} s (c.AWSProvider.boot_timeout)"
                )
            steps.note(f"{record.resource_id} is {record.state}")
            await asyncio.sleep(self.account.poll_interval)

    async def stop(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Stop an instance (its disk stays; it costs nothing per hour while stopped)."""
        reply = await self.account.call(
            "stop the instance",
            self.account.client("ec2", record.region).stop_instances,
            InstanceIds=[record.resource_id],
        )
        state = str(reply["StoppingInstances"][0]["CurrentState"]["Name"])
        await self.account.transport_close(record, "stopped")
        return self.account.require_ledger().set_machine_state(record.machine_id, state, detail)

    async def start(
        self, record: MachineRecord, steps: LaunchSteps | None = None, detail: str = "by the user"
    ) -> MachineRecord:
        """Start a stopped instance again (the budget is checked first)."""
        from ..launch_steps import LaunchSteps

        ledger = self.account.require_ledger()
        self.account.budget.check(
            f"{record.instance_type} ({record.market}) in {record.region}",
            record.price_per_hour,
            ledger,
            exclude=record.machine_id,
        )
        if (
            record.info.get("security_group_id")
            and not self.account.security_group_id
            and self.account.ssh_cidr
        ):
            await self.access.network(record.region)  # SSH from the current address only
        await self.account.call(
            "start the instance",
            self.account.client("ec2", record.region).start_instances,
            InstanceIds=[record.resource_id],
        )
        ledger.set_machine_state(record.machine_id, "pending", detail)
        ledger.touch_machine(record.machine_id)
        await self.wait_state(
            record.machine_id, "running", steps or LaunchSteps(record.name, "-", self.account.log)
        )
        updated = ledger.get_machine(record.machine_id)
        assert updated is not None
        return updated

    async def end_instance(self, record: MachineRecord, instance_id: str) -> None:
        """Terminate an instance we launched, cancelling its spot request first."""
        ec2 = self.account.client("ec2", record.region)
        if record.market == "spot":
            request = await cancel_spot_request(self.account.call, ec2, instance_id)
            if request:
                self.account.require_ledger().note_machine(
                    record.machine_id, "spot request cancelled", request
                )
        await self.account.call(
            "terminate the instance", ec2.terminate_instances, InstanceIds=[instance_id]
        )

    async def terminate(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Terminate an instance: it and its disk are gone, and it costs nothing more."""
        ledger = self.account.require_ledger()
        if record.resource_id:
            await self.end_instance(record, record.resource_id)
        await self.account.transport_close(record)
        return ledger.set_machine_state(record.machine_id, "terminated", detail)


__all__ = ["Instances", "transition_time"]
