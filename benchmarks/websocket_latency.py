"""Cell round trips through the kernel websocket, with and without Nagle delay, against ZMQ.

    python3 benchmarks/websocket_latency.py [--cells 200] [--rounds 4]

Starts two jupyter_server processes on 127.0.0.1 with a token and this
extension, each with one local ``python3`` kernel (jupyter_client's own local
provisioner):

ours
    The server as the extension sets it up: kernel websockets sent without
    Nagle delay (``NoDelayWebsocketConnection``).
stock
    The same, with ``--ServerApp.kernel_websocket_connection_class=`` set to
    jupyter_server's own ``ZMQChannelsWebsocketConnection``, which the
    extension then leaves in place (Nagle's algorithm on, as without us).

A round trip is ``1+1`` timed from sending the execute_request to having both
its execute_reply and its idle status. Each path runs CELLS cells (after 5
untimed ones per round), split into ROUNDS rounds taken in turn, so that other
load on the machine falls on all paths alike:

ws
    Through the kernel's ``/api/kernels/<id>/channels`` websocket, as
    JupyterLab drives it. The client sets TCP_NODELAY on its own socket, as
    browsers do, so what differs between ours and stock is the server side.
zmq
    The same kernel straight over its ZMQ channels (jupyter_client on the
    connection file the server wrote): no server in the way.

The ratio that counts is median ours ws / median zmq of the same kernel
(target <= 1.5: the server's extra hop and nothing more).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tornado.httpclient import AsyncHTTPClient

from benchmarks.kernel_latency import describe, round_trips, zmq_round_trips
from tests.serverprocess import Server, start_server

STOCK_CLASS = "jupyter_server.services.kernels.connection.channels.ZMQChannelsWebsocketConnection"
MODES = {
    "ours": [],
    "stock": [f"--ServerApp.kernel_websocket_connection_class={STOCK_CLASS}"],
}


def server_dirs(work: Path) -> dict[str, Path]:
    """Config, data, runtime and root dirs under ``work``, with the extension enabled."""
    dirs = {name: work / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir(parents=True)
    (dirs["config"] / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}}})
    )
    return dirs


async def ws_block(server: Server, kernel_id: str, cells: int) -> list[float]:
    """Per-cell seconds through a new websocket to the kernel."""
    kc = await server.channels(kernel_id)
    try:
        kc.ws.protocol.stream.set_nodelay(True)  # as browsers do on their side
        return await round_trips(kc, cells)
    finally:
        await kc.close()


async def run(args: argparse.Namespace, work: Path) -> None:
    servers: dict[str, Server] = {}
    runtime: dict[str, Path] = {}
    kernels: dict[str, str] = {}
    ws: dict[str, list[float]] = {mode: [] for mode in MODES}
    zmq: dict[str, list[float]] = {mode: [] for mode in MODES}
    per_round = max(1, args.cells // args.rounds)
    try:
        for mode, options in MODES.items():
            dirs = server_dirs(work / mode)
            runtime[mode] = dirs["runtime"]
            servers[mode] = start_server(dirs, work / f"{mode}.log", args=options)
        for mode, server in servers.items():
            await server.ready()
            kernel = await server.api("kernels", method="POST", body={"name": "python3"})
            kernels[mode] = str(kernel["id"])
        for _ in range(args.rounds):
            for mode, server in servers.items():
                ws[mode] += await ws_block(server, kernels[mode], per_round)
                connection_file = runtime[mode] / f"kernel-{kernels[mode]}.json"
                zmq[mode] += await zmq_round_trips(connection_file, per_round)
        for mode, server in servers.items():
            await server.api("kernels", kernels[mode], method="DELETE")
    finally:
        for server in servers.values():
            server.process.terminate()
            server.process.wait(30)
        AsyncHTTPClient().close()

    # The stock server must have kept the class it was given, and said so.
    said = {
        mode: "kernel_websocket_connection_class is" in (work / f"{mode}.log").read_text()
        for mode in MODES
    }
    if said != {"ours": False, "stock": True}:
        raise RuntimeError(f"the servers did not run the connection classes expected: {said}")

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print(
        f"# websocket latency, {datetime.date.today()}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(
        f"# {per_round * args.rounds} cells of 1+1 per path, in {args.rounds} rounds; "
        "local python3 kernel"
    )
    print()
    for mode in MODES:
        print(f"ws trip   {mode:<6}  {describe(ws[mode])}")
        print(f"zmq trip  {mode:<6}  {describe(zmq[mode])}   (the same kernel, no server)")
    print()
    ours = median(ws["ours"]) / median(zmq["ours"])
    stock = median(ws["stock"]) / median(zmq["stock"])
    print(f"ratio ours ws / zmq (median)   {ours:5.2f}   target <= 1.5")
    print(f"ratio stock ws / zmq (median)  {stock:5.2f}")
    print(f"ratio stock ws / ours ws       {median(ws['stock']) / median(ws['ours']):5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200, help="1+1 cells per path")
    parser.add_argument(
        "--rounds",
        type=int,
        default=4,
        help="rounds the cells are split into, the paths taking turns",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrhw-ws-"))
    try:
        asyncio.run(run(args, work))
    finally:
        if os.environ.get("KEEP"):
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
