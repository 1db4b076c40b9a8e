"""Errors of the ``aws`` provider, with what to try next."""

from __future__ import annotations

from typing import Any

from ...errors import UserError

#: EC2 error codes that mean "no capacity now" and what the user can change.
CAPACITY_CODES = {
    "InsufficientInstanceCapacity": "AWS has no {type} capacity in {where} right now",
    "InsufficientHostCapacity": "AWS has no host capacity for {type} in {where} right now",
    "InsufficientReservedInstanceCapacity": "no reserved capacity for {type} in {where}",
    "SpotMaxPriceTooLow": "the spot price of {type} in {where} is above the maximum price",
    "InsufficientCapacityOnOutpost": "the Outpost has no {type} capacity",
}
#: EC2 error codes that mean "your account's quota is reached".
QUOTA_CODES = {
    "InstanceLimitExceeded": "the account's limit of {type} instances in {where} is reached",
    "VcpuLimitExceeded": "the account's vCPU quota for {type}'s family in {where} is reached",
    "MaxSpotInstanceCountExceeded": "the account's spot instance quota in {where} is reached",
    "PendingVerification": "the account is still being verified for {where}",
}
#: EC2 error codes that mean the credentials are missing or wrong.
AUTH_CODES = {
    "AuthFailure",
    "UnauthorizedOperation",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "RequestExpired",
}


class AWSError(UserError, RuntimeError):
    """An AWS call failed; the message says which step, why, and what to try.

    Attributes:
        code: The AWS error code (``InsufficientInstanceCapacity``), or ``""``.
        kind: ``capacity``, ``quota``, ``credentials``, ``config`` or ``aws``.
    """

    def __init__(self, message: str, code: str = "", kind: str = "aws") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError, else ``""``."""
    response: Any = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def launch_error(
    exc: BaseException,
    instance_type: str,
    region: str,
    market: str,
    alternatives: list[str],
    other_regions: list[str],
) -> AWSError:
    """Turn a RunInstances failure into an error that suggests what to change.

    Args:
        exc: The botocore error.
        instance_type: What was asked for.
        region: Where.
        market: ``spot`` or ``on-demand``.
        alternatives: Other instance types with the same GPU, cheapest first.
        other_regions: Other regions that offer the type.
    """
    code = error_code(exc)
    where = region
    other_market = "on-demand" if market == "spot" else "spot"
    tries = []
    if other_regions:
        tries.append(f"another region ({', '.join(other_regions[:3])}: --region)")
    if alternatives:
        tries.append(f"another type ({', '.join(alternatives[:3])})")
    tries.append(f"{other_market} instead of {market} (--{other_market})")
    suggestion = "Try " + ", or ".join(tries) + "."
    if code in CAPACITY_CODES:
        reason = CAPACITY_CODES[code].format(type=instance_type, where=where)
        return AWSError(
            f"launch {instance_type} ({market}) in {region}: {reason} ({code}). {suggestion}",
            code,
            "capacity",
        )
    if code in QUOTA_CODES:
        reason = QUOTA_CODES[code].format(type=instance_type, where=where)
        return AWSError(
            f"launch {instance_type} ({market}) in {region}: {reason} ({code}). "
            "Ask for a higher quota in the Service Quotas console (EC2 "
            f"'Running On-Demand' or 'All Spot' instance requests), or: {suggestion}",
            code,
            "quota",
        )
    if code in AUTH_CODES:
        return credentials_error(exc, f"launch {instance_type} in {region}")
    return AWSError(f"launch {instance_type} in {region}: {exc}", code)


def credentials_error(exc: BaseException, step: str) -> AWSError:
    """The error for missing or refused AWS credentials."""
    return AWSError(
        f"{step}: AWS refused the credentials or found none ({exc}). Configure them as for "
        "the AWS CLI (`aws configure`, AWS_PROFILE, or an instance role), then try again.",
        error_code(exc),
        "credentials",
    )
