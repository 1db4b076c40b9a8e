"""``jupyter remote-hw hibernated``: the saved state of hibernated kernels on this
machine's disk, each with its size and what it holds, the total against the cap, and
``--delete KERNEL`` to free the room one takes. When Jupyter servers of this user run,
a ``server`` column says which of those kernels a server still has.

:func:`add_parsers` adds the subcommand to the main parser's subcommands, and
:func:`run` runs it over the process's machine manager.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from tabulate import tabulate

from ..hibernation import HibernationStore
from ..hibernation.far import FarPlace
from ..hibernation.store import size_text
from ..machines.manager import MachineManager
from ..validation import KERNEL_ID, argument_type
from .base import BaseCommands, CLIError, _ago
from .hibernating import held_kernels

COMMANDS = ("hibernated",)
"""The subcommands this module adds."""


def add_parsers(commands: Any) -> None:
    """Add the hibernated subcommand to ``commands`` (an argparse subparsers object)."""
    hibernated = commands.add_parser(
        "hibernated", help="saved state of hibernated kernels, with sizes; --delete KERNEL"
    )
    hibernated.add_argument(
        "--delete",
        metavar="KERNEL",
        type=argument_type(KERNEL_ID, "kernel"),
        help="delete the saved state of this kernel (its id, or the start of it)",
    )
    hibernated.add_argument("--yes", action="store_true", help="do not ask")


async def run(args: argparse.Namespace, manager: MachineManager, out: TextIO, err: TextIO) -> None:
    """Run one parsed hibernated subcommand."""
    commands = HibernatedCommands(manager, out, err)
    if args.delete:
        await commands.delete(args.delete, args.yes)
    else:
        commands.list(await held_kernels())


class HibernatedCommands(BaseCommands):
    """The hibernated subcommands, over one machine manager (see :class:`.base.BaseCommands`).

    The store is the one the Jupyter server uses: ``c.HibernationStore`` from the same
    configuration files.
    """

    def __init__(self, manager: MachineManager, out: TextIO, err: TextIO) -> None:
        super().__init__(manager, out, err)
        self.store = HibernationStore(parent=manager)

    def list(self, held: dict[str, str] | None = None) -> None:
        """One row per saved kernel, then the total against the cap.

        Args:
            held: The URL of the running Jupyter server that has each kernel, by kernel
                id: when any is given, a ``server`` column says which kernel a server
                still has (its next cell wakes it) and which none has.
        """
        entries = self.store.entries()
        now = time.time()
        rows = []
        for entry in entries:
            manifest = entry.manifest
            variables = manifest.get("variables") or []
            left = manifest.get("left_out") or []
            rows.append(
                [
                    entry.entry_id[:8],
                    manifest.get("target") or manifest.get("kernel_name") or "?",
                    _ago(entry.saved_at, now),
                    size_text(entry.nbytes),
                    (entry.far or {}).get("label") or "this machine",
                    len(variables),
                    ", ".join(str(item.get("name")) for item in left) or "-",
                    "yes" if manifest.get("run_by_others") else "-",
                    entry.problem or "",
                ]
                + ([held.get(entry.entry_id, "-")] if held else [])
            )
        if rows:
            self._print(
                tabulate(
                    rows,
                    headers=[
                        "kernel",
                        "hardware",
                        "saved",
                        "size",
                        "kept on",
                        "variables",
                        "left out",
                        "others ran code",
                        "problem",
                    ]
                    + (["server"] if held else []),
                )
            )
        else:
            self._print("no hibernated kernel state is kept on this machine")
        cap = self.store.max_bytes
        total = sum(entry.nbytes for entry in entries)
        limit = f" of {size_text(cap)} (c.HibernationStore.max_bytes)" if cap else " (no cap)"
        self._print(f"in all: {size_text(total)}{limit}, in {self.store.path}")

    async def delete(self, kernel: str, yes: bool) -> None:
        """Delete one kernel's saved state, found by its id or the start of it."""
        found = [e for e in self.store.entries() if e.entry_id.startswith(kernel)]
        if not found:
            raise CLIError(
                f"no saved state of kernel {kernel}: `jupyter remote-hw hibernated` lists them"
            )
        if len(found) > 1:
            raise CLIError(
                f"{kernel} is the start of {len(found)} kernels' ids "
                f"({', '.join(e.entry_id[:12] for e in found)}); give more of it"
            )
        entry = found[0]
        server = (await held_kernels()).get(entry.entry_id)
        question = (
            f"Delete the saved state of kernel {entry.entry_id} ({size_text(entry.nbytes)})? "
            "A hibernated kernel cannot wake without it."
            + (f" The Jupyter server at {server} still has this kernel." if server else "")
        )
        if not self._confirm(question, yes):
            self._print("nothing deleted")
            return
        self.store.delete(entry.entry_id)
        self._print(
            f"deleted the saved state of kernel {entry.entry_id} ({size_text(entry.nbytes)})"
        )
        if server:
            self._print(
                f"the Jupyter server at {server} still has kernel {entry.entry_id}: its cells "
                "now answer that its saved state was deleted; restart the kernel there to "
                "run cells in a fresh one, or shut it down"
            )
        place = FarPlace.from_json(entry.far)
        if place is not None:
            self._print(await self._remove_far(place))

    async def _remove_far(self, place: FarPlace) -> str:
        """Remove the files a far entry keeps on a cluster or an instance; what was done."""
        provider = self.manager.providers.get(place.provider)
        kept = f"its variables stay in {place.path} on {place.label}"
        if provider is None:
            return f"{kept}: no {place.provider} provider here to remove them"
        try:
            done = await provider.remove_hibernated(place)
        except OSError as exc:
            return f"{kept}: {exc}"
        return done
