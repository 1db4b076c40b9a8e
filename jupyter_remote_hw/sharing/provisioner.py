"""SharedKernelProvisioner: a kernel in the teammate's own Jupyter attached to a shared one.

Selected by a kernelspec that :func:`write_kernelspec` writes for a share
file. Launching attaches (never starts a kernel); shutting down or
restarting only detaches (the shutdown request is answered on this side);
signals are never sent to the owner's kernel. When the share is revoked or
expires, the host drops the connection and the kernel reads as ended.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any, cast

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from jupyter_core.paths import jupyter_data_dir
from traitlets import Unicode

from .join import Attachment
from .roles import COLLABORATOR, UNREACHABLE, ShareError
from .sharefile import ShareFile

PROVISIONER_NAME = "remote-hw-share"
"""The entry point name of :class:`SharedKernelProvisioner`."""
KERNELSPEC_PREFIX = "remote-share-"
"""Kernelspec names of joined shares (not ``remote-hw-``, which names hardware targets)."""


class SharedKernelProvisioner(KernelProvisionerBase):
    """Attaches to the kernel a share file names, through the teammate's own key."""

    share_file = Unicode("", config=True, help="The share file to join.")
    identity = Unicode(
        "",
        config=True,
        help="The private key whose .pub the owner shared with (empty: the "
        "usual SSH keys and agent).",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.attachment: Attachment | None = None
        self.ended_reason = ""
        """Why the host dropped this side, once it has."""

    @property
    def has_process(self) -> bool:
        """Whether this side is attached."""
        return self.attachment is not None

    async def poll(self) -> int | None:
        """None while attached, or while a dropped connection cannot be made again yet
        (a cut link: it is tried again at each poll); 0 once detached, or once the host
        refuses this side (the share was revoked or has expired)."""
        attachment = self.attachment
        if attachment is None or attachment.detached.is_set():
            return 0
        if attachment.conn is None or attachment.conn.is_closed():
            try:
                await attachment.reopen()
            except ShareError as exc:
                if exc.kind == UNREACHABLE:
                    self.log.debug("shared kernel: not attached again yet: %s", exc)
                    return None  # the link is down: the share may still be good
                self._ended(attachment)
                await attachment.close()  # its forwards too: the server may drop the kernel now
                return 0
        return None

    def _ended(self, attachment: Attachment) -> None:
        """The host dropped this side: say why, once, where the server shows it."""
        share = attachment.share
        reason = (
            f"{attachment.where} ended the attachment to {share.owner}'s kernel: the share "
            "was revoked or has expired, "
            "or the kernel was shut down or hibernated (a share ends with its kernel's run: "
            "ask for a new one once it runs again)"
        )
        if self.ended_reason != reason:
            self.ended_reason = reason
            self.log.warning("%s", reason)
            parent = self.parent
            if parent is not None and hasattr(parent, "reason"):
                parent.reason = reason  # jupyter_server lists it with the kernel
            # Attaching again cannot succeed (its key line is gone): no restarts, each of
            # which would fail with a traceback while the teammate's requests wait; the
            # server's restarter reads it as dead at once, and the server drops the kernel.
            restarter = getattr(parent, "_restarter", None)
            if restarter is not None and hasattr(restarter, "restart_limit"):
                restarter.restart_limit = 0

    async def wait(self) -> int | None:
        """Wait until detached or dropped."""
        while (code := await self.poll()) is None:
            await asyncio.sleep(0.1)
        return code

    async def others_can_run_code(self) -> bool:
        """Always: a joined kernel is someone else's."""
        return True

    async def send_signal(self, signum: int) -> None:
        """Signals never reach the owner's kernel (interrupts go as control messages)."""
        self.log.debug("shared kernel: signal %d not sent to the owner's kernel", signum)

    async def kill(self, restart: bool = False) -> None:
        """Detach (the owner's kernel keeps running)."""
        await self._detach()

    async def terminate(self, restart: bool = False) -> None:
        """Detach (the owner's kernel keeps running)."""
        await self._detach()

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Check the share file before attaching."""
        ShareFile.load(Path(self.share_file))
        kwargs = await super().pre_launch(**kwargs)
        kwargs["cmd"] = list(self.kernel_spec.argv)
        return kwargs

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        """Attach to the shared kernel; nothing is started on the owner's host."""
        if (
            self.attachment is None
            or self.attachment.conn is None
            or self.attachment.conn.is_closed()
        ):
            share = ShareFile.load(Path(self.share_file))
            self.attachment = await Attachment(
                share, self.identity or None, log=self.log, guard_control=True
            ).open()
        self.attachment.detached.clear()
        info = self.attachment.connection_info()
        info["key"] = str(info["key"]).encode()
        self.connection_info = cast(KernelConnectionInfo, info)
        return self.connection_info

    async def _detach(self) -> None:
        if self.attachment is not None:
            self.attachment.detached.set()

    async def cleanup(self, restart: bool = False) -> None:
        """Close this side's forwards unless restarting (a restart re-attaches)."""
        if restart or self.attachment is None:
            return
        await self.attachment.close()
        self.attachment = None

    async def get_provisioner_info(self) -> dict[str, Any]:
        """The share file and key; the kernel's key is never stored."""
        info: dict[str, Any] = await super().get_provisioner_info()
        info.pop("connection_info", None)
        info.update(share_file=self.share_file, identity=self.identity)
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        """Take over the share a previous server attached to."""
        await super().load_provisioner_info(provisioner_info)
        self.share_file = str(provisioner_info.get("share_file", ""))
        self.identity = str(provisioner_info.get("identity", ""))

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        """Detaching is quick."""
        return recommended


def kernel_name(share: ShareFile) -> str:
    """The kernelspec name for a share."""
    return KERNELSPEC_PREFIX + re.sub(r"[^a-z0-9-]", "-", share.share_id.lower())


def write_kernelspec(
    share_file: Path, identity: str | None = None, kernels_dir: Path | None = None
) -> Path:
    """Write a kernelspec that attaches to the shared kernel; return its directory.

    Args:
        share_file: The share file (its absolute path goes in the spec).
        identity: The teammate's private key file, when not the usual one.
        kernels_dir: Where kernelspecs live (default the user's Jupyter data dir).

    Raises:
        ShareError: The share file cannot be read.
    """
    share_file = Path(share_file).expanduser().resolve()
    share = ShareFile.load(share_file)
    directory = (kernels_dir or Path(jupyter_data_dir()) / "kernels") / kernel_name(share)
    directory.mkdir(parents=True, exist_ok=True)
    verb = "collaborate" if share.role == COLLABORATOR else "view"
    spec = {
        "argv": ["python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Shared by {share.owner} ({verb})",
        "language": "python",
        "interrupt_mode": "message",
        "metadata": {
            "kernel_provisioner": {
                "provisioner_name": PROVISIONER_NAME,
                "config": {"share_file": str(share_file), "identity": identity or ""},
            }
        },
    }
    (directory / "kernel.json").write_text(json.dumps(spec, indent=2))
    return directory


def prune_kernelspecs(kernels_dir: Path, now: float | None = None) -> list[str]:
    """Remove the kernelspecs of joined shares that have ended; return their names.

    A share has ended when its share file is gone, unreadable, or past its
    expiry (sshd refuses the key then anyway). Other kernelspecs are never
    touched, and share files are left where their owner put them.
    """
    now = time.time() if now is None else now
    removed = []
    for directory in sorted(Path(kernels_dir).glob(KERNELSPEC_PREFIX + "*")):
        try:
            spec = json.loads((directory / "kernel.json").read_text(encoding="utf-8"))
            config = spec["metadata"]["kernel_provisioner"]["config"]
            ended = ShareFile.load(Path(config["share_file"])).expires <= now
        except (OSError, ValueError, KeyError, TypeError, ShareError):
            ended = True
        if ended:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory.name)
    return removed


__all__ = [
    "PROVISIONER_NAME",
    "ShareError",
    "SharedKernelProvisioner",
    "prune_kernelspecs",
    "write_kernelspec",
]
