"""Reaping: our instances with no live owner, and stopped ones past the terminate timer."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ...ledger import FINAL_STATES, MachineRecord
from .account import AWSAccount
from .instances import Instances
from .tags import CREATED_BY, CREATED_BY_TAG, LEDGER_TAG, OWNER_TAG, TARGET_TAG

LIVE_INSTANCE_STATES = ["pending", "running", "stopping", "stopped"]


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


class Reaper:
    """Finding our instances that nothing live claims, and ending those this ledger launched.

    Args:
        account: The provider's settings and clients.
        instances: Instances' state (ending one).
    """

    def __init__(self, account: AWSAccount, instances: Instances) -> None:
        self.account = account
        self.instances = instances

    async def owned_instances(self, region: str | None = None) -> list[dict[str, Any]]:
        """Live instances tagged as created by us for :attr:`owner`."""
        ec2 = self.account.client("ec2", region)
        reply = await self.account.call(
            "list our instances",
            ec2.describe_instances,
            Filters=[
                {"Name": f"tag:{CREATED_BY_TAG}", "Values": [CREATED_BY]},
                {"Name": f"tag:{OWNER_TAG}", "Values": [self.account.owner]},
                {"Name": "instance-state-name", "Values": LIVE_INSTANCE_STATES},
            ],
        )
        return [dict(i) for r in reply.get("Reservations", []) for i in r.get("Instances", [])]

    async def reap_candidates(
        self, regions: list[str] | None = None, now: float | None = None
    ) -> list[ReapCandidate]:
        """Our instances that nothing live claims, and stopped ones past the terminate timer.

        An instance is reaped when its ledger row is missing or ended, when no
        client has sent a heartbeat for :attr:`reap_after` seconds while it
        runs, or when it has been stopped for :attr:`terminate_after_stopped`.
        """
        now = time.time() if now is None else now
        found: list[ReapCandidate] = []
        for region in regions or [self.account.region]:
            for instance in await self.owned_instances(region):
                tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                machine_id = tags.get(LEDGER_TAG, "")
                instance_id = str(instance["InstanceId"])
                record = self._launched(machine_id, instance_id, region, tags)
                state = str(instance["State"]["Name"])
                reason = ""
                if record is None:
                    reason = (
                        "tagged as yours but not launched from this ledger: not "
                        "terminated; check it and end it yourself (`aws ec2 "
                        f"terminate-instances --region {region} --instance-ids "
                        f"{instance_id}`)"
                    )
                elif record.state in FINAL_STATES:
                    reason = f"the ledger has it {record.state}"
                elif state in ("pending", "running"):
                    seen = record.last_seen or record.created
                    if now - seen > self.account.reap_after > 0:
                        reason = f"no client for {(now - seen) / 60:.0f} min"
                elif (
                    state == "stopped"
                    and now - record.updated > self.account.terminate_after_stopped > 0
                ):
                    reason = f"stopped for {(now - record.updated) / 3600:.1f} h"
                if not reason:
                    continue
                found.append(
                    ReapCandidate(
                        instance_id=instance_id,
                        region=region,
                        state=state,
                        instance_type=str(instance.get("InstanceType", "")),
                        machine_id=machine_id,
                        name=tags.get(TARGET_TAG, ""),
                        reason=reason,
                        cost=record.cost(now)
                        if record is not None
                        else self._estimate(instance, region, now),
                        launched=record is not None,
                    )
                )
        return found

    def _launched(
        self, machine_id: str, instance_id: str, region: str, tags: dict[str, str]
    ) -> MachineRecord | None:
        """The ledger's row of the machine that launched ``instance_id``, when the
        instance's tags name that row and our owner; else None."""
        record = self.account.require_ledger().get_machine(machine_id) if machine_id else None
        if (
            record is None
            or record.provider != self.account.name
            or record.resource_id != instance_id
            or record.region != region
            or tags.get(OWNER_TAG) != record.owner
            or tags.get(CREATED_BY_TAG) != CREATED_BY
        ):
            return None
        return record

    def _estimate(self, instance: dict[str, Any], region: str, now: float) -> float:
        """Price x time since launch, for an instance the ledger does not know."""
        launched = instance.get("LaunchTime")
        if launched is None or instance["State"]["Name"] not in ("pending", "running"):
            return 0.0
        try:
            price = self.account.catalog.entry(str(instance["InstanceType"]), region).price() or 0.0
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
        ledger = self.account.require_ledger()
        for candidate in candidates:
            record = ledger.get_machine(candidate.machine_id) if candidate.machine_id else None
            if (
                not candidate.launched
                or record is None
                or record.provider != self.account.name
                or record.resource_id != candidate.instance_id
            ):
                self.account.log.warning(
                    "reap: %s in %s is not one this ledger launched: left running",
                    candidate.instance_id,
                    candidate.region,
                )
                continue
            await self.instances.end_instance(record, candidate.instance_id)
            if record.state not in FINAL_STATES:
                await self.account.transport_close(record)
                ledger.set_machine_state(
                    record.machine_id, "terminated", f"reaped: {candidate.reason}"
                )
            ended.append(candidate.instance_id)
        return ended

    async def terminate_overdue(
        self, regions: list[str] | None = None, now: float | None = None
    ) -> list[str]:
        """The terminate timer: end machines stopped for longer than
        :attr:`terminate_after_stopped`; return their instance ids.

        For a periodic call from the server, and run by ``reap``.
        """
        overdue = [
            c
            for c in await self.reap_candidates(regions, now)
            if c.reason.startswith("stopped for")
        ]
        return await self.reap(overdue)


__all__ = ["LIVE_INSTANCE_STATES", "ReapCandidate", "Reaper"]
