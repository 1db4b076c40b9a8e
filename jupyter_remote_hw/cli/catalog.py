"""``jupyter remote-hw catalog``: the hardware catalog, with this machine and the SSH
and SLURM targets beside it, and ``catalog refresh`` from the EC2 and Pricing APIs.

:func:`add_parsers` adds the subcommand to the main parser's subcommands, and
:func:`run` runs it over the process's machine manager.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import difflib
from pathlib import Path
from typing import Any, TextIO

from tabulate import tabulate

from ..catalog import CatalogEntry, user_catalog_path, write_catalog
from ..catalog.refresh import refresh_entries
from ..machines.manager import MachineManager
from .base import BaseCommands, CLIError, _money

COMMANDS = ("catalog",)
"""The subcommands this module adds."""


def add_parsers(commands: Any) -> None:
    """Add the catalog subcommand to ``commands`` (an argparse subparsers object)."""
    catalog = commands.add_parser("catalog", help="the hardware catalog, or `catalog refresh`")
    catalog.add_argument(
        "query",
        nargs="*",
        help="a query ('A10G', 'a100:8', 'trainium', 'gpu_mem>=40', 'accelerator_mem>=32', "
        "'cheapest', '<=2', 'spot'), or `refresh`",
    )
    catalog.add_argument(
        "--region",
        action="append",
        help="only this region (refresh: refresh this region; repeatable)",
    )
    catalog.add_argument(
        "--no-targets", action="store_true", help="leave out this machine and the SSH hosts"
    )
    catalog.add_argument(
        "--probe", action="store_true", help="ask each SSH host's agent what hardware it has"
    )
    catalog.add_argument("--output", help="refresh: write here instead of the user catalog")
    catalog.add_argument(
        "--all",
        action="store_true",
        dest="show_all",
        help="list the AWS rows even when AWS cannot be used now",
    )


async def run(args: argparse.Namespace, manager: MachineManager, out: TextIO, err: TextIO) -> None:
    """Run one parsed catalog subcommand."""
    commands = CatalogCommands(manager, out, err)
    if args.query[:1] == ["refresh"]:
        await commands.refresh(args.region, args.output)
    else:
        region = args.region[0] if args.region else None
        await commands.catalog(
            " ".join(args.query), region, not args.no_targets, args.probe, args.show_all
        )


def _devices(entry: CatalogEntry) -> tuple[int | str, str]:
    """The listing's ACCELS and GIB EACH cells: the GPUs, else the other accelerators."""
    if entry.gpu_count:
        return entry.gpu_count, f"{entry.gpu_memory_gib:g}"
    if entry.accelerator_count:
        return entry.accelerator_count, f"{entry.accelerator_memory_gib:g}"
    return 0, "-"


class CatalogCommands(BaseCommands):
    """The catalog subcommands, over one machine manager (see :class:`.base.BaseCommands`)."""

    async def catalog(
        self, query: str, region: str | None, targets: bool, probe: bool, show_all: bool = False
    ) -> None:
        catalog = self.aws.catalog
        if region is not None and region not in catalog.regions:
            close = difflib.get_close_matches(region, catalog.regions, n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise CLIError(
                f"unknown region {region!r}: the catalog lists {len(catalog.regions)} regions "
                f"(`jupyter remote-hw catalog refresh --region {region}` adds it){hint}"
            )
        entries: list[CatalogEntry] = catalog.search(query, region)
        # Without credentials the AWS rows fold into one line, as in the pickers; a
        # query or --all shows them anyway (their specs and prices are worth reading).
        blocked = self.aws.usability()
        folded = blocked is not None and not query.strip() and not show_all
        rows: list[list[Any]] = (
            []
            if folded
            else [
                [
                    e.instance_type,
                    "aws",
                    e.region,
                    e.hardware,
                    *_devices(e),
                    e.vcpus,
                    f"{e.memory_gib:g}",
                    _money(e.on_demand_usd_per_hour)
                    if e.on_demand_usd_per_hour is not None
                    else "price unknown",
                    e.price_date or "-",
                    _money(e.spot_usd_per_hour) if e.spot_usd_per_hour is not None else "-",
                    e.spot_price_date or "-",
                ]
                for e in entries
            ]
        )
        if targets and not query.strip():
            rows = await self._target_rows(probe) + rows
        headers = [
            "NAME",
            "PROVIDER",
            "REGION/WHERE",
            "HARDWARE",
            "ACCELS",
            "GIB EACH",
            "VCPUS",
            "MEM GIB",
            "$/H",
            "$/H READ",
            "SPOT $/H",
            "SPOT READ",
        ]
        self._print(tabulate(rows, headers=headers))
        if blocked is not None:
            more = (
                (f" ({len(entries)} types folded; `jupyter remote-hw catalog --all` lists them)")
                if folded
                else ""
            )
            self._print(f"\nAWS: {blocked.text}{more}")
        self._print(f"\n{len(entries)} of {len(catalog.entries)} catalog rows ({catalog.source})")

    async def _target_rows(self, probe: bool) -> list[list[Any]]:
        rows = []
        for target in self.manager.targets():
            if target.provider not in ("local", "ssh", "slurm"):
                continue
            report: dict[str, Any] = {}
            if probe and target.provider != "slurm":  # probing would submit a job
                self._note(f"Asking {target.name} for its hardware…")
                try:
                    machine = await self.manager.machine(target, self._steps(target.name))
                    report = await (await machine.agent()).call("hardware")
                except Exception as exc:  # noqa: BLE001 (listed as unreachable, not fatal)
                    report = {"summary": f"unreachable: {exc}"}
            # GPUs, else the accelerators that are not GPUs (Trainium, Gaudi).
            devices = report.get("gpus") or report.get("accelerators") or []
            memory = report.get("memory_mib")
            rows.append(
                [
                    target.name,
                    target.provider,
                    target.where,
                    report.get("summary") or target.hardware,
                    len(devices) if report else "-",
                    f"{devices[0]['memory_mib'] / 1024:.1f}"
                    if devices and devices[0].get("memory_mib")
                    else "-",
                    report.get("cpu_count", "-"),
                    f"{memory / 1024:.1f}" if memory else "-",
                    "$0",
                    "-",
                    "-",
                    "-",
                ]
            )
        return rows

    async def refresh(self, regions: list[str] | None, output: str | None) -> None:
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        catalog = self.aws.catalog
        regions = regions or catalog.regions
        clients = {r: self.aws.client("ec2", r) for r in regions}
        try:
            pricing = self.aws.client("pricing", "us-east-1")
            entries, warnings = await asyncio.to_thread(
                refresh_entries,
                clients,
                pricing,
                catalog.entries,
                today=datetime.date.today().isoformat(),
            )
        except NoCredentialsError:
            raise CLIError(
                "catalog refresh needs AWS credentials (`aws configure`, "
                "AWS_PROFILE or an instance role); the shipped catalog stays "
                "in use meanwhile"
            ) from None
        except (ClientError, BotoCoreError) as exc:
            raise CLIError(f"catalog refresh: DescribeInstanceTypes failed: {exc}") from None
        kept = [e for e in catalog.entries if e.region not in regions]
        path = Path(output) if output else user_catalog_path()
        write_catalog(path, kept + entries)
        for warning in warnings:
            self.err.write(f"warning: {warning}\n")
        self._print(
            f"wrote {len(kept) + len(entries)} rows ({len(entries)} refreshed in "
            f"{', '.join(regions)}) to {path}"
        )
