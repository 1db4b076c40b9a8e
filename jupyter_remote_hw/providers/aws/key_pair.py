"""The EC2 key pair of a user's instances, checked against the local public key.

An instance's login key comes from its EC2 key pair. A key pair found by name
is used only when the fingerprint EC2 reports is the local key's, so a key pair
planted under our name (or a stale one) never puts someone else's key on an
instance.

EC2 reports (docs: "Verify the fingerprint of your key pair"): for an imported
RSA key, the MD5 of its DER public key (``aa:bb:...``); for an ED25519 key, the
base64 SHA-256 of its OpenSSH key blob, as ``ssh-keygen -l`` prints it (EC2
may add ``=`` padding); for an RSA key pair EC2 created, the SHA-1 of its
private key, which the public key cannot give (then the public key material
EC2 returns is compared instead). moto gives the SHA-256 of the DER public key
as hex for ED25519; that form is accepted too, being as binding.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .errors import AWSError

Call = Callable[..., Awaitable[Any]]
"""How boto3 calls are made: ``await call(step, fn, **kwargs)`` (in a thread)."""


def _hex(digest: bytes) -> str:
    return ":".join(f"{b:02x}" for b in digest)


def _normal(fingerprint: str) -> str:
    """A fingerprint without its ``SHA256:``/``MD5:`` prefix and ``=`` padding; hex lowercased."""
    text = fingerprint.strip()
    for prefix in ("SHA256:", "MD5:"):
        text = text.removeprefix(prefix)
    text = text.rstrip("=")
    return text.lower() if ":" in text else text


def ec2_fingerprints(public: str) -> set[str]:
    """Every form in which EC2 may report the fingerprint of the public key line ``public``.

    Raises:
        ValueError: ``public`` is not an RSA or ED25519 OpenSSH public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

    parts = public.split()
    if len(parts) < 2:
        raise ValueError("not an OpenSSH public key line")
    blob = base64.b64decode(parts[1])
    key = serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if isinstance(key, rsa.RSAPublicKey):
        return {_hex(hashlib.md5(der, usedforsecurity=False).digest())}
    if isinstance(key, ed25519.Ed25519PublicKey):
        return {
            _normal(base64.b64encode(hashlib.sha256(blob).digest()).decode()),
            _hex(hashlib.sha256(der).digest()),
        }
    raise ValueError(f"EC2 key pairs are RSA or ED25519, not {parts[0]}")


def check_key_pair(
    name: str, region: str, reported: dict[str, object], public: str, source: str
) -> bool:
    """Whether EC2's key pair ``name`` is the local key ``public`` (read from ``source``).

    Args:
        name: The key pair's name.
        region: Its region.
        reported: The key pair as ``describe_key_pairs`` describes it.
        public: The local OpenSSH public key line.
        source: Where ``public`` was read, for the error.

    Returns:
        True when it matches; False when EC2 gave nothing to compare (an RSA key
        pair EC2 created, without its public key material).

    Raises:
        AWSError: It is another key.
    """
    ours = " ".join(public.split()[:2])
    material = str(reported.get("PublicKey") or "")
    fingerprint = str(reported.get("KeyFingerprint") or "")
    expected = ec2_fingerprints(ours)
    if material:
        matches = " ".join(material.split()[:2]) == ours
    elif not fingerprint:
        return False
    else:
        matches = _normal(fingerprint) in expected
        if not matches and ours.startswith("ssh-rsa") and len(_normal(fingerprint)) == 59:
            return False  # SHA-1 of a private key EC2 made: the public key cannot give it
    if not matches:
        raise AWSError(
            f"the EC2 key pair {name} in {region} is not your key {source}: EC2 reports "
            f"fingerprint {fingerprint or '(none)'}, yours is {' or '.join(sorted(expected))}. "
            "Instances launched with it would let its owner log in, so nothing was launched. "
            f"If it is stale, delete it (`aws ec2 delete-key-pair --region {region} "
            f"--key-name {name}`) and launch again; or set c.AWSProvider.key_name to a key "
            "pair of yours.",
            kind="config",
        )
    return True


def user_public_key(identity_file: str, public_key_file: str) -> tuple[str, str] | None:
    """The local public key of a configured ``key_name``, and where it was read: beside
    ``identity_file``, else ``public_key_file`` when no identity file is set; None when
    it cannot be read."""
    path = Path(f"{identity_file}.pub" if identity_file else public_key_file).expanduser()
    try:
        return path.read_text().strip(), str(path)
    except OSError:
        return None


async def checked_key_pair(
    call: Call,
    ec2: Any,
    name: str,
    region: str,
    local: tuple[str, str] | None,
    log: logging.Logger,
    required: bool = False,
) -> None:
    """Refuse the key pair ``name`` unless it is the local key.

    Args:
        call: Runs a boto3 call in a thread.
        ec2: The region's EC2 client.
        name: The key pair.
        region: Its region.
        local: The local public key line and where it was read; None: not known here
            (a warning is logged).
        log: Where an unchecked key pair is logged.
        required: Refuse a key pair that cannot be compared (ours), rather than warn.

    Raises:
        AWSError: It is another key, or (``required``) it cannot be compared.
        botocore.exceptions.ClientError: It does not exist (``InvalidKeyPair.NotFound``).
    """
    reply = await call(
        "find the key pair", ec2.describe_key_pairs, KeyNames=[name], IncludePublicKey=True
    )
    reported = dict(reply["KeyPairs"][0])
    if local is None:
        log.warning(
            "key pair %s in %s not checked: no public key here to compare "
            "(c.AWSProvider.identity_file + '.pub')",
            name,
            region,
        )
        return
    try:
        checked = check_key_pair(name, region, reported, local[0], local[1])
    except ValueError as exc:
        raise AWSError(f"{local[1]}: {exc}", kind="config") from None
    if checked:
        return
    if required:
        raise AWSError(
            f"the EC2 key pair {name} in {region} cannot be compared with "
            f"{local[1]}: delete it so that it is imported again",
            kind="config",
        )
    log.warning(
        "key pair %s in %s not checked: EC2 reports a fingerprint that the public key cannot give",
        name,
        region,
    )
