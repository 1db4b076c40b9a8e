"""Shares of a kernel with a teammate's SSH key: the key line, its own ports, revocation.

A share is one line in the host's ``authorized_keys`` that lets a teammate's
key open port forwards to exactly the share's ports on 127.0.0.1 and nothing
else (``restrict``, ``port-forwarding``, ``permitopen``, ``permitlisten`` on a
port that is always taken, a forced command, and ``expiry-time``), tagged with
the share id in its comment.

The share's ports are the agent's own relays to the kernel's ports, one per
kernel channel the role needs. Every connection a teammate makes thus passes
through the agent, which knows which share it belongs to: revoking closes the
relays and their connections, and ends the sshd sessions that carried them
(found through ``/proc``: the process holding the other end of a relayed
connection), so the teammate is dropped at once. OpenSSH alone would leave an
open connection running after its key line is removed.

Seeing which process holds a connection needs access to the sshd session's
``/proc/PID/fd``, which Linux grants only to root when sshd runs as root (its
session processes are not dumpable); for other users the relays are what drops
the teammate. So that a session left open cannot reach anything later bound
to a revoked share's ports, those ports stay bound, refusing every
connection, until no sshd session of this user that began before the
revocation is left (a process's start time is always readable).

The relays are TCP listeners on 127.0.0.1 because ``permitopen`` limits a
key to TCP destinations (OpenSSH has no such limit for UNIX sockets). Any
user of the host can connect to 127.0.0.1, so a relay admits only
connections whose socket belongs to this user (the owner's sshd session
carrying a teammate's forward does; another user's process does not): the
owner of a socket is in ``/proc/net/tcp`` for everyone to read. Behind the
relays, the kernel itself listens on UNIX sockets only its owner can reach.

The relays look up the kernel's channels on each new connection, so a share
outlives kernel restarts; shares are kept in ``shares.json`` and reopened by
the next agent.

A kernel shared with a role that reaches more than its outputs (shell,
control or stdin: a teammate can run code there) is marked from the moment
the share is added until the kernel ends, in ``run_by_others.json``:
revoking the share does not undo what was run meanwhile, so the owner's side
keeps treating what comes from that kernel as someone else's (``kernel_status``
answers ``others_can_run_code``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .connection import open_channel
from .protocol import BAD_REQUEST, AgentError
from .sshd_sessions import (
    holders,
    is_sshd,
    peer_inodes,
    peer_uid,
    sessions_begun_before,
    start_time,
)

log = logging.getLogger(__name__)

SHARE_TAG = "jupyter-remote-hw-share:"
"""Comment prefix that marks a share's key line; the share id follows it."""

FORCED_COMMAND = "/bin/false"
"""What a share key runs if it asks for a shell or command: nothing (forwards only)."""

UNKNOWN_SHARE = "unknown_share"
"""Error kind: no share with the given id on this host."""

_SHARE_ID = re.compile(r"^[A-Za-z0-9_-]{4,64}$")
_KEY_TYPE = re.compile(
    r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|"
    r"sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)$"
)
_KEY_BLOB = re.compile(r"^[A-Za-z0-9+/]+=*$")
_EXPIRY = re.compile(r"^\d{12}Z$")
_BUFFER = 256 * 1024
_SWEEP_INTERVAL = 10.0
#: Channels that only show a kernel's outputs; any other lets a teammate run code.
_WATCH_ONLY = frozenset({"iopub_port", "hb_port"})


def runs_code(channels: list[str]) -> bool:
    """Whether a share of these kernel channels lets its holder run code in the kernel."""
    return bool(set(channels) - _WATCH_ONLY)


