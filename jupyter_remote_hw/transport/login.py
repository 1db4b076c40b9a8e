"""How a destination is logged in to: its ssh_config options, with its host key always
verified (each ProxyJump hop's too), and the error that names an unknown or changed key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
from pathlib import Path
from typing import Any

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from .errors import (
    HostKeyError,
    HostUnreachableError,
)
from .settings import TransportSettings

_DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")


#: Cipher preference when the user's ssh_config names none. asyncssh moves
#: about twice the data per CPU second with AES-GCM than with chacha20-poly1305
#: (see docs/benchmarks.md); OpenSSH servers offer both by default.
_PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
)


def _default_ssh_config() -> list[str]:
    """``~/.ssh/config`` when it can be read, as OpenSSH's client uses it."""
    path = Path("~", ".ssh", "config").expanduser()
    return [str(path)] if os.access(path, os.R_OK) else []


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names ``host:port``: the bare host on port 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


def _as_typed(path: str) -> str:
    """``path`` as a user types it: the home folder as ``~``."""
    home = str(Path.home())
    return "~" + path[len(home) :] if path == home or path.startswith(home + "/") else path


def recorded_host_keys(files: list[str], host: str, port: int) -> list[asyncssh.SSHKey]:
    """The keys the known_hosts ``files`` record for ``host:port`` (unreadable files skipped)."""
    keys: list[asyncssh.SSHKey] = []
    for path in files:
        try:
            keys.extend(asyncssh.match_known_hosts(path, host, host, port)[0])
        except (OSError, ValueError):
            continue
    return keys


def split_hop(hop: str) -> tuple[str, str, str]:
    """A ProxyJump hop's user, host and port (``""`` where not given), as OpenSSH reads
    ``[user@]host[:port]``, ``[user@][v6 address]:port`` and ``ssh://...``: a bare IPv6
    address (``::1``, ``fe80::1``) has no port; one with a port is in brackets."""
    if hop.startswith("ssh://"):
        hop = hop[len("ssh://") :].rstrip("/")
    user, _, address = hop.rpartition("@")
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if bracket and (not rest or rest.startswith(":")):
            return user, host, rest[1:]
        return user, address, ""
    if address.count(":") == 1:
        host, _, port = address.partition(":")
        return user, host, port
    return user, address, ""


