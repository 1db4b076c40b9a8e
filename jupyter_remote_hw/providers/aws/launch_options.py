"""How our instances are launched and ended, beyond the plain RunInstances call.

- The metadata service answers only IMDSv2 (session token) requests, which a
  forwarded or server-side request forgery cannot make.
- The root volume is encrypted (with the account's default EBS key), whatever
  the AMI's snapshot is, and goes with the instance.
- A spot instance is launched from a one-time request unless it must be able to
  stop (``shutdown_behavior = "stop"`` needs a persistent request). Ending an
  instance cancels its spot request first, so that a persistent request never
  launches a replacement that nothing tracks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .errors import AWSError

Call = Callable[..., Awaitable[Any]]
"""How boto3 calls are made: ``await call(step, fn, **kwargs)`` (in a thread)."""

METADATA_OPTIONS = {"HttpTokens": "required", "HttpEndpoint": "enabled"}
"""IMDSv2 only; the endpoint stays on (the instance role's credentials come from it)."""


async def root_volume(call: Call, ec2: Any, ami: str, size_gib: float) -> dict[str, Any]:
    """The block device mapping of an encrypted root volume for ``ami``.

    Args:
        call: Runs a boto3 call in a thread.
        ec2: The region's EC2 client.
        ami: The image.
        size_gib: The volume's size; 0: the image's.

    Raises:
        AWSError: The image cannot be described or has no EBS root volume.
    """
    images = (await call("describe the AMI", ec2.describe_images, ImageIds=[ami]))["Images"]
    if not images:
        raise AWSError(f"the AMI {ami} cannot be described", kind="config")
    image = images[0]
    device = str(image.get("RootDeviceName") or "")
    mapped = next(
        (m for m in image.get("BlockDeviceMappings", []) or [] if m.get("DeviceName") == device),
        None,
    )
    if (
        not device
        or image.get("RootDeviceType", "ebs") != "ebs"
        or mapped is None
        or "Ebs" not in mapped
    ):
        raise AWSError(
            f"the AMI {ami} has no EBS root volume, so it cannot be encrypted; "
            "set c.AWSProvider.ami_ssm_parameter to an EBS-backed AMI",
            kind="config",
        )
    ebs: dict[str, Any] = {
        "Encrypted": True,
        "DeleteOnTermination": True,
        "VolumeSize": int(size_gib or mapped["Ebs"].get("VolumeSize") or 0),
    }
    if not ebs["VolumeSize"]:
        del ebs["VolumeSize"]
    if size_gib:
        ebs["VolumeType"] = "gp3"
    return {"DeviceName": device, "Ebs": ebs}


def spot_options(persistent: bool) -> dict[str, Any]:
    """``InstanceMarketOptions`` of a spot launch: one-time unless it must stop and start."""
    return {
        "MarketType": "spot",
        "SpotOptions": {
            "SpotInstanceType": "persistent" if persistent else "one-time",
            "InstanceInterruptionBehavior": "stop" if persistent else "terminate",
        },
    }


async def cancel_spot_request(call: Call, ec2: Any, instance_id: str) -> str | None:
    """Cancel the spot request that launched ``instance_id``; return its id, or None.

    EC2 names the request on the instance (``SpotInstanceRequestId``); where it
    does not (moto), the requests are searched for the instance.
    """
    from botocore.exceptions import ClientError

    try:
        reply = await call(
            "describe the instance", ec2.describe_instances, InstanceIds=[instance_id]
        )
    except ClientError:
        return None
    instance: dict[str, Any] = next(
        (i for r in reply.get("Reservations", []) for i in r.get("Instances", [])), {}
    )
    request = instance.get("SpotInstanceRequestId")
    if not request and instance.get("InstanceLifecycle") == "spot":
        requests = (await call("find the spot request", ec2.describe_spot_instance_requests)).get(
            "SpotInstanceRequests", []
        )
        request = next(
            (
                r["SpotInstanceRequestId"]
                for r in requests
                if r.get("InstanceId") == instance_id
                and r.get("State") not in ("cancelled", "closed")
            ),
            None,
        )
    if not request:
        return None
    await call(
        "cancel the spot request",
        ec2.cancel_spot_instance_requests,
        SpotInstanceRequestIds=[request],
    )
    return str(request)
