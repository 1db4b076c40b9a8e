"""``jupyter remote-hw share|shares|revoke|join``: the sharing subcommands.

:func:`add_parsers` adds them to the main parser's subcommands, and
:func:`run` runs a parsed one over the process's machine manager, so the
main command line registers them in two lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any, TextIO

from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir
from tabulate import tabulate

from ..agent_client import AgentError, AgentUnavailableError
from ..ledger.store import ShareRecord
from ..machines.manager import MachineManager
from ..sharing.join import Attachment
from ..sharing.lookup import find_kernel, open_machine
from ..sharing.owner import DEFAULT_AUTHORIZED_KEYS, ShareOwner, read_public_key
from ..sharing.provisioner import prune_kernelspecs, write_kernelspec
from ..sharing.roles import COLLABORATOR, DEFAULT_EXPIRES, VIEWER, ShareError, parse_duration
from ..sharing.sharefile import ShareFile
from ..transport import TransportError
from ..validation import NAME, SHARE_ID, argument_type, check_identifier

COMMANDS = ("share", "shares", "revoke", "join")
"""The subcommands this module adds."""


def add_parsers(commands: Any) -> None:
    """Add the sharing subcommands to ``commands`` (an argparse subparsers object)."""
    share = commands.add_parser(
        "share", help="let a teammate's SSH key watch (viewer) or use (collaborator) a kernel"
    )
    share.add_argument(
        "kernel",
        metavar="KERNEL_OR_MACHINE",
        type=argument_type(NAME, "kernel"),
        help="a kernel id (or its start) from the ledger, or a target running one kernel",
    )
    share.add_argument(
        "--with",
        dest="pubkey",
        required=True,
        metavar="PUBKEY",
        help="the teammate's public key: their .pub file or its one line",
    )
    share.add_argument(
        "--role",
        required=True,
        choices=(VIEWER, COLLABORATOR),
        help="viewer: sees outputs only; collaborator: runs code",
    )
    share.add_argument(
        "--expires",
        default=DEFAULT_EXPIRES,
        metavar="DURATION",
        help=f"how long the share lasts (30m, 8h, 2d; default {DEFAULT_EXPIRES})",
    )
    share.add_argument(
        "--output", metavar="FILE", help="where to write the share file (default ./share-<id>.json)"
    )
    share.add_argument(
        "--address",
        help="the host's address as the teammate reaches it "
        "(default: the address this machine connects to)",
    )
    share.add_argument(
        "--authorized-keys",
        metavar="PATH",
        help="the authorized_keys file the host's sshd reads (default: the "
        f"host's 'authorized_keys' setting, else {DEFAULT_AUTHORIZED_KEYS})",
    )

    shares = commands.add_parser("shares", help="your shares, who joined and when")
    shares.add_argument("--all", action="store_true", help="include revoked shares")

    revoke = commands.add_parser(
        "revoke", help="end a share: remove its key line and drop the teammate at once"
    )
    revoke.add_argument("share_id", metavar="SHARE_ID", type=argument_type(SHARE_ID, "share id"))

    join = commands.add_parser(
        "join", help="attach to a kernel shared with you (runs until Ctrl-C)"
    )
    join.add_argument("share_file", metavar="SHAREFILE")
    join.add_argument(
        "--identity",
        metavar="KEY",
        help="your private key whose .pub you gave the owner "
        "(default: your usual SSH keys and agent)",
    )
    join.add_argument(
        "--kernelspec",
        action="store_true",
        help='instead, install a kernel "Shared by OWNER" for your Jupyter that '
        "attaches whenever it starts (needs the package installed)",
    )
    join.add_argument(
        "--connection-file",
        metavar="FILE",
        help="where to write the kernel connection file (default: Jupyter's runtime directory)",
    )


async def run(args: argparse.Namespace, manager: MachineManager, out: TextIO, err: TextIO) -> None:
    """Run one parsed sharing subcommand.

    Raises:
        ShareError: It failed; the message says why and what to do.
    """
    commands = SharingCommands(manager, out, err)
    if args.command == "share":
        await commands.share(
            args.kernel,
            args.pubkey,
            args.role,
            args.expires,
            args.output,
            args.address,
            args.authorized_keys,
        )
    elif args.command == "shares":
        await commands.list_shares(args.all)
    elif args.command == "revoke":
        await commands.revoke(args.share_id)
    elif args.command == "join" and args.kernelspec:
        commands.install_kernelspec(Path(args.share_file), args.identity)
    elif args.command == "join":
        await commands.join(Path(args.share_file), args.identity, args.connection_file)


class SharingCommands:
    """The sharing subcommands over one machine manager."""

    def __init__(
        self, manager: MachineManager, out: TextIO, err: TextIO, authorized_keys: str | None = None
    ) -> None:
        self.manager = manager
        self.out = out
        self.err = err
        self.owner = ShareOwner(manager.ledger, manager.log, authorized_keys)

    def _print(self, text: str = "", err: bool = False) -> None:
        stream = self.err if err else self.out
        stream.write(text + "\n")
        stream.flush()

    async def share(
        self,
        key: str,
        pubkey: str,
        role: str,
        expires: str,
        output: str | None,
        address: str | None,
        authorized_keys: str | None = None,
    ) -> Path:
        """``share``: grant, write the share file, say what to send."""
        seconds = parse_duration(expires)
        source = Path(pubkey).expanduser()
        text = source.read_text(encoding="utf-8") if source.is_file() else pubkey
        read_public_key(text)  # a bad key is named before any host is reached
        if authorized_keys:
            self.owner.authorized_keys = authorized_keys
        machine, kernel_id = await find_kernel(self.manager, key)
        granted = await self.owner.share(machine, kernel_id, text, role, seconds, address)
        path = Path(output or f"share-{granted.record.share_id}.json").expanduser()
        granted.share_file.write(path)
        record = granted.record
        self._print(
            f"Shared kernel {kernel_id} on {record.target} with {record.teammate} "
            f"({record.fingerprint}) as {role} until {time.ctime(record.expires)}."
        )
        self._print(f"Share id: {record.share_id}. Share file: {path}")
        if role == COLLABORATOR:
            self._print("It holds the kernel's key: send it privately.")
        self._print(f"They run: jupyter remote-hw join {path.name}")
        self._print(f"End it any time: jupyter remote-hw revoke {record.share_id}")
        return path

    async def list_shares(self, show_all: bool) -> list[ShareRecord]:
        """``shares``: a table of shares with who joined and when."""
        records = self.manager.ledger.shares(include_revoked=show_all)
        now = time.time()
        for target in sorted({r.target for r in records if r.revoked is None}):
            with contextlib.suppress(ShareError, AgentError, AgentUnavailableError, TransportError):
                await self.owner.sync(await open_machine(self.manager, target))
        rows = []
        for r in records:
            joins = [e for e in self.manager.ledger.share_events(r.share_id) if e.event == "joined"]
            state = (
                "revoked"
                if r.revoked
                else ("expired" if r.expires <= now else f"{_left(r.expires - now)} left")
            )
            last = (
                time.strftime("%Y-%m-%d %H:%M", time.localtime(joins[-1].time))
                if joins
                else "never"
            )
            rows.append(
                [r.share_id, r.role, r.teammate, r.kernel_id[:8], r.target, state, len(joins), last]
            )
        if rows:
            self._print(
                tabulate(
                    rows,
                    headers=[
                        "share",
                        "role",
                        "teammate",
                        "kernel",
                        "target",
                        "state",
                        "joins",
                        "last joined",
                    ],
                )
            )
        else:
            self._print(
                "No shares. Make one with: jupyter remote-hw share KERNEL --with "
                "TEAMMATE.pub --role viewer"
            )
        return records

    async def revoke(self, share_id: str) -> dict[str, Any]:
        """``revoke``: remove the key line and drop the teammate."""
        check_identifier(share_id, SHARE_ID, "share id")
        record = self.manager.ledger.get_share(share_id)
        if record is None:
            raise ShareError(
                f"no share {share_id} in the ledger {self.manager.ledger.path}; "
                "`jupyter remote-hw shares` lists them"
            )
        machine = await open_machine(self.manager, record.target)
        dropped = await self.owner.revoke(machine, share_id)
        self._print(
            f"Revoked {share_id}: key line removed from {record.target}; "
            f"{len(dropped['sessions'])} live connection(s) of {record.teammate} "
            "dropped."
        )
        return dropped

    def install_kernelspec(self, share_file: Path, identity: str | None) -> Path:
        """``join --kernelspec``: a kernel in the teammate's Jupyter that attaches when started."""
        kernels_dir = Path(jupyter_data_dir()) / "kernels"
        for name in prune_kernelspecs(kernels_dir):
            self._print(f"Removed the kernel {name}: its share has ended.")
        directory = write_kernelspec(share_file, identity, kernels_dir)
        name = json.loads((directory / "kernel.json").read_text())["display_name"]
        self._print(
            f'Installed the kernel "{name}" ({directory}). Pick it in JupyterLab: '
            "starting it attaches, shutting it down detaches; the owner's kernel "
            "keeps running."
        )
        return directory

    async def join(
        self,
        share_file: Path,
        identity: str | None,
        connection_file: str | None,
        ready: asyncio.Event | None = None,
    ) -> None:
        """``join``: attach, write a connection file, stay until Ctrl-C or revocation."""
        share = ShareFile.load(share_file)
        async with Attachment(share, identity, log=self.manager.log) as attachment:
            path = Path(
                connection_file
                or Path(jupyter_runtime_dir()) / f"kernel-share-{share.share_id}.json"
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            attachment.write_connection_file(path)
            try:
                self._print(
                    f"Attached to kernel {share.kernel_id} of {share.owner} as "
                    f"{share.role} (until {time.ctime(share.expires)})."
                )
                self._print(f"Connection file: {path}")
                self._print(f"Open it with: jupyter console --existing {path}")
                if share.role == VIEWER:
                    self._print("Viewer: you see the owner's outputs; running code is refused.")
                self._print("Ctrl-C detaches; the owner's kernel keeps running.")
                if ready is not None:
                    ready.set()
                await attachment.wait_closed()
                self._print(
                    f"{share.owner}'s host closed the connection: the share was "
                    "revoked or expired.",
                    err=True,
                )
            finally:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


def _left(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m"
