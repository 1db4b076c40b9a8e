"""The security group of a user's instances: one per user, SSH from the current address only.

The group is named after its owner (``jupyter-remote-hw-ssh-<owner>``) and tagged
as ours. Each launch and start makes its ingress exactly port 22 from
``c.AWSProvider.ssh_cidr``: every other rule (an address used before, another
port, another group) is revoked, so the group never accumulates addresses.
A group of that name that is not tagged as ours for this owner is refused,
never used nor changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..target import slug
from .errors import AWSError, error_code

Call = Callable[..., Awaitable[Any]]
"""How boto3 calls are made: ``await call(step, fn, **kwargs)`` (in a thread)."""

GROUP_PREFIX = "jupyter-remote-hw-ssh-"


def group_name(owner: str) -> str:
    """The name of ``owner``'s security group."""
    return GROUP_PREFIX + slug(owner)[:200]


def _tags(item: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", []) or []}


def _stale(permission: dict[str, Any], cidr: str) -> dict[str, Any] | None:
    """What of ``permission`` to revoke so that only SSH from ``cidr`` stays, or None."""
    ssh = (
        permission.get("IpProtocol") == "tcp"
        and permission.get("FromPort") == 22
        and permission.get("ToPort") == 22
    )
    revoke: dict[str, Any] = {
        k: permission[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in permission
    }
    ranges = [
        {"CidrIp": r["CidrIp"]}
        for r in permission.get("IpRanges", []) or []
        if not (ssh and r.get("CidrIp") == cidr)
    ]
    lists = {
        "IpRanges": ranges,
        "Ipv6Ranges": [{"CidrIpv6": r["CidrIpv6"]} for r in permission.get("Ipv6Ranges") or []],
        "PrefixListIds": [
            {"PrefixListId": r["PrefixListId"]} for r in permission.get("PrefixListIds") or []
        ],
        "UserIdGroupPairs": [
            {k: r[k] for k in ("GroupId", "UserId") if k in r}
            for r in permission.get("UserIdGroupPairs") or []
        ],
    }
    lists = {k: v for k, v in lists.items() if v}
    return {**revoke, **lists} if lists else None


async def user_security_group(
    call: Call,
    ec2: Any,
    owner: str,
    cidr: str,
    created_by: tuple[str, str],
    owner_tag: str,
    log: logging.Logger,
) -> str:
    """The id of ``owner``'s group, created when missing, allowing SSH from ``cidr`` only.

    Args:
        call: Runs a boto3 call in a thread.
        ec2: The region's EC2 client.
        owner: The owner (``user@host``).
        cidr: The one address range allowed to reach port 22.
        created_by: The tag (key, value) that marks what we created.
        owner_tag: The tag key naming the owner.
        log: Where stale rules that are revoked are logged.

    Raises:
        AWSError: A group of that name exists but is not ours.
    """
    from botocore.exceptions import ClientError

    name = group_name(owner)
    groups = (
        await call(
            "find the security group",
            ec2.describe_security_groups,
            Filters=[{"Name": "group-name", "Values": [name]}],
        )
    )["SecurityGroups"]
    if groups:
        group = groups[0]
        tags = _tags(group)
        if tags.get(created_by[0]) != created_by[1] or tags.get(owner_tag) != owner:
            raise AWSError(
                f"the security group {name} ({group['GroupId']}) is not tagged as "
                f"jupyter-remote-hw's for {owner}, so it is neither used nor changed: delete "
                "or rename it if it is yours, or set c.AWSProvider.security_group_id",
                kind="config",
            )
    else:
        created = await call(
            "create the security group",
            ec2.create_security_group,
            GroupName=name,
            Description=f"jupyter-remote-hw: SSH for {owner} from the current address only",
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [
                        {"Key": created_by[0], "Value": created_by[1]},
                        {"Key": owner_tag, "Value": owner},
                    ],
                }
            ],
        )
        group = {"GroupId": created["GroupId"], "IpPermissions": []}
    group_id = str(group["GroupId"])
    stale = [p for p in (_stale(p, cidr) for p in group.get("IpPermissions", []) or []) if p]
    if stale:
        log.info(
            "security group %s: revoking rules other than SSH from %s: %s", group_id, cidr, stale
        )
        await call(
            "revoke old addresses in the security group",
            ec2.revoke_security_group_ingress,
            GroupId=group_id,
            IpPermissions=stale,
        )
    try:
        await call(
            "open SSH in the security group",
            ec2.authorize_security_group_ingress,
            GroupId=group_id,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 22,
                    "ToPort": 22,
                    "IpRanges": [{"CidrIp": cidr, "Description": "jupyter-remote-hw"}],
                }
            ],
        )
    except ClientError as exc:
        if error_code(exc) != "InvalidPermission.Duplicate":
            raise
    return group_id