def key_line(public_key: str, ports: list[int], expiry_time: str, share_id: str) -> str:
    """The authorized_keys line of a share.

    Args:
        public_key: The teammate's public key (``ssh-ed25519 AAAA... [comment]``).
        ports: The ports on the host's 127.0.0.1 the key may forward to.
        expiry_time: ``YYYYMMDDhhmmZ`` (UTC) after which sshd refuses the key.
        share_id: The share's id, written in the line's comment.

    Raises:
        AgentError: ``bad_request`` for a key, expiry or id that is not well formed.
    """
    parts = public_key.strip().split()
    if len(parts) < 2 or not _KEY_TYPE.match(parts[0]) or not _KEY_BLOB.match(parts[1]):
        raise AgentError(
            BAD_REQUEST,
            "the teammate's public key must be one line such as "
            "'ssh-ed25519 AAAA... name' (the .pub file, not the private key)",
        )
    if not _EXPIRY.match(expiry_time):
        raise AgentError(BAD_REQUEST, f"expiry {expiry_time!r} must be YYYYMMDDhhmmZ (UTC)")
    if not _SHARE_ID.match(share_id):
        raise AgentError(BAD_REQUEST, f"share id {share_id!r} must be 4-64 letters, digits, - or _")
    if not ports:
        raise AgentError(BAD_REQUEST, "a share needs at least one port")
    options = ["restrict", "port-forwarding"]
    options += [f'permitopen="127.0.0.1:{int(port)}"' for port in ports]
    # ``port-forwarding`` also turns on remote forwards (TCP and UNIX sockets),
    # which a key option cannot turn off by itself. With any ``permitlisten``
    # sshd refuses remote UNIX-socket forwards, and the one TCP listen it
    # permits is on a port the agent's relay already holds: it always fails.
    options.append(f'permitlisten="127.0.0.1:{int(ports[0])}"')
    options += [f'command="{FORCED_COMMAND}"', f'expiry-time="{expiry_time}"']
    return f"{','.join(options)} {parts[0]} {parts[1]} {SHARE_TAG}{share_id}"


def _line_share_id(line: str) -> str | None:
    comment = line.rstrip("\n").rsplit(" ", 1)[-1]
    return comment[len(SHARE_TAG) :] if comment.startswith(SHARE_TAG) else None


def shares_of_key(path: str, public_key: str) -> list[str]:
    """The share ids whose lines in an authorized_keys file carry ``public_key``."""
    parts = public_key.strip().split()
    if len(parts) < 2:
        return []
    needle = f" {parts[0]} {parts[1]} {SHARE_TAG}"
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        return []
    return [sid for line in lines if needle in line and (sid := _line_share_id(line))]


