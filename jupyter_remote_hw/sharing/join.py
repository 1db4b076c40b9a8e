"""The teammate's side: reach a shared kernel with their own key, never launching it.

:class:`Attachment` connects to the owner's host as the share file says (the
host key must be the one in the file), forwards the share's ports to
127.0.0.1 here, and gives the connection info of the kernel to attach to: the
owner's kernel itself for a collaborator, or a :class:`ReadOnlyKernel` facade
for a viewer. Closing it only closes this side's forwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Self

import asyncssh

from ..agent.connection import write_private_json
from .facade import ControlGuard, ReadOnlyKernel
from .roles import COLLABORATOR, REFUSED, UNREACHABLE, ShareError
from .sharefile import ShareFile


class Attachment:
    """An open attachment to a shared kernel.

    Args:
        share: The share file.
        identity: The teammate's private key file (default: their usual SSH
            keys and agent).
        connect_timeout: Seconds to reach the host.
        log: Where to log.
    """

    def __init__(
        self,
        share: ShareFile,
        identity: str | Path | None = None,
        *,
        connect_timeout: float = 15.0,
        log: logging.Logger | None = None,
        guard_control: bool = False,
    ) -> None:
        self.share = share
        self.identity = Path(identity).expanduser() if identity else None
        self.connect_timeout = connect_timeout
        self.log = log or logging.getLogger(__name__)
        self.conn: asyncssh.SSHClientConnection | None = None
        self.local_ports: dict[str, int] = {}
        self.facade: ReadOnlyKernel | None = None
        self.guard: ControlGuard | None = None
        self.guard_control = guard_control
        self.detached = asyncio.Event()
        """Set when the teammate's Jupyter asked to shut the kernel down (it only detaches)."""
        self._listeners: list[asyncssh.SSHListener] = []

    @property
    def where(self) -> str:
        """``user@host:port`` of the owner's host."""
        return f"{self.share.user}@{self.share.host}:{self.share.port}"

    async def open(self) -> Self:
        """Connect and forward the share's ports.

        Raises:
            ShareError: The share expired, the host key differs from the share
                file's, the host refused the key (revoked, expired, or not the
                key that was shared), or the host cannot be reached.
        """
        await self._connect()
        try:
            await self._forward()
            share = self.share
            if share.role != COLLABORATOR:
                self.facade = ReadOnlyKernel(
                    self.local_ports["iopub_port"],
                    share.owner,
                    log=self.log,
                    on_detach=self.detached.set,
                )
                await self.facade.start()
            elif self.guard_control:
                self.guard = ControlGuard(
                    self.local_ports["control_port"],
                    share.key,
                    share.signature_scheme,
                    self.detached.set,
                    self.log,
                )
                await self.guard.start()
        except BaseException:
            await self.close()
            raise
        self.log.info(
            "attached to kernel %s of %s as %s",
            self.share.kernel_id,
            self.share.owner,
            self.share.role,
        )
        return self

    async def reopen(self) -> None:
        """Connect again after the connection dropped (a cut link), forwarding the same
        local ports, so that the clients here reconnect by themselves (what they send
        meanwhile waits in their own sockets).

        Raises:
            ShareError: As :meth:`open`: ``REFUSED`` once the share was revoked or has
                expired (the attachment has ended), ``UNREACHABLE`` while the host
                cannot be reached (try again later).
        """
        self._drop_connection()
        await self._connect()
        try:
            await self._forward(dict(self.local_ports))
        except BaseException:
            self._drop_connection()
            raise
        self.log.info("attached again to kernel %s of %s", self.share.kernel_id, self.share.owner)

    def _drop_connection(self) -> None:
        """Close the forwards and the connection (the clients here keep their ports)."""
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    async def _connect(self) -> None:
        share = self.share
        if share.expires <= time.time():
            raise ShareError(
                f"share {share.share_id} from {share.owner} expired at "
                f"{time.ctime(share.expires)}: ask them for a new one",
                REFUSED,
            )
        try:
            host_key = asyncssh.import_public_key(share.host_key)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise ShareError(f"the share file's host key cannot be read: {exc}") from None
        options: dict[str, Any] = {
            "known_hosts": ([host_key], [], []),
            "config": [],
            "connect_timeout": self.connect_timeout,
        }
        if self.identity is not None:
            if not self.identity.exists():
                raise ShareError(
                    f"no private key at {self.identity}: name the key whose "
                    ".pub you gave the owner with --identity"
                )
            options.update(client_keys=[str(self.identity)], agent_path=None)
        try:
            self.conn = await asyncssh.connect(
                share.host, share.port, username=share.user, **options
            )
        except asyncssh.HostKeyNotVerifiable:
            raise ShareError(
                f"{self.where} presented a host key other than the share file's: "
                "not connecting. Ask the owner for a fresh share file.",
                REFUSED,
            ) from None
        except asyncssh.PermissionDenied:
            raise ShareError(
                f"{self.where} refused your key: the share {share.share_id} was "
                "revoked or has expired, or this is not the key you gave "
                f"{share.owner} (pick it with --identity)",
                REFUSED,
            ) from None
        except (OSError, TimeoutError, asyncssh.Error) as exc:
            raise ShareError(
                f"cannot reach {self.where}: {exc or type(exc).__name__}", UNREACHABLE
            ) from None

    async def _forward(self, ports: dict[str, int] | None = None) -> None:
        """Forward the share's ports from ``ports`` here (any free ones when None)."""
        assert self.conn is not None
        for name, port in self.share.ports.items():
            here = (ports or {}).get(name, 0)
            listener = await self.conn.forward_local_port("127.0.0.1", here, "127.0.0.1", port)
            self._listeners.append(listener)
            self.local_ports[name] = listener.get_port()

    def connection_info(self) -> dict[str, Any]:
        """The connection info a Jupyter client uses to attach here."""
        if self.facade is not None:
            info = self.facade.connection_info()
        else:
            info = {
                "ip": "127.0.0.1",
                "transport": "tcp",
                "key": self.share.key,
                "signature_scheme": self.share.signature_scheme,
                **self.local_ports,
            }
            if self.guard is not None:
                info["control_port"] = self.guard.port
        return {**info, "kernel_name": ""}

    def write_connection_file(self, path: Path) -> Path:
        """Write :meth:`connection_info` as a Jupyter connection file (0600)."""
        path = Path(path).expanduser()
        write_private_json(str(path), self.connection_info())
        return path

    async def wait_closed(self) -> None:
        """Wait until the host drops the connection (a revoke does)."""
        if self.conn is not None:
            await self.conn.wait_closed()

    async def close(self) -> None:
        """Detach: close this side's forwards and connection; the owner's kernel runs on."""
        if self.facade is not None:
            await self.facade.close()
            self.facade = None
        if self.guard is not None:
            await self.guard.close()
            self.guard = None
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        if self.conn is not None:
            self.conn.close()
            await self.conn.wait_closed()
            self.conn = None

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def attach(
    share_file: Path, identity: str | Path | None = None, log: logging.Logger | None = None
) -> Attachment:
    """Open an attachment from a share file path."""
    return await Attachment(ShareFile.load(share_file), identity, log=log).open()


__all__ = ["Attachment", "attach"]
