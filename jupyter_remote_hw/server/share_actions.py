"""What users do with shares from JupyterLab: share a kernel with a teammate's key,
list and revoke their shares, and join a kernel a teammate shared with them.

Free of HTTP, like :mod:`.hardware_actions`: the REST handlers in
:mod:`.handlers` parse requests, call these, and turn
:class:`~.hardware_actions.HardwareRequestError` into the HTTP status it carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir

from ..agent_client import AgentError, AgentUnavailableError
from ..ledger.store import ShareRecord
from ..machines.manager import MachineManager
from ..sharing.lookup import find_kernel, open_machine
from ..sharing.owner import ShareOwner, read_public_key
from ..sharing.provisioner import prune_kernelspecs, write_kernelspec
from ..sharing.roles import (
    COLLABORATOR,
    DEFAULT_EXPIRES,
    INVALID,
    REFUSED,
    UNKNOWN,
    UNREACHABLE,
    ShareError,
    check_role,
    parse_duration,
)
from ..sharing.sharefile import ShareFile
from ..transport import TransportError
from .hardware_actions import HardwareRequestError
from .hardware_events import EventHub

#: The HTTP status for each kind of :class:`ShareError`.
STATUS = {INVALID: 400, UNKNOWN: 404, REFUSED: 409, UNREACHABLE: 502}

#: Seconds a listing waits for an open host to report who joined.
SYNC_WAIT = 5.0


def request_error(exc: ShareError, field: str | None = None) -> HardwareRequestError:
    """The request error for a failed share action."""
    return HardwareRequestError(STATUS.get(exc.kind, 400), str(exc), field)


def _text(value: Any, name: str, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise HardwareRequestError(400, f"'{name}' must be a non-empty string", name)
    return value.strip()


@dataclass
class ShareActions:
    """The share actions, over the server's managers.

    Args:
        machines: The machine manager (its ledger records shares and joins).
        kernel_manager: The server's (async) kernel manager; joined shares
            start kernels in it.
        events: Where share changes are published (``share`` events).
        shares_dir: Where the share files of joined shares are kept (default
            ``<jupyter data dir>/remote_hw/shares``).
    """

    machines: MachineManager
    kernel_manager: Any
    events: EventHub
    shares_dir: Path | None = None

    @cached_property
    def owner(self) -> ShareOwner:
        """Makes, lists and revokes shares over the machines' ledger."""
        return ShareOwner(self.machines.ledger, self.machines.log)

    # ------------------------------------------------------------------ models

    def share_model(self, record: ShareRecord) -> dict[str, Any]:
        """One share as the machines panel shows it."""
        state = (
            "revoked"
            if record.revoked is not None
            else "expired"
            if record.expires <= time.time()
            else "active"
        )
        joins = [
            {"time": e.time, "detail": e.detail}
            for e in self.machines.ledger.share_events(record.share_id)
            if e.event == "joined"
        ]
        return {
            "share_id": record.share_id,
            "role": record.role,
            "teammate": record.teammate,
            "fingerprint": record.fingerprint,
            "kernel_id": record.kernel_id,
            "target": record.target,
            "created": record.created,
            "expires": record.expires,
            "revoked": record.revoked,
            "state": state,
            "joins": joins,
        }

    def _publish(self, action: str, record: ShareRecord) -> dict[str, Any]:
        model = self.share_model(record)
        self.events.publish("share", action=action, share=model)
        return model

    def _record(self, share_id: str) -> ShareRecord:
        record = self.machines.ledger.get_share(share_id)
        if record is None:
            raise HardwareRequestError(
                404, f"no share {share_id!r}: the machines panel lists your shares", "share_id"
            )
        return record

    # ------------------------------------------------------------------ owner

    async def _sync_open_hosts(self, targets: set[str]) -> None:
        """Record new joins from the hosts this server has open (never dials a host)."""

        async def sync(name: str) -> None:
            machine = self.machines.cached(name)
            if machine is None or not machine.link_up:
                return
            with contextlib.suppress(
                ShareError, AgentError, AgentUnavailableError, TransportError, TimeoutError
            ):
                await asyncio.wait_for(self.owner.sync(machine), SYNC_WAIT)

        await asyncio.gather(*(sync(name) for name in sorted(targets)))

    def _end_with_kernels(self) -> None:
        """A share ends with its kernel's run on the host: hibernating the kernel or shutting
        it down has the host's agent remove the share's key lines and close its relays. The
        ledger says so too (as revoked, with the reason), so no listing shows a share that
        opens nothing any more; a teammate gets a new share once the kernel runs again."""
        ledger = self.machines.ledger
        for record in ledger.shares():
            kernel = ledger.get_kernel(record.kernel_id)
            hibernated = kernel is not None and isinstance(kernel.info.get("hibernated"), dict)
            if kernel is None or hibernated:
                why = "hibernated" if hibernated else "shut down"
                ledger.revoke_share(
                    record.share_id, f"ended with its kernel, which was {why} (key line removed)"
                )
                self.machines.log.info("share %s ended: its kernel was %s", record.share_id, why)

    async def list_shares(self, include_all: bool = False) -> list[dict[str, Any]]:
        """The user's shares, newest first: active ones, or all when asked (those of a
        kernel that hibernated or was shut down are ended, see :meth:`_end_with_kernels`)."""
        now = time.time()
        self._end_with_kernels()
        records = self.machines.ledger.shares(include_revoked=include_all)
        await self._sync_open_hosts(
            {r.target for r in records if r.revoked is None and r.expires > now}
        )
        if not include_all:
            records = [r for r in records if r.expires > now]
        return [self.share_model(r) for r in reversed(records)]

    async def share(
        self, kernel: Any, public_key: Any, role: Any, expires: Any = None, address: Any = None
    ) -> dict[str, Any]:
        """Share a kernel with the holder of ``public_key``.

        Returns:
            ``{"share", "share_file", "filename"}``: the share's model, the
            share file's JSON for the teammate, and a file name for it.

        Raises:
            HardwareRequestError: A field is bad (400, naming it), the kernel is
                unknown (404), cannot be shared now (409), or its host cannot
                be reached (502).
        """
        key = _text(kernel, "kernel")
        pub = _text(public_key, "public_key")
        role_name = _text(role, "role")
        duration = _text(expires, "expires", required=False) or DEFAULT_EXPIRES
        where = _text(address, "address", required=False)
        assert key is not None and pub is not None and role_name is not None
        for name, check in (
            ("role", lambda: check_role(role_name)),
            ("public_key", lambda: read_public_key(pub)),
            ("expires", lambda: parse_duration(duration)),
        ):
            try:
                check()
            except ShareError as exc:
                raise request_error(exc, name) from None
        try:
            machine, kernel_id = await find_kernel(self.machines, key)
            granted = await self.owner.share(
                machine, kernel_id, pub, role_name, parse_duration(duration), where
            )
        except ShareError as exc:
            raise request_error(exc, "kernel") from None
        share_file = granted.share_file
        return {
            "share": self._publish("created", granted.record),
            "share_file": share_file.to_json(),
            "filename": f"share-{share_file.share_id}.json",
        }

    async def revoke(self, share_id: str) -> dict[str, Any]:
        """Revoke a share: its key line goes and the teammate is dropped.

        Raises:
            HardwareRequestError: No such share (404); its host cannot be
                reached (502).
        """
        record = self._record(share_id)
        try:
            machine = await open_machine(self.machines, record.target)
            dropped = await self.owner.revoke(machine, share_id)
        except ShareError as exc:
            raise request_error(exc, "share_id") from None
        return {
            "share": self._publish("revoked", self._record(share_id)),
            "closed": int(dropped.get("closed", 0)),
            "sessions": len(dropped.get("sessions", [])),
        }

    # ------------------------------------------------------------------ teammate

    def _saved_share_file(self, share: ShareFile) -> Path:
        directory = self.shares_dir or Path(jupyter_data_dir()) / "remote_hw" / "shares"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        for old in directory.glob("share-*.json"):  # ended shares: their files go too
            with contextlib.suppress(ShareError, OSError):
                if ShareFile.load(old).expires <= time.time():
                    old.unlink()
        return share.write(directory / f"share-{share.share_id}.json")

    async def join(self, share_file: Any, identity: Any = None) -> dict[str, Any]:
        """Join a shared kernel: keep its share file, install its kernelspec, and
        start a kernel in this server that attaches to it (nothing is launched on
        the owner's host).

        Returns:
            ``{"kernel_id", "kernel_name", "display_name", "role", "owner", "expires"}``.

        Raises:
            HardwareRequestError: Not a share file or no such key file (400);
                the share expired, was revoked, or the host key differs (409);
                the host cannot be reached (502).
        """
        try:
            share = ShareFile.from_json(share_file)
        except ShareError as exc:
            raise request_error(
                exc, f"share_file.{exc.field}" if exc.field else "share_file"
            ) from None
        key_file = _text(identity, "identity", required=False)
        if key_file is not None and not Path(key_file).expanduser().is_file():
            raise HardwareRequestError(
                400,
                f"no private key at {key_file}: name the key whose .pub you gave the owner",
                "identity",
            )
        kernels_dir = Path(self.kernel_manager.kernel_spec_manager.user_kernel_dir)
        for name in prune_kernelspecs(kernels_dir):
            self.machines.log.info("removed the kernel %s: its share has ended", name)
        path = self._saved_share_file(share)
        spec_dir = write_kernelspec(path, key_file, kernels_dir)
        try:
            kernel_id: str = await self.kernel_manager.start_kernel(kernel_name=spec_dir.name)
        except BaseException as exc:
            shutil.rmtree(spec_dir, ignore_errors=True)  # a failed join leaves nothing
            path.unlink(missing_ok=True)
            if isinstance(exc, ShareError):
                raise request_error(exc, "share_file") from None
            raise
        display = self.kernel_manager.kernel_spec_manager.get_kernel_spec(
            spec_dir.name
        ).display_name
        self.events.publish(
            "share",
            action="joined",
            joined={
                "share_id": share.share_id,
                "kernel_id": kernel_id,
                "owner": share.owner,
                "role": share.role,
            },
        )
        self.machines.log.info(
            "joined share %s of %s as %s (kernel %s)",
            share.share_id,
            share.owner,
            share.role,
            kernel_id,
        )
        return {
            "kernel_id": kernel_id,
            "kernel_name": spec_dir.name,
            "display_name": display,
            "role": share.role,
            "owner": share.owner,
            "expires": share.expires,
            "can_execute": share.role == COLLABORATOR,
        }


__all__ = ["ShareActions"]
