"""Command line: ``python -m jupyter_remote_hw.agent serve --state-dir DIR [--daemon]``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys

from . import AGENT_VERSION
from .daemon import serve
from .metrics import MetricsSampler


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the command.

    Args:
        argv: Arguments after the program name; ``sys.argv[1:]`` by default.

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_remote_hw.agent",
        description="jupyter-remote-hw host agent: runs kernels on this machine.",
    )
    parser.add_argument("--version", action="version", version=AGENT_VERSION)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser(
        "serve",
        help="serve the agent protocol on DIR/agent.sock",
        description="Serve the agent protocol on DIR/agent.sock. Prints one JSON line "
        '({"socket", "pid", "version"} or {"error"}) once ready.',
    )
    serve_parser.add_argument("--state-dir", required=True, metavar="DIR", help="state directory")
    serve_parser.add_argument(
        "--daemon",
        action="store_true",
        help="detach from this session (survives SSH logout) and exit once the agent is ready; "
        "reuse an agent that already serves DIR",
    )
    serve_parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    serve_parser.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="exit after SECONDS with no kernel and no client connected (default 0: never)",
    )
    commands.add_parser(
        "metrics",
        help="print one JSON reading of this machine's use (CPU, memory, GPUs)",
        description="Print one reading of this machine's use as a JSON line: what the "
        "agent of a multi-node allocation reads on each of its other nodes.",
    )
    args = parser.parse_args(argv)
    if args.command == "metrics":
        reading = asyncio.run(MetricsSampler().sample(None))
        host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        sys.stdout.write(json.dumps({"host": host, **reading}) + "\n")
        return 0
    if args.command == "serve":
        return serve(
            args.state_dir, daemon=args.daemon, log_level=args.log_level, idle_exit=args.idle_exit
        )
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
