"""The security group and key pair an instance is launched with."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ..target import slug
from .account import AWSAccount
from .errors import AWSError, error_code
from .key_pair import checked_key_pair, user_public_key
from .network import user_security_group
from .tags import CREATED_BY, CREATED_BY_TAG, OWNER_TAG


class InstanceAccess:
    """How an instance lets us in: our security group (SSH from the configured
    addresses only) and the key pair it is launched with.

    Args:
        account: The provider's settings and clients.
    """

    def __init__(self, account: AWSAccount) -> None:
        self.account = account

    async def network(self, region: str) -> dict[str, Any]:
        """The security group (and subnet) to launch with; ours is created when needed."""
        a = self.account
        network: dict[str, Any] = {"subnet_id": a.subnet_id} if a.subnet_id else {}
        if a.security_group_id:
            return {**network, "security_group_id": a.security_group_id}
        if not a.ssh_cidr:
            raise AWSError(
                "no SSH access is configured, so the instance could not be reached: set "
                "c.AWSProvider.ssh_cidr to the addresses you connect from (e.g. "
                "'203.0.113.7/32'; `curl https://checkip.amazonaws.com` tells yours), or "
                "c.AWSProvider.security_group_id to a group of your own that allows SSH",
                kind="config",
            )
        group_id = await user_security_group(
            a.call,
            a.client("ec2", region),
            a.owner,
            a.ssh_cidr,
            (CREATED_BY_TAG, CREATED_BY),
            OWNER_TAG,
            a.log,
        )
        return {**network, "security_group_id": group_id}

    def public_key(self) -> str:
        """The SSH public key put on instances."""
        a = self.account
        path = Path(a.public_key_file).expanduser()
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
        a = self.account
        if a.identity_file:
            return Path(a.identity_file).expanduser()
        public = Path(a.public_key_file).expanduser()
        return public.with_suffix("") if public.suffix == ".pub" else public

    async def key_pair(self, region: str) -> str:
        """The key pair to launch with, checked against the local public key."""
        from botocore.exceptions import ClientError

        a = self.account
        ec2 = a.client("ec2", region)
        if a.key_name:
            local = user_public_key(a.identity_file, a.public_key_file)
            await checked_key_pair(a.call, ec2, a.key_name, region, local, a.log)
            return a.key_name
        material = self.public_key()
        digest = (
            base64.b32encode(material.split()[1][-16:].encode()).decode()[:8].lower()
            if len(material.split()) > 1
            else "key"
        )
        name = f"jupyter-remote-hw-{slug(a.owner)}-{digest}"
        try:
            await checked_key_pair(
                a.call,
                ec2,
                name,
                region,
                (material, a.public_key_file),
                a.log,
                required=True,
            )
            return name
        except ClientError as exc:
            if error_code(exc) != "InvalidKeyPair.NotFound":
                raise
        await a.call(
            "import the SSH key",
            ec2.import_key_pair,
            KeyName=name,
            PublicKeyMaterial=material.encode(),
            TagSpecifications=[
                {
                    "ResourceType": "key-pair",
                    "Tags": [
                        {"Key": CREATED_BY_TAG, "Value": CREATED_BY},
                        {"Key": OWNER_TAG, "Value": a.owner},
                    ],
                }
            ],
        )
        return name


__all__ = ["InstanceAccess"]