class VerifiedLogin:
    """The options and host-key checks of :class:`.connection.SSHConnection`."""

    destination: str
    settings: TransportSettings
    log: logging.Logger
    _known_files: list[str]

    def _options(self) -> asyncssh.SSHClientConnectionOptions:
        options, self._known_files = self._verified_options(self.destination)
        return options

    def _verified_options(
        self, host: str, **given: Any
    ) -> tuple[asyncssh.SSHClientConnectionOptions, list[str]]:
        """Options to reach ``host`` (the destination or a jump host) from the ssh_config
        files, with its host key always verified, and the known_hosts files it uses.

        Args:
            host: An ssh_config alias or host name.
            given: Options that the ssh_config does not set for this host
                (a ProxyJump hop's user and port).
        """
        s = self.settings
        kwargs: dict[str, Any] = {
            **given,
            "host": host,
            "connect_timeout": s.connect_timeout,
            "keepalive_interval": s.keepalive_interval,
            "keepalive_count_max": s.keepalive_count_max,
        }
        # Named explicitly, ~/.ssh/config included: options built on their own do not
        # read it (only asyncssh.connect does), and these options give the host name,
        # port and known_hosts files that errors and the known_hosts check rely on.
        kwargs["config"] = list(s.ssh_config_files) or _default_ssh_config()
        if s.known_hosts_files:
            kwargs["known_hosts"] = list(s.known_hosts_files)
        options = asyncssh.SSHClientConnectionOptions(**kwargs)
        overrides: dict[str, Any] = {}
        if list(options.encryption_algs) == get_default_encryption_algs():
            overrides["encryption_algs"] = _PREFERRED_CIPHERS
        if options.known_hosts is None:
            # "UserKnownHostsFile none" would turn verification off: never do that.
            self.log.warning(
                "ssh %s: ssh_config disables known_hosts; verifying against %s anyway",
                host,
                _DEFAULT_KNOWN_HOSTS,
            )
            overrides["known_hosts"] = b""
        # The files that record host keys, and the first, where a trusted key is written.
        known_files = self._known_hosts_files(options)
        present = [f for f in known_files if Path(f).expanduser().exists()]
        if "known_hosts" not in overrides and present != known_files:
            # A known_hosts file that does not exist yet records no key, as for OpenSSH
            # (asyncssh would fail on it): verify against the others, or against none.
            overrides["known_hosts"] = present or b""
        if overrides:
            options = asyncssh.SSHClientConnectionOptions(**kwargs, **overrides)
        return options, known_files

    async def _open_jump_hosts(self, spec: str) -> asyncssh.SSHClientConnection:
        """Connect through a ProxyJump chain (``[user@]host[:port],...``), each hop's host
        key verified as the destination's is (asyncssh alone would take each hop's
        ssh_config as it is, ``UserKnownHostsFile none`` included).

        Returns:
            The connection to the last hop; closing it closes the ones before.

        Raises:
            HostKeyError: A hop's host key is unknown or changed.
            OSError, asyncssh.Error: A hop could not be reached or refused us.
        """
        last: asyncssh.SSHClientConnection | None = None
        config = list(self.settings.ssh_config_files) or ()
        try:
            for hop in (part.strip() for part in spec.split(",") if part.strip()):
                user, host, port = split_hop(hop)
                if port and not port.isdigit():
                    raise HostUnreachableError(
                        self.destination,
                        f"ProxyJump hop {hop!r} of {self.destination} has the port {port!r}, "
                        "not a number: fix it in your ssh config",
                    )
                given: dict[str, Any] = {}
                if user:
                    given["username"] = user
                if port:
                    given["port"] = int(port)
                options, files = self._verified_options(host, **given)
                try:
                    conn = await asyncssh.connect(
                        host, config=config, options=options, tunnel=last or ()
                    )
                except asyncssh.HostKeyNotVerifiable:
                    where = f"{options.host}:{options.port}"
                    raise HostKeyError(
                        self.destination,
                        f"host key of jump host {hop} ({where}), on the way to "
                        f"{self.destination}, is not known or has changed; nothing was "
                        f"trusted automatically. Check it and add it to {files[0]} (connect "
                        f"once with `ssh {shlex.quote(hop)}`), then retry.",
                        fingerprint=None,
                        changed=False,
                        host=str(options.host),
                        port=int(options.port),
                    ) from None
                conn.set_tunnel(last)
                last = conn
        except BaseException:
            if last is not None:
                last.close()
            raise
        if last is None:
            raise HostUnreachableError(
                self.destination, f"ProxyJump of {self.destination} names no host"
            )
        return last

    def resolved_address(self) -> tuple[str, int, list[str]]:
        """The host name and port the destination resolves to, and its known_hosts files.

        Read from the ssh_config files (``~/.ssh/config`` by default), as OpenSSH would.
        """
        options = self._options()
        return str(options.host), int(options.port), self._known_files

    async def presented_key(self) -> asyncssh.SSHKey | None:
        """The host key the destination presents, read without authenticating.

        Raises:
            OSError, TimeoutError, asyncssh.Error: It could not be read.
        """
        return await asyncio.wait_for(
            asyncssh.get_server_host_key(
                self.destination, config=list(self.settings.ssh_config_files) or ()
            ),
            self.settings.connect_timeout,
        )

    def _known_hosts_files(self, options: asyncssh.SSHClientConnectionOptions) -> list[str]:
        known = options.known_hosts
        if isinstance(known, (str, Path)):
            return [str(known)]
        if isinstance(known, list) and known and all(isinstance(k, (str, Path)) for k in known):
            return [str(k) for k in known]
        return [str(_DEFAULT_KNOWN_HOSTS.expanduser())]

    async def _host_key_error(
        self,
        options: asyncssh.SSHClientConnectionOptions,
        where: str,
        host: str,
        port: int,
        exc: asyncssh.HostKeyNotVerifiable,
    ) -> HostKeyError:
        fingerprint: str | None = None
        kind = "host"
        try:
            key = await self.presented_key()
            if key is not None:
                fingerprint = key.get_fingerprint("sha256")
                kind = key.get_algorithm()
        except (OSError, TimeoutError, asyncssh.Error) as probe_exc:
            self.log.debug("ssh %s: could not read host key: %s", self.destination, probe_exc)
        files = self._known_files
        changed = bool(recorded_host_keys(files, host, port))
        shown = fingerprint or "(could not be read)"
        name = known_hosts_name(host, port)
        target = _as_typed(files[0]) if files else str(_DEFAULT_KNOWN_HOSTS)
        if changed:
            message = (
                f"HOST KEY CHANGED for {where}: it now presents {kind} key {shown}, which "
                f"differs from the key recorded in {', '.join(files)}. Someone may be "
                "intercepting the connection, or the machine was reinstalled. Connection "
                "refused. If you know it was reinstalled, remove the old key with "
                f"`ssh-keygen -R '{name}' -f {target}` and trust the new one."
            )
        else:
            message = (
                f"host key of {where} is not known: it presents {kind} key {shown}. "
                "Nothing was trusted automatically. If that is your machine's key, trust "
                f"it with `jupyter remote-hw trust {shlex.quote(self.destination)}`, or add it "
                f"with `ssh-keyscan -p {port} {host} >> {target}` (or connect once with "
                f"`ssh {shlex.quote(self.destination)}` and accept it), then retry."
            )
        self.log.debug("ssh %s: host key rejected: %s", self.destination, exc)
        return HostKeyError(
            self.destination,
            message,
            fingerprint=fingerprint,
            changed=changed,
            host=host,
            port=port,
        )
