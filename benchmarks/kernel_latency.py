"""Kernel latency through Jupyter: a kernel on a loopback SSH host against a local ipykernel.

    python3 benchmarks/kernel_latency.py [--cells 200] [--starts 5]

Starts a real sshd on 127.0.0.1 (``tests.testhosts.loopback_host``) and one
jupyter_server process with this extension, configured with that host as the
target ``ssh-testhost``. Both kernels are driven exactly as JupyterLab drives
them: REST to start, the ``/api/kernels/<id>/channels`` websocket to run code.

round trip
    ``1+1`` executed CELLS times in a row; each is timed from sending the
    execute_request to receiving both its execute_reply and its idle status.
    Remote: ``remote-hw-ssh-testhost`` (agent on the host, channels through
    our SSH forwards). Local: ``python3`` (jupyter_client's own local
    provisioner). The ratio is median remote / median local (target <= 1.3).
    The same cells are also timed straight over the kernel's ZMQ channels
    (jupyter_client, the connection file the server wrote), which shows what
    our SSH forwards add without the server. (Before kernel websockets were
    sent without Nagle delay, the websocket path had a floor of about 48 ms
    per cell, the same for both kernels; see websocket_latency.py.)

kernel ready
    From ``POST /api/kernels`` to the kernel's first kernel_info_reply on a
    new websocket, STARTS times for each, shutting each kernel down before the
    next. The host is prepared first (one untimed launch uploads the agent);
    the agent itself stops when its last kernel goes, so each timed remote
    start includes starting the agent. The SSH connection is kept by the
    server between kernels, as in normal use. Ratio: median remote / median
    local (target <= 1.5).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from jupyter_client.asynchronous import AsyncKernelClient
from tornado.httpclient import AsyncHTTPClient

from tests.kernelws import KernelChannels
from tests.provisioner.conftest import write_config
from tests.serverprocess import Server, start_server
from tests.testhosts import SSHTestHost, loopback_host

REMOTE = "remote-hw-ssh-testhost"
LOCAL = "python3"


async def ready_time(server: Server, kernel_name: str) -> tuple[float, str]:
    """Seconds from the start request to the first kernel_info_reply; and the kernel id."""
    began = time.perf_counter()
    kernel_id = (await server.api("kernels", method="POST", body={"name": kernel_name}))["id"]
    kc = await server.channels(kernel_id)  # waits for a kernel_info_reply
    elapsed = time.perf_counter() - began
    await kc.close()
    return elapsed, str(kernel_id)


async def zmq_round_trips(connection_file: Path, cells: int) -> list[float]:
    """Per-cell seconds for ``1+1`` over the kernel's ZMQ channels, without the websocket."""
    client = AsyncKernelClient()
    client.load_connection_file(str(connection_file))
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=60)

        async def one() -> None:
            msg_id = client.execute("1+1")
            reply = await client.get_shell_msg(timeout=30)
            assert reply["parent_header"]["msg_id"] == msg_id
            while True:
                msg = await client.get_iopub_msg(timeout=30)
                if (
                    msg["parent_header"].get("msg_id") == msg_id
                    and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"
                ):
                    return

        for _ in range(5):
            await one()
        times = []
        for _ in range(cells):
            began = time.perf_counter()
            await one()
            times.append(time.perf_counter() - began)
        return times
    finally:
        client.stop_channels()


async def round_trips(kc: KernelChannels, cells: int) -> list[float]:
    """Per-cell seconds for ``1+1``, after a few untimed warm-up cells."""
    for _ in range(5):
        await kc.execute("1+1")
    times = []
    for _ in range(cells):
        began = time.perf_counter()
        done = await kc.execute("1+1")
        times.append(time.perf_counter() - began)
        if done.result != "2":
            raise RuntimeError(f"unexpected result {done.result!r}")
    return times


def describe(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"median {statistics.median(ms):8.2f} ms   p90 {p90:8.2f} ms   min {ms[0]:8.2f} ms"


async def run(args: argparse.Namespace, host: SSHTestHost, work: Path) -> None:
    dirs = {name: work / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    remote_root = work / "r"
    write_config(
        dirs["config"] / "jupyter_server_config.json",
        host.ssh_config,
        remote_root,
        work / "l",
        [
            {
                "host": host.alias,
                "hardware": "loopback",
                "root": str(remote_root),
                "python": sys.executable,
            }
        ],
    )
    server = start_server(dirs, work / "server.log")
    try:
        await server.ready()
        # Prepare the host: the first launch uploads the agent. Untimed.
        _, kernel_id = await ready_time(server, REMOTE)
        await server.api("kernels", kernel_id, method="DELETE")

        ready: dict[str, list[float]] = {REMOTE: [], LOCAL: []}
        for _ in range(args.starts):
            for name in (LOCAL, REMOTE):
                seconds, kernel_id = await ready_time(server, name)
                ready[name].append(seconds)
                await server.api("kernels", kernel_id, method="DELETE")

        trips: dict[str, list[float]] = {}
        zmq_trips: dict[str, list[float]] = {}
        for name in (LOCAL, REMOTE):
            kernel_id = (await server.api("kernels", method="POST", body={"name": name}))["id"]
            kc = await server.channels(kernel_id)
            trips[name] = await round_trips(kc, args.cells)
            await kc.close()
            connection_file = dirs["runtime"] / f"kernel-{kernel_id}.json"
            zmq_trips[name] = await zmq_round_trips(connection_file, args.cells)
            await server.api("kernels", kernel_id, method="DELETE")
    finally:
        server.process.terminate()
        server.process.wait(30)
        AsyncHTTPClient().close()

    print(
        f"# kernel latency, {datetime.date.today()}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"# {args.cells} cells of 1+1; {args.starts} starts per kernel")
    print()
    print(f"round trip  local   {describe(trips[LOCAL])}")
    print(f"round trip  remote  {describe(trips[REMOTE])}")
    trip_ratio = statistics.median(trips[REMOTE]) / statistics.median(trips[LOCAL])
    print(f"round trip  ratio remote/local (median) {trip_ratio:.2f}   target <= 1.3")
    print()
    print(f"zmq trip    local   {describe(zmq_trips[LOCAL])}")
    print(f"zmq trip    remote  {describe(zmq_trips[REMOTE])}")
    zmq_ratio = statistics.median(zmq_trips[REMOTE]) / statistics.median(zmq_trips[LOCAL])
    print(f"zmq trip    ratio remote/local (median) {zmq_ratio:.2f}")
    print()
    print(f"ready       local   {describe(ready[LOCAL])}")
    print(f"ready       remote  {describe(ready[REMOTE])}")
    ready_ratio = statistics.median(ready[REMOTE]) / statistics.median(ready[LOCAL])
    print(f"ready       ratio remote/local (median) {ready_ratio:.2f}   target <= 1.5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200, help="1+1 cells per kernel")
    parser.add_argument("--starts", type=int, default=5, help="timed starts per kernel")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jrhw-b-", dir="/tmp"))
    try:
        with loopback_host(work / "host") as host:
            asyncio.run(run(args, host, work))
    finally:
        if os.environ.get("KEEP"):
            print("kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
