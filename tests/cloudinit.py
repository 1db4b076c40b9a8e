"""cloud-init's part of an instance's first boot, for moto's instances.

moto runs no instance. A loopback sshd stands in for every instance (the
provider's ``ssh_endpoint_redirect``), and when RunInstances returns, whoever
made the call, the user data that EC2 (moto) now holds for the instance is read
back and its cloud-config applied as cloud-init's ``ssh_keys`` would: the
ed25519 host key it gives becomes the sshd's only host key. So a test connects
to an "instance" whose host key came from the user data the provider sent, and
nothing else.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.handlers
import pytest
import yaml

from .motoserver import client
from .testhosts import SSHTestHost, free_port, loopback_host


class InstanceHost:
    """The sshd standing in for moto's instances, booted with their user data's host key.

    Args:
        host: The loopback sshd.
        endpoint: moto's endpoint.
    """

    def __init__(self, host: SSHTestHost, endpoint: str) -> None:
        self.host = host
        self.endpoint = endpoint
        self.booted: list[str] = []

    @property
    def redirect(self) -> str:
        """The ``ssh_endpoint_redirect`` that reaches it."""
        return f"127.0.0.1:{self.host.port}"

    def cloud_config(self, instance_id: str) -> dict[str, Any]:
        """The instance's user data as cloud-init reads it ({} when there is none)."""
        reply = client(self.endpoint, "ec2").describe_instance_attribute(
            InstanceId=instance_id, Attribute="userData"
        )
        value = reply.get("UserData", {}).get("Value")
        if not value:
            return {}
        text = base64.b64decode(value).decode()
        if not text.startswith("#cloud-config\n"):
            return {}
        return dict(yaml.safe_load(text) or {})

    def boot(self, instance_id: str) -> None:
        """First boot of ``instance_id``: its ``ssh_keys`` become sshd's host key."""
        keys = self.cloud_config(instance_id).get("ssh_keys") or {}
        if "ed25519_private" not in keys:
            return
        self.host.stop()
        fd = os.open(self.host.host_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(keys["ed25519_private"])
        Path(f"{self.host.host_key}.pub").write_text(keys["ed25519_public"] + "\n")
        self.host.start()
        self.booted.append(instance_id)

    def move(self) -> str:
        """The instance comes back at another address (as after a stop and start), with
        the same host key; its new ``ssh_endpoint_redirect``."""
        self.host.stop()
        config = self.host.root / "sshd_config"
        port = free_port()
        config.write_text(
            config.read_text().replace(f"Port {self.host.port}\n", f"Port {port}\n", 1)
        )
        self.host.port = port
        self.host.start()
        return self.redirect

    def _after_run(self, parsed: dict[str, Any], **_kwargs: Any) -> None:
        for instance in parsed.get("Instances", []):
            self.boot(str(instance["InstanceId"]))


@pytest.fixture
def instance_host(
    short_tmp: Path, aws_env: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[InstanceHost]:
    """An sshd that every boto3 session's RunInstances boots with the user data's host key."""
    with loopback_host(short_tmp / "instance", alias="instance") as host:
        made = InstanceHost(host, aws_env)
        monkeypatch.setattr(
            botocore.handlers,
            "BUILTIN_HANDLERS",
            [*botocore.handlers.BUILTIN_HANDLERS, ("after-call.ec2.RunInstances", made._after_run)],
        )
        yield made
