"""``jupyter remote-hw``: list, launch, stop, start, terminate and reap machines, trust
host keys; the catalog (``catalog.py``), hibernated kernels (``hibernated.py``,
``hibernating.py``) and sharing kernels with teammates (share, shares, revoke, join:
``sharing/cli.py``) come from their own modules.

Reads the same configuration as the Jupyter server (``jupyter_server_config.py``
or ``.json`` in the Jupyter config path, or ``--config FILE``) and the same
ledger, so it sees the machines the server launched and the other way round.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError
from jupyter_core.application import JupyterApp
from tabulate import tabulate
from traitlets.config import Config

from ..config_check import ConfigError, check_config, load_config_files
from ..errors import is_expected, one_line
from ..ledger import FINAL_STATES, MachineRecord
from ..machines.manager import MachineManager
from ..providers import Target
from ..providers.aws import ReapCandidate
from ..providers.aws.errors import AWSError
from ..providers.launch_steps import LaunchError
from ..transport.host_keys import TRUSTED, fetch_presented_key, record_key, refuse_changed
from ..validation import HOST, NAME, argument_type
from . import catalog as catalog_cli
from . import hibernated as hibernated_cli
from . import hibernating as hibernating_cli
from . import machines as cli_machines
from . import sharing as sharing_cli
from .base import BaseCommands, CLIError, _duration, _money
from .slurm_reaping import reap_slurm


def load_config(path: str | None) -> Config:
    """The Jupyter server's configuration (or ``path``'s), as the server would read it.

    Raises:
        CLIError: ``path`` is not a file.
        ConfigError: A file does not load, or a setting is of the wrong type or out
            of range (the message names the file and the setting).
    """
    app = JupyterApp()
    if path and not Path(path).is_file():
        raise CLIError(f"no configuration file {path}")
    config, files = load_config_files(
        ["jupyter_config", "jupyter_server_config"], app.config_file_paths, path
    )
    check_config(config, files)
    return config


class RemoteHWCommands(BaseCommands):
    """The subcommands, over one machine manager (see :class:`.base.BaseCommands`)."""

    def _machine(self, key: str) -> MachineRecord:
        record = self.manager.ledger.find_machine(key)
        if record is None:
            names = sorted(
                {m.name for m in self.manager.ledger.machines() if m.state not in FINAL_STATES}
            )
            raise CLIError(
                f"no machine {key!r} in the ledger {self.manager.ledger.path}; "
                f"the live ones are: {', '.join(names) or 'none'} "
                "(`jupyter remote-hw list`)"
            )
        return record

    # ------------------------------------------------------------------ list

    async def list_machines(self, show_all: bool, sync: bool) -> None:
        now = time.time()
        if sync and any(
            m.state not in FINAL_STATES for m in self.manager.ledger.machines(provider="aws")
        ):
            try:
                await self.aws.sync_all()
            except (AWSError, ClientError, BotoCoreError) as exc:
                self.err.write(f"warning: states as last recorded; EC2 did not answer: {exc}\n")
        models, servers = await cli_machines.machine_models(self.manager, show_all)
        if models:
            self._print(
                tabulate(
                    cli_machines.render_rows(models, _money, _duration),
                    headers=cli_machines.HEADERS,
                )
            )
        else:
            self._print(
                "no machines: pick hardware as a notebook's kernel in JupyterLab, or "
                "`jupyter remote-hw launch HARDWARE`"
            )
        if not servers:
            self.err.write(
                "no Jupyter server is running: kernels and states as the ledger "
                f"has them ({self.manager.ledger.path})\n"
            )
        records = self.manager.ledger.machines()
        total = sum(r.price_per_hour for r in records if r.active)
        spent = sum(r.cost(now) for r in self.manager.ledger.machines())
        self._print(f"\nrunning now: {_money(total)}/h · spent in all: {_money(spent)}")
        if (blocked := self.aws.usability()) is not None:
            self._print(f"AWS: {blocked.text}")

    # ------------------------------------------------------------------ lifecycle

    async def launch(
        self, hardware: str, name: str | None, region: str | None, spot: bool | None, prepare: bool
    ) -> None:
        owned = cli_machines.owned_target(self.manager, hardware)
        if owned is not None:
            raise CLIError(cli_machines.no_launch(owned))
        self.err.write(f"Launching {hardware}:\n")
        steps = self._steps(name or hardware)
        began = time.monotonic()
        record = await self.aws.launch(
            hardware, name=name, region=region, spot=spot, steps=steps, connect=prepare
        )
        self.err.write(f"Ready in {time.monotonic() - began:.1f} s.\n")
        self._print(
            tabulate(
                [
                    [
                        record.name,
                        record.instance_type,
                        record.region,
                        record.market,
                        record.state,
                        _money(record.price_per_hour),
                        record.resource_id,
                    ]
                ],
                headers=["NAME", "TYPE", "REGION", "MARKET", "STATE", "$/H", "INSTANCE"],
            )
        )
        policy = self.aws.lifetime_policy()
        if prepare:
            self._print(
                f"It stops itself after {policy['idle_stop'] / 60:.0f} min idle or "
                f"{policy['deadman'] / 60:.0f} min without a client "
                f"(c.AWSProvider.idle_stop, c.AWSProvider.deadman)."
            )

    async def stop(self, key: str, yes: bool) -> None:
        owned = cli_machines.owned_target(self.manager, key)
        if owned is not None:  # nothing to halt but its kernels: as terminate does
            await self._end_owned(owned, yes, "stop")
            return
        record = self._machine(key)
        self._require_aws(record)
        self._note(f"Stopping {record.name} ({record.resource_id})…")
        record = await self.aws.stop(record)
        self._print(
            f"{record.name} ({record.resource_id}): {record.state}; "
            f"cost so far {_money(record.cost())}"
        )

    async def start(self, key: str) -> None:
        owned = cli_machines.owned_target(self.manager, key)
        if owned is not None:
            machine = await self._ask_server(owned, "start")
            self._print(
                f"{machine['name']} ({machine['where']}): {machine['state']}, its "
                f"agent started by the Jupyter server"
            )
            return
        record = self._machine(key)
        self._require_aws(record)
        record = await self.aws.start(record, steps=self._steps(record.name))
        self._print(
            f"{record.name} ({record.resource_id}): {record.state} at "
            f"{_money(record.price_per_hour)}/h"
        )

    async def terminate(self, key: str, yes: bool) -> None:
        owned = cli_machines.owned_target(self.manager, key)
        if owned is not None:
            await self._end_owned(owned, yes, "terminate")
            return
        record = self._machine(key)
        self._require_aws(record)
        if not self._confirm(
            f"Terminate {record.name} ({record.resource_id}, "
            f"{record.instance_type})? Its disk is deleted.",
            yes,
        ):
            self._print("nothing terminated")
            return
        self._note(f"Terminating {record.name} ({record.resource_id})…")
        record = await self.aws.terminate(record)
        self._print(
            f"{record.name} ({record.resource_id}): {record.state}; it cost "
            f"{_money(record.cost())} over {_duration(record.running_seconds())}"
        )

    async def _ask_server(self, target: Target, action: str) -> dict[str, Any]:
        """``action`` on a local or SSH target, done by the running Jupyter server."""
        servers = cli_machines.running_servers()
        if not servers:
            raise CLIError(cli_machines.no_server(target, action))
        try:
            answer = await servers[0].call(
                f"{cli_machines.MACHINES_ROUTE}/{target.name}/{action}", "POST"
            )
        except cli_machines.ServerRequestError as exc:
            raise CLIError(str(exc)) from None
        except OSError as exc:
            raise CLIError(
                f"the Jupyter server at {servers[0].url} did not answer: {exc}"
            ) from None
        machine: dict[str, Any] = answer["machine"]
        return machine

    async def _end_owned(self, target: Target, yes: bool, verb: str) -> None:
        """``stop`` or ``terminate`` of a local or SSH target: the running server shuts
        down its kernels there and stops the agent (the hardware itself stays on)."""
        if not cli_machines.running_servers():
            raise CLIError(cli_machines.no_server(target, verb))
        if not self._confirm(
            f"Shut down the kernels on {target.name} ({target.where}), those "
            "%%remote started included, and stop its agent? Unsaved variables are "
            "lost.",
            yes,
        ):
            self._print("nothing " + ("stopped" if verb == "stop" else "terminated"))
            return
        ended = await self._ask_server(target, "terminate")
        count = len(ended["kernels_shut_down"])
        kept = ended.get("kernels_kept") or []
        self._print(
            f"{target.name} ({target.where}): shut down {count} "
            f"kernel{'' if count == 1 else 's'}; agent "
            f"{'stopped' if ended['agent_stopped'] else 'still running'}"
        )
        for kernel in kept:
            self._print(f"  kept {kernel['id']}: {kernel['reason']}")

    def _require_aws(self, record: MachineRecord) -> None:
        if record.provider != "aws":
            raise CLIError(
                f"{record.name} is a {record.provider} machine; only cloud machines "
                "are stopped, started and terminated here"
            )
        if record.state in FINAL_STATES:
            raise CLIError(f"{record.name} ({record.resource_id}) is already {record.state}")

    async def trust(self, host: str, yes: bool) -> None:
        """Show the key ``host`` presents and, once confirmed, record it in known_hosts."""
        owned = cli_machines.owned_target(self.manager, host)
        if owned is not None and owned.provider == "local":
            raise CLIError(
                f"{host} is {owned.where}: it is reached without SSH, so there is "
                "no host key to trust"
            )
        presented = await fetch_presented_key(host, self.manager.transport.settings)
        self._print(
            f"{host} ({presented.address}) presents {presented.algorithm} key "
            f"{presented.fingerprint}"
        )
        if presented.status == TRUSTED:
            self._print(f"already trusted in {presented.known_hosts}")
            return
        refuse_changed(presented)
        if not self._confirm(
            f"Trust this key for {presented.address} in "
            f"{presented.known_hosts}? Compare the fingerprint with the "
            "machine's own first.",
            yes,
        ):
            raise CLIError("not trusted: nothing was written")
        record_key(presented)
        self._print(f"trusted: added to {presented.known_hosts}")

    def _aws_unused(self, regions: list[str] | None) -> str | None:
        """Why reap leaves AWS out, or None to search it: AWS has no credentials and
        nothing asks for it (no ``c.AWSProvider`` settings, no ``--region``, no
        machine of it in the ledger), as on a setup of SLURM clusters or SSH hosts."""
        blocked = self.aws.usability()
        if blocked is None or regions:
            return None
        if dict.get(self.manager.config, "AWSProvider") or self.manager.ledger.machines(
            provider="aws"
        ):
            return None
        return f"AWS: skipped, it is not set up here ({blocked.text})"

    async def reap(self, yes: bool, regions: list[str] | None) -> None:
        await reap_slurm(self.manager, self._print, self._confirm, yes)
        skipped = self._aws_unused(regions)
        if skipped is not None:
            self._print(skipped)
            return
        self._note(
            f"Looking for instances tagged as yours in "
            f"{', '.join(regions) if regions else 'the configured regions'}…"
        )
        candidates: list[ReapCandidate] = await self.aws.reap_candidates(regions)
        if not candidates:
            self._print("nothing to reap: every instance tagged as yours has a live owner")
            return
        self._print(
            tabulate(
                [
                    [
                        c.instance_id,
                        c.name or "-",
                        c.instance_type,
                        c.region,
                        c.state,
                        _money(c.cost),
                        c.reason,
                    ]
                    for c in candidates
                ],
                headers=["INSTANCE", "NAME", "TYPE", "REGION", "STATE", "COST SO FAR", "WHY"],
            )
        )
        others = [c.instance_id for c in candidates if not c.launched]
        if others:
            self._print(
                f"left running: {', '.join(others)}: tagged as yours, but not launched "
                "from this ledger (anyone allowed to tag in the account can set those "
                "tags). Check them, and end them yourself if they are yours."
            )
        ours = [c for c in candidates if c.launched]
        if not ours:
            return
        if not self._confirm(f"Terminate these {len(ours)} instance(s)?", yes):
            self._print("nothing terminated")
            return
        self._note(f"Terminating {len(ours)} instance(s)…")
        ended = await self.aws.reap(ours)
        self._print(f"terminated {len(ended)}: {', '.join(ended)}")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``jupyter remote-hw``."""
    parser = argparse.ArgumentParser(
        prog="jupyter remote-hw",
        description="Cloud and cluster machines for Jupyter kernels: what runs, what it costs.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a Jupyter server config file (default: the usual config path)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser("list", help="machines, their state and cost so far")
    listing.add_argument("--all", action="store_true", help="include terminated machines")
    listing.add_argument(
        "--no-sync",
        dest="sync",
        action="store_false",
        help="show the states as last recorded, without asking EC2",
    )

    launch = commands.add_parser("launch", help="launch a cloud machine")
    launch.add_argument(
        "hardware",
        help="a catalog query ('A10G', 'a100:8', 'gpu_mem>=40 cheapest') or an instance type",
    )
    launch.add_argument(
        "--name", type=argument_type(NAME, "name"), help="its name (default aws-<instance type>)"
    )
    launch.add_argument("--region", help="the AWS region (default c.AWSProvider.region)")
    market = launch.add_mutually_exclusive_group()
    market.add_argument("--spot", dest="spot", action="store_true", default=None)
    market.add_argument("--on-demand", dest="spot", action="store_false")
    launch.add_argument(
        "--no-prepare",
        action="store_true",
        help="do not wait for SSH nor start the agent (its lifetime policy "
        "then is not enforced until a kernel uses it)",
    )

    stop = commands.add_parser(
        "stop",
        help="stop a machine (its disk stays); on a local or "
        "SSH target, shut down the kernels there",
    )
    stop.add_argument(
        "machine", type=argument_type(NAME, "machine"), help="its name, ledger id or instance id"
    )
    stop.add_argument(
        "--yes",
        action="store_true",
        help="do not ask before shutting down a local or SSH target's kernels",
    )
    start = commands.add_parser("start", help="start a stopped machine")
    start.add_argument(
        "machine", type=argument_type(NAME, "machine"), help="its name, ledger id or instance id"
    )
    terminate = commands.add_parser("terminate", help="terminate a machine and its disk")
    terminate.add_argument(
        "machine", type=argument_type(NAME, "machine"), help="its name, ledger id or instance id"
    )
    terminate.add_argument("--yes", action="store_true", help="do not ask")

    trust = commands.add_parser(
        "trust", help="show an SSH host's key fingerprint and trust it in known_hosts"
    )
    trust.add_argument(
        "host",
        type=argument_type(HOST, "host"),
        help="the host as you name it to ssh (an ssh_config alias too)",
    )
    trust.add_argument("--yes", action="store_true", help="do not ask")

    reap = commands.add_parser(
        "reap",
        help="terminate instances launched from this ledger that no live session "
        "claims; list those only tagged as yours",
    )
    reap.add_argument("--yes", action="store_true", help="do not ask (for scripts)")
    reap.add_argument("--region", action="append", help="a region to search (repeatable)")

    catalog_cli.add_parsers(commands)
    hibernated_cli.add_parsers(commands)
    hibernating_cli.add_parsers(commands)
    sharing_cli.add_parsers(commands)
    return parser


async def run(args: argparse.Namespace, config: Config, out: TextIO, err: TextIO) -> None:
    """Run one parsed command."""
    manager = MachineManager.instance(config=config)
    commands = RemoteHWCommands(manager, out, err)
    try:
        if args.command == "list":
            await commands.list_machines(args.all, args.sync)
        elif args.command == "launch":
            await commands.launch(
                args.hardware, args.name, args.region, args.spot, not args.no_prepare
            )
        elif args.command == "stop":
            await commands.stop(args.machine, args.yes)
        elif args.command == "start":
            await commands.start(args.machine)
        elif args.command == "terminate":
            await commands.terminate(args.machine, args.yes)
        elif args.command == "reap":
            await commands.reap(args.yes, args.region)
        elif args.command == "trust":
            await commands.trust(args.host, args.yes)
        elif args.command in sharing_cli.COMMANDS:
            await sharing_cli.run(args, manager, out, err)
        elif args.command in catalog_cli.COMMANDS:
            await catalog_cli.run(args, manager, out, err)
        elif args.command in hibernated_cli.COMMANDS:
            await hibernated_cli.run(args, manager, out, err)
        elif args.command in hibernating_cli.COMMANDS:
            await hibernating_cli.run(args, manager, out, err)
    finally:
        await manager.close()
        MachineManager.clear_instance()


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Entry point of ``jupyter-remote-hw`` (``jupyter remote-hw``).

    Returns:
        0 on success, 1 when the command failed (its reason on stderr), 2 for bad usage.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        asyncio.run(run(args, config, out, err))
    except Exception as exc:
        # The user's to fix (no host, no credentials, over budget...): one line, no
        # traceback. Anything else is a bug: its traceback is shown.
        if not isinstance(exc, CLIError | LaunchError | ConfigError) and not is_expected(exc):
            raise
        err.write(f"jupyter remote-hw {args.command}: {one_line(str(exc))}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