def edit_authorized_keys(path: str, add: str | None = None, remove: str | None = None) -> bool:
    """Add a line to, or remove a share's line from, an authorized_keys file atomically.

    The new contents are written to a temporary file in the same directory
    (0600) and renamed over the old file; every other line is kept as it was.

    Args:
        path: The authorized_keys file (created 0600 in a 0700 directory when missing).
        add: A line to append.
        remove: A share id whose line goes.

    Returns:
        Whether the file changed.
    """
    path = os.path.expanduser(path)
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
    except FileNotFoundError:
        lines = []
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    kept = [line for line in lines if remove is None or _line_share_id(line) != remove]
    if kept and not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    if add is not None:
        kept.append(add.rstrip("\n") + "\n")
    if kept == lines:
        return False
    fd, partial = tempfile.mkstemp(prefix=".authorized_keys.", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(partial, 0o600)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    return True


@dataclass
class Share:
    """One share as the agent keeps it.

    Attributes:
        share_id: The share's id.
        kernel_id: The shared kernel.
        channels: The kernel channels shared (``iopub_port``, ``shell_port``...).
        ports: The share's relay port for each channel, on 127.0.0.1.
        expires: When sshd stops accepting the key (epoch seconds).
        authorized_keys: The file holding the share's key line.
        joins: When a teammate attached: ``[{time, pid, started}]`` (the sshd
            session's pid and start time when the agent can see them, else None).
        revoked: When the share was revoked or expired; its ports stay bound,
            refusing connections, while a session from before may be left.
    """

    share_id: str
    kernel_id: str
    channels: list[str]
    ports: dict[str, int]
    expires: float
    authorized_keys: str
    joins: list[dict[str, Any]] = field(default_factory=list)
    revoked: float | None = None


class ShareRelays:
    """The shares of one agent: their relays, key lines and live connections.

    Args:
        path: The JSON file the shares are kept in.
        kernel_channel: Looks up the connection dict of a kernel that has a
            channel (raises AgentError when the kernel or channel is gone).
    """

    def __init__(self, path: str, kernel_channel: Callable[[str, str], dict[str, Any]]) -> None:
        self.path = path
        self.kernel_channel = kernel_channel
        self.shares: dict[str, Share] = {}
        self._servers: dict[str, list[asyncio.AbstractServer]] = {}
        self._links: dict[str, set[tuple[asyncio.StreamWriter, int]]] = {}
        self._expiry: dict[str, asyncio.TimerHandle] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._run_by_others_path = os.path.join(os.path.dirname(path), "run_by_others.json")
        self.run_by_others: set[str] = set()
        """Kernels someone else could run code in since they started (see the module)."""

    # ------------------------------------------------------------------ persistence

    def _save_run_by_others(self) -> None:
        fd, partial = tempfile.mkstemp(
            prefix=".run_by_others.", dir=os.path.dirname(self._run_by_others_path)
        )
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(sorted(self.run_by_others), handle)
        os.chmod(partial, 0o600)
        os.replace(partial, self._run_by_others_path)

    def _load_run_by_others(self) -> None:
        try:
            with open(self._run_by_others_path, encoding="utf-8") as handle:
                kept = json.load(handle)
        except FileNotFoundError:
            return
        except ValueError:
            kept = []
            log.warning(
                "%s does not read as JSON; kernels of shares kept are still marked",
                self._run_by_others_path,
            )
        self.run_by_others = {str(kernel_id) for kernel_id in kept if isinstance(kernel_id, str)}

    def _save(self) -> None:
        data = {sid: asdict(share) for sid, share in self.shares.items()}
        fd, partial = tempfile.mkstemp(prefix=".shares.", dir=os.path.dirname(self.path))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.chmod(partial, 0o600)
        os.replace(partial, self.path)

    def _load(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                kept: dict[str, Any] = json.load(handle)
        except (FileNotFoundError, ValueError):
            return {}
        return kept

    async def open(self) -> None:
        """Reopen the relays of shares kept by a previous agent; drop expired ones."""
        self._sweeper = asyncio.ensure_future(self._sweep_forever())
        self._load_run_by_others()
        kept = self._load()
        for sid, values in kept.items():
            share = Share(**values)
            self.shares[sid] = share
            if runs_code(share.channels):
                self.run_by_others.add(share.kernel_id)
            if share.revoked is None and share.expires <= time.time():
                await self.drop(sid)
                continue
            try:
                await self._listen(share, keep_ports=True)
            except OSError as exc:
                log.warning("share %s: relay ports taken (%s); share dropped", sid, exc)
                await self.drop(sid)

    async def close(self) -> None:
        """Stop relaying (shares stay recorded for the next agent)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
        for handle in self._expiry.values():
            handle.cancel()
        for sid in list(self._servers):
            await self._stop_relays(sid)

    # ------------------------------------------------------------------ ops

    async def add(
        self,
        share_id: str,
        kernel_id: str,
        channels: list[str],
        public_key: str,
        expires: float,
        authorized_keys: str,
    ) -> dict[str, Any]:
        """Open the share's relays and add its key line.

        Returns:
            ``{"share_id", "ports", "key_line"}``.
        """
        if share_id in self.shares:
            raise AgentError(BAD_REQUEST, f"share {share_id} exists already")
        for channel in channels:
            self.kernel_channel(kernel_id, channel)  # the kernel and channel exist
        expiry_time = time.strftime("%Y%m%d%H%MZ", time.gmtime(expires))
        share = Share(
            share_id, kernel_id, list(channels), {}, expires, os.path.expanduser(authorized_keys)
        )
        key_line(public_key, [1], expiry_time, share_id)  # check before opening anything
        for other in shares_of_key(share.authorized_keys, public_key):
            # sshd takes the first line that matches a key, and with it that
            # line's ports: a second line for the same key would never be used.
            known = self.shares.get(other)
            if known is None or known.revoked is None:
                what = f" (kernel {known.kernel_id})" if known is not None else ""
                raise AgentError(
                    BAD_REQUEST,
                    (
                        f"this key already has share {other}{what} on this host, and sshd would "
                        "only ever use that share's line: revoke it first, or share with another "
                        "of the teammate's keys"
                    ),
                )
        if runs_code(channels) and kernel_id not in self.run_by_others:
            self.run_by_others.add(kernel_id)  # before the teammate can reach it
            self._save_run_by_others()
        await self._listen(share, keep_ports=False)
        line = key_line(public_key, list(share.ports.values()), expiry_time, share_id)
        try:
            edit_authorized_keys(share.authorized_keys, add=line)
        except OSError as exc:
            await self._stop_relays(share_id)
            raise AgentError(BAD_REQUEST, f"cannot write {share.authorized_keys}: {exc}") from None
        self.shares[share_id] = share
        self._save()
        self._schedule_expiry(share)
        log.info("share %s of kernel %s added (%s)", share_id, kernel_id, ",".join(channels))
        return {"share_id": share_id, "ports": dict(share.ports), "key_line": line}

    async def drop(self, share_id: str) -> dict[str, Any]:
        """Remove the key line, close the relays, and end the teammate's sshd sessions.

        Returns:
            ``{"share_id", "removed_line", "closed", "sessions"}``: whether the
            line was there, how many relayed connections were closed, and the
            pids of the sshd sessions ended.

        Raises:
            AgentError: ``unknown_share``.
        """
        share = self.shares.get(share_id)
        if share is None or share.revoked is not None:
            raise AgentError(
                UNKNOWN_SHARE,
                f"no share {share_id} on this host; list_shares shows the shares it has",
            )
        removed = False
        try:
            removed = edit_authorized_keys(share.authorized_keys, remove=share_id)
        except OSError as exc:
            log.warning("share %s: cannot edit %s: %s", share_id, share.authorized_keys, exc)
        sessions = self._sshd_sessions(share_id)
        share.revoked = time.time()
        closed = self._close_links(share_id)
        for pid in sessions:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        handle = self._expiry.pop(share_id, None)
        if handle is not None:
            handle.cancel()
        await self._release_if_safe(share)
        self._save()
        log.info(
            "share %s dropped: %d connection(s), sshd session(s) %s",
            share_id,
            closed,
            sorted(sessions),
        )
        return {
            "share_id": share_id,
            "removed_line": removed,
            "closed": closed,
            "sessions": sorted(sessions),
        }

    async def drop_kernel(self, kernel_id: str) -> list[str]:
        """Drop every share of a kernel that was shut down; return their ids."""
        ids = [
            sid
            for sid, share in self.shares.items()
            if share.kernel_id == kernel_id and share.revoked is None
        ]
        for sid in ids:
            await self.drop(sid)
        if kernel_id in self.run_by_others:
            self.run_by_others.discard(kernel_id)
            self._save_run_by_others()
        return ids

    def others_can_run_code(self, kernel_id: str) -> bool:
        """Whether someone else could run code in the kernel since it started (see the module)."""
        return kernel_id in self.run_by_others or any(
            share.kernel_id == kernel_id and runs_code(share.channels)
            for share in self.shares.values()
        )

    def list(self) -> list[dict[str, Any]]:
        """Every share (not revoked) with its live connection count."""
        return [
            {**asdict(share), "connections": len(self._links.get(sid, ()))}
            for sid, share in self.shares.items()
            if share.revoked is None
        ]

    async def _release_if_safe(self, share: Share) -> bool:
        """Free a revoked share's ports once no sshd session from before it is left."""
        assert share.revoked is not None
        if sessions_begun_before(share.revoked):
            return False
        await self._stop_relays(share.share_id)
        self.shares.pop(share.share_id, None)
        log.info("share %s: ports released", share.share_id)
        return True

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL)
            released = False
            for share in [s for s in self.shares.values() if s.revoked is not None]:
                released = await self._release_if_safe(share) or released
            if released:
                self._save()

    # ------------------------------------------------------------------ relays

    def _schedule_expiry(self, share: Share) -> None:
        delay = max(0.0, share.expires - time.time())
        loop = asyncio.get_running_loop()
        self._expiry[share.share_id] = loop.call_later(
            delay, lambda: asyncio.ensure_future(self._expire(share.share_id))
        )

    async def _expire(self, share_id: str) -> None:
        if share_id in self.shares:
            log.info("share %s expired", share_id)
            await self.drop(share_id)

    async def _listen(self, share: Share, keep_ports: bool) -> None:
        servers: list[asyncio.AbstractServer] = []
        self._links[share.share_id] = set()
        try:
            for channel in share.channels:
                port = share.ports.get(channel, 0) if keep_ports else 0
                server = await asyncio.start_server(
                    self._relay_handler(share, channel), "127.0.0.1", port
                )
                servers.append(server)
                share.ports[channel] = int(server.sockets[0].getsockname()[1])
        except BaseException:
            for opened in servers:
                opened.close()
            raise
        self._servers[share.share_id] = servers
        if keep_ports and share.revoked is None:
            self._schedule_expiry(share)

    def _relay_handler(self, share: Share, channel: str) -> Callable[..., Any]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if share.revoked is not None:
                writer.close()
                return
            peer_port = int(writer.get_extra_info("peername")[1])
            owner = peer_uid(share.ports[channel], peer_port)
            if owner != os.getuid():
                log.warning(
                    "share %s: refused a %s connection from %s, not this user",
                    share.share_id,
                    channel,
                    "an unknown process" if owner is None else f"uid {owner}",
                )
                writer.close()
                return
            links = self._links.setdefault(share.share_id, set())
            attaching = not links
            entry = (writer, peer_port)
            links.add(entry)
            pids = holders(peer_inodes(share.ports[channel], {peer_port}))
            known = {j["pid"] for j in share.joins if j["pid"] is not None}
            new = pids - known
            if new or (attaching and not pids):
                joined: list[int | None] = [*sorted(new)] or [None]
                for pid in joined:
                    share.joins.append(
                        {
                            "time": time.time(),
                            "pid": pid,
                            "started": start_time(pid) if pid else None,
                        }
                    )
                self._save()
            upstream: asyncio.StreamWriter | None = None
            try:
                info = self.kernel_channel(share.kernel_id, channel)
                up_reader, upstream = await open_channel(info, channel)
                await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
            except (OSError, AgentError) as exc:
                log.info("share %s: %s relay ended: %s", share.share_id, channel, exc)
            finally:
                links.discard(entry)
                for w in (writer, upstream):
                    if w is not None:
                        w.close()

        return handle

    def _sshd_sessions(self, share_id: str) -> set[int]:
        share = self.shares[share_id]
        pids: set[int] = set()
        for port in share.ports.values():
            peers = {peer for _, peer in self._links.get(share_id, ())}
            pids |= holders(peer_inodes(port, peers))
        # Sessions that joined and still run: the same pid *and* start time,
        # so a pid since reused by another process is never signalled.
        pids |= {
            int(j["pid"])
            for j in share.joins
            if j.get("pid")
            and j.get("started") is not None
            and start_time(int(j["pid"])) == j["started"]
        }
        return {pid for pid in pids if pid != os.getpid() and is_sshd(pid)}

    def _close_links(self, share_id: str) -> int:
        links = self._links.pop(share_id, set())
        for writer, _ in links:
            writer.close()
        return len(links)

    async def _stop_relays(self, share_id: str) -> int:
        for server in self._servers.pop(share_id, []):
            server.close()
        return self._close_links(share_id)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_BUFFER):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
