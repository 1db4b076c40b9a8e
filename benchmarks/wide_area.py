"""Cells, kernel starts and transfers over a long link, through a delay proxy.

    python3 benchmarks/wide_area.py [--delays 0,50,100] [--cells 30] [--starts 5]
        [--first-starts 2] [--size-mib 64] [--repeat 1] [--parts cells,starts,transfer]

Starts a real sshd on 127.0.0.1 (``tests.testhosts.loopback_host``) and, in
front of it, ``delay_proxy.py``: one listener per one-way delay (``--delays``,
milliseconds), each holding every chunk for that delay in each direction (a
long link with no bandwidth limit of its own; the TCP handshake's round trip
is modelled too). An ssh_config gives each delay its own aliases, ``wanD``
and ``wanD-newI``, whose HostName/Port are that listener; a known_hosts file
trusts the test host's own key at ``[127.0.0.1]:<listener port>``, so host key
checking stays on and passes as for the host itself. RTT below is twice the
one-way delay, and "extra" is always over the 0 ms figure (the same proxy with
no delay), so the proxy's own cost drops out.

cells (``--parts cells``)
    One jupyter_server process with this extension (product defaults for the
    SSH transport), a kernel ``remote-hw-ssh-wanD`` on the host, driven as
    JupyterLab drives it: ``1+1`` CELLS times over its ``/channels``
    websocket, each timed from the execute_request to both its execute_reply
    and its idle status (``kernel_latency.round_trips``); medians.
    Goal: extra <= 1 RTT + 3 ms.
kernel starts (``--parts starts``)
    In the same server, from ``POST /api/kernels`` to the first
    kernel_info_reply on a new websocket. *Prepared*: host ``wanD`` after one
    untimed start (agent uploaded and running, SSH connection kept by the
    server), STARTS times. *First*: host ``wanD-newI``, an alias not yet
    connected whose agent root is empty, so the start connects, uploads the
    agent and starts it: FIRST_STARTS hosts. Each start is broken down, in
    RTTs as well: the launch steps the server logs (connect, prepare host,
    start kernel, connect channels; for first starts also the parts of
    prepare host), then what follows them until the POST is answered, then
    the websocket up to its first kernel_info_reply. Goals: prepared <= 4
    RTTs extra, first <= 10.
transfers (``--parts transfer``)
    As ``transfer.py`` does: a local ``python3`` kernel loads the magics and
    times ``%remote_push a --to ssh-wanD`` and ``%remote_pull a --from
    ssh-wanD --as b`` of SIZE MiB of float32 in a kernel on the host, against
    ``ssh wanD 'cat > /dev/null' < FILE`` and ``ssh wanD 'cat FILE'`` through
    the same listener (OpenSSH's login included, as users run it; the login
    alone, ``ssh wanD true``, is printed too). REPEAT runs each, the paths
    taking turns; medians. Goal: ours >= 3x ``ssh cat`` (stated for 256 MiB).

Temporary files go under ``$TMPDIR`` (``/tmp`` by default). Everything talks
to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tabulate import tabulate
from tornado.httpclient import AsyncHTTPClient

from benchmarks.kernel_latency import round_trips
from benchmarks.transfer import LocalKernel, timed
from tests.processes import kill_processes_mentioning
from tests.serverprocess import Server, start_server
from tests.testhosts import SSHTestHost, loopback_host

MIB = 1 << 20
PROXY = Path(__file__).with_name("delay_proxy.py")
PARTS = ("cells", "starts", "transfer")
STEPS = ("resolve hardware", "connect", "prepare host", "start kernel", "connect channels")


@dataclass
class Link:
    """One delay: its proxy port and the figures taken through it."""

    delay_ms: int
    port: int
    banner_s: float = 0.0
    cells: list[float] = field(default_factory=list)
    prepared: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    prepared_steps: list[dict[str, float]] = field(default_factory=list)
    first_steps: list[dict[str, float]] = field(default_factory=list)
    first_phases: list[dict[str, float]] = field(default_factory=list)
    prepared_answer: list[float] = field(default_factory=list)
    first_answer: list[float] = field(default_factory=list)
    push: list[float] = field(default_factory=list)
    pull: list[float] = field(default_factory=list)
    ssh_push: list[float] = field(default_factory=list)
    ssh_pull: list[float] = field(default_factory=list)
    login: list[float] = field(default_factory=list)

    @property
    def alias(self) -> str:
        return f"wan{self.delay_ms}"

    @property
    def rtt(self) -> float:
        return 2 * self.delay_ms / 1000

    def new_alias(self, i: int) -> str:
        return f"{self.alias}-new{i}"


# -- the link -------------------------------------------------------------------


def start_proxy(
    host: SSHTestHost, delays: list[int]
) -> tuple[subprocess.Popen[bytes], dict[int, int]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(PROXY),
            "--target",
            f"127.0.0.1:{host.port}",
            "--delays",
            ",".join(map(str, delays)),
        ],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    ports = json.loads(proc.stdout.readline())
    return proc, {int(ms): int(port) for ms, port in ports.items()}


def write_ssh_config(host: SSHTestHost, links: list[Link], first_starts: int, work: Path) -> Path:
    """Aliases through the proxy, and a known_hosts trusting the host's key at each listener."""
    key_type, key = (host.root / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    known_hosts = work / "known_hosts_wan"
    known_hosts.write_text("".join(f"[127.0.0.1]:{link.port} {key_type} {key}\n" for link in links))
    blocks = []
    for link in links:
        for alias in (link.alias, *(link.new_alias(i) for i in range(1, first_starts + 1))):
            blocks.append(
                host.config_block(alias, Port=link.port, UserKnownHostsFile=str(known_hosts))
            )
    path = work / "ssh_config_wan"
    path.write_text("".join(blocks))
    return path


def banner_seconds(port: int) -> float:
    """From connect() to sshd's banner through the proxy: 2 RTTs on a real link."""
    began = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.recv(256)
        return time.perf_counter() - began


# -- cells and kernel starts, through a jupyter_server ------------------------------------


async def ready_time(server: Server, kernel_name: str) -> tuple[float, float, str]:
    """Seconds to the first kernel_info_reply, seconds to the POST's answer, the kernel id.

    As ``kernel_latency.ready_time``, with the POST's own answer timed too.
    """
    began = time.perf_counter()
    kernel_id = (await server.api("kernels", method="POST", body={"name": kernel_name}))["id"]
    answered = time.perf_counter() - began
    kc = await server.channels(kernel_id)  # waits for a kernel_info_reply
    elapsed = time.perf_counter() - began
    await kc.close()
    return elapsed, answered, str(kernel_id)


STEP_LINE = re.compile(r"kernel (\S+) ready on (\S+): (.*)$")
PROGRESS_LINE = re.compile(r"^\[\w (\S+ \S+) \w+\] launch on (\S+): prepare host(?::| done) ?(\S*)")
#: What "prepare host" reports, in order, by the first word of each message.
PHASES = {
    "checking": "check Python",
    "uploading": "upload agent",
    "starting": "start agent",
    "connecting": "connect agent",
}


def launch_steps(log: Path) -> dict[str, dict[str, float]]:
    """Kernel id -> {step: seconds}, from the server log's launch summaries."""
    found: dict[str, dict[str, float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = STEP_LINE.search(line)
        if match:
            steps: dict[str, float] = {}
            for part in match.group(3).split(" · "):
                name, _, value = part.rpartition(" ")[0].rpartition(" ")
                steps[name] = steps.get(name, 0.0) + float(value)
            found[match.group(1)] = steps
    return found


def prepare_phases(log: Path, target: str) -> dict[str, float]:
    """The parts of one launch's "prepare host" step on ``target``, in seconds.

    Each part runs from its progress message in the server log to the next
    (the last to "prepare host done"); the log's times are to the millisecond.
    """
    marks: list[tuple[datetime.datetime, str]] = []
    for line in log.read_text(errors="replace").splitlines():
        match = PROGRESS_LINE.match(line)
        if match and match.group(2) == target:
            when = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f")
            marks.append((when, match.group(3)))
    return {
        PHASES.get(word, word): (later - when).total_seconds()
        for (when, word), (later, _) in itertools.pairwise(marks)
    }


async def server_parts(
    args: argparse.Namespace, ssh_config: Path, links: list[Link], work: Path
) -> None:
    dirs = {name: work / name for name in ("config", "data", "runtime", "nb")}
    for path in dirs.values():
        path.mkdir()
    hosts = []
    for link in links:
        hosts.append(
            {
                "host": link.alias,
                "hardware": "loopback",
                "python": sys.executable,
                "root": str(work / f"r{link.delay_ms}"),
            }
        )
        hosts += [
            {
                "host": link.new_alias(i),
                "hardware": "loopback",
                "python": sys.executable,
                "root": str(work / f"n{link.delay_ms}-{i}"),
            }
            for i in range(1, args.first_starts + 1)
        ]
    (dirs["config"] / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
                "TransportManager": {"ssh_config_files": [str(ssh_config)]},
                "SSHProvider": {"hosts": hosts, "include_ssh_config": False},
                "LocalProvider": {"state_dir": str(work / "l")},
            }
        )
    )
    log = work / "server.log"
    server = start_server(dirs, log)
    ids: dict[str, tuple[Link, str]] = {}
    try:
        await server.ready()
        for link in links:
            kernel = f"remote-hw-ssh-{link.alias}"
            # Prepare the host: the first start uploads and starts the agent. Untimed.
            _, _, kernel_id = await ready_time(server, kernel)
            await server.api("kernels", kernel_id, method="DELETE")
            if "starts" in args.parts:
                for _ in range(args.starts):
                    seconds, answered, kernel_id = await ready_time(server, kernel)
                    link.prepared.append(seconds)
                    link.prepared_answer.append(answered)
                    ids[kernel_id] = (link, "prepared")
                    await server.api("kernels", kernel_id, method="DELETE")
                for i in range(1, args.first_starts + 1):
                    seconds, answered, kernel_id = await ready_time(
                        server, f"remote-hw-ssh-{link.new_alias(i)}"
                    )
                    link.first.append(seconds)
                    link.first_answer.append(answered)
                    ids[kernel_id] = (link, "first")
                    await server.api("kernels", kernel_id, method="DELETE")
            if "cells" in args.parts:
                started = await server.api("kernels", method="POST", body={"name": kernel})
                kernel_id = started["id"]
                kc = await server.channels(kernel_id)
                link.cells = await round_trips(kc, args.cells)
                await kc.close()
                await server.api("kernels", kernel_id, method="DELETE")
            print(f"# {link.delay_ms} ms: server parts done", file=sys.stderr, flush=True)
    finally:
        server.process.terminate()
        server.process.wait(30)
        AsyncHTTPClient().close()
    for kernel_id, steps in launch_steps(log).items():
        if kernel_id in ids:
            link, kind = ids[kernel_id]
            (link.prepared_steps if kind == "prepared" else link.first_steps).append(steps)
    for link in links:
        link.first_phases = [
            prepare_phases(log, f"ssh-{link.new_alias(i)}") for i in range(1, len(link.first) + 1)
        ]


# -- transfers, from a local kernel's magics ---------------------------------------------


def openssh(ssh_config: Path, alias: str, data_file: Path) -> tuple[float, float]:
    base = ["ssh", "-F", str(ssh_config), alias]
    began = time.perf_counter()
    with data_file.open("rb") as stdin:
        subprocess.run([*base, "cat > /dev/null"], stdin=stdin, check=True)
    push = time.perf_counter() - began
    began = time.perf_counter()
    subprocess.run([*base, f"cat {data_file}"], stdout=subprocess.DEVNULL, check=True)
    return push, time.perf_counter() - began


def login_seconds(ssh_config: Path, alias: str) -> float:
    began = time.perf_counter()
    subprocess.run(["ssh", "-F", str(ssh_config), alias, "true"], check=True)
    return time.perf_counter() - began


def transfer_part(
    args: argparse.Namespace, ssh_config: Path, links: list[Link], work: Path
) -> None:
    size = args.size_mib * MIB
    config_dir = work / "kconfig"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "TransportManager": {"ssh_config_files": [str(ssh_config)]},
                "SSHProvider": {
                    "include_ssh_config": False,
                    "hosts": [
                        {
                            "host": link.alias,
                            "python": sys.executable,
                            "hardware": "loopback",
                            "root": str(work / f"t{link.delay_ms}"),
                        }
                        for link in links
                    ],
                },
                "LocalProvider": {"state_dir": str(work / "kl")},
                "MachineManager": {"ledger_path": str(work / "ledger.sqlite3")},
            }
        )
    )
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config_dir), "PYTHONPATH": str(REPO)}
    data_file = work / "data.bin"
    data_file.write_bytes(os.urandom(size))
    kernel = LocalKernel(env, work)
    try:
        kernel.run(
            "%load_ext jupyter_remote_hw\nimport numpy as np\n"
            f"a = np.random.default_rng(0).random({size // 4}, dtype=np.float32)"
        )
        for link in links:
            target = f"ssh-{link.alias}"
            kernel.run(f"%%remote {target}\npass")  # starts the kernel there; untimed
            link.login = [login_seconds(ssh_config, link.alias) for _ in range(2)]
            for _ in range(args.repeat):
                link.push.append(timed(kernel, f"remote_push a --to {target}"))
                link.pull.append(timed(kernel, f"remote_pull a --from {target} --as b"))
                kernel.run("assert (b == a).all()\ndel b")
                kernel.run(f"%%remote {target}\ndel a")
                push, pull = openssh(ssh_config, link.alias, data_file)
                link.ssh_push.append(push)
                link.ssh_pull.append(pull)
            print(f"# {link.delay_ms} ms: transfers done", file=sys.stderr, flush=True)
    finally:
        kernel.close()


# -- report --------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def in_rtts(seconds: float, link: Link) -> str:
    return f"{seconds / link.rtt:.1f}" if link.rtt else "-"


def step_median(link: Link, kind: str, step: str) -> float:
    """Median seconds of one launch step, or of what comes after the steps.

    "POST answer": from the end of the steps to the answer to ``POST
    /api/kernels``; "websocket": from that answer to the first kernel_info_reply
    on a new websocket.
    """
    records: list[dict[str, float]] = getattr(link, f"{kind}_steps")
    totals: list[float] = getattr(link, kind)
    answers: list[float] = getattr(link, f"{kind}_answer")
    values = []
    for rec, total, answer in zip(records, totals, answers, strict=False):
        if step == "POST answer":
            values.append(answer - sum(rec.values()))
        elif step == "websocket":
            values.append(total - answer)
        else:
            values.append(rec.get(step, 0.0))
    return med(values)


def goal(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(args: argparse.Namespace, links: list[Link], seconds: float) -> None:
    base = links[0]
    print(
        f"# wide area, {datetime.date.today()}, {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; delay proxy on 127.0.0.1; {seconds:.0f} s in all"
    )
    measured = {
        "cells": f"{args.cells} cells",
        "starts": f"{args.starts} prepared and {args.first_starts} first starts",
        "transfer": f"{args.size_mib} MiB x {args.repeat} per transfer path",
    }
    print(
        f"# {'; '.join(text for part, text in measured.items() if part in args.parts)}; "
        f"medians; extra = over {base.delay_ms} ms one-way; RTT = 2 x one-way"
    )
    print()
    print("link check: connect() to sshd's banner through the proxy (median of 3)")
    print(
        tabulate(
            [
                (
                    link.delay_ms,
                    f"{link.rtt * 1000:.0f}",
                    f"{link.banner_s * 1000:.0f}",
                    in_rtts(link.banner_s - base.banner_s, link),
                )
                for link in links
            ],
            headers=["one-way ms", "RTT ms", "banner ms", "extra RTTs (2 expected)"],
        )
    )

    if "cells" in args.parts:
        print()
        print(f"1+1 cell round trip, {args.cells} cells over the kernel websocket")
        zero = med(base.cells)
        print(
            tabulate(
                [
                    (
                        link.delay_ms,
                        f"{med(link.cells) * 1000:.1f}",
                        f"{min(link.cells) * 1000:.1f}",
                        f"{(med(link.cells) - zero) * 1000:.1f}",
                        in_rtts(med(link.cells) - zero, link),
                        goal(med(link.cells) - zero <= link.rtt + 0.003),
                    )
                    for link in links
                ],
                headers=[
                    "one-way ms",
                    "median ms",
                    "min ms",
                    "extra ms",
                    "extra RTTs",
                    "goal <= 1 RTT + 3 ms",
                ],
            )
        )

    if "starts" in args.parts:
        print()
        print("kernel start: POST /api/kernels to the first kernel_info_reply on a websocket")
        rows = []
        for link in links:
            p_extra = med(link.prepared) - med(base.prepared)
            f_extra = med(link.first) - med(base.first)
            rows.append(
                (
                    link.delay_ms,
                    f"{med(link.prepared):.2f}",
                    f"{p_extra:.2f}",
                    in_rtts(p_extra, link),
                    goal(p_extra <= 4 * link.rtt),
                    f"{med(link.first):.2f}",
                    f"{f_extra:.2f}",
                    in_rtts(f_extra, link),
                    goal(f_extra <= 10 * link.rtt),
                )
            )
        print(
            tabulate(
                rows,
                headers=[
                    "one-way ms",
                    "prepared s",
                    "extra s",
                    "extra RTTs",
                    "goal <= 4",
                    "first s",
                    "extra s",
                    "extra RTTs",
                    "goal <= 10",
                ],
            )
        )
        for kind in ("prepared", "first"):
            print()
            print(
                f"launch steps of {kind} starts from the server log: median s (extra RTTs); "
                "then the POST's answer, and the websocket to its first kernel_info_reply"
            )
            rows = []
            for link in links:
                row: list[str | int] = [link.delay_ms]
                for step in (*STEPS, "POST answer", "websocket"):
                    mine = step_median(link, kind, step)
                    zero = step_median(base, kind, step)
                    row.append(f"{mine:.2f} ({in_rtts(mine - zero, link)})")
                rows.append(row)
            print(tabulate(rows, headers=["one-way ms", *STEPS, "POST answer", "websocket"]))
        print()
        print("'prepare host' of first starts, from its progress messages: median s (extra RTTs)")
        rows = []
        for link in links:
            row = [link.delay_ms]
            for phase in PHASES.values():
                mine = med([p[phase] for p in link.first_phases if phase in p])
                zero = med([p[phase] for p in base.first_phases if phase in p])
                row.append(f"{mine:.2f} ({in_rtts(mine - zero, link)})")
            rows.append(row)
        print(tabulate(rows, headers=["one-way ms", *PHASES.values()]))

    if "transfer" in args.parts:
        print()
        print(
            f"{args.size_mib} MiB float32: %remote_push / %remote_pull against ssh cat of the "
            "same bytes, MiB/s; ratio = ours / ssh cat (login included, as users run it); "
            "'no login' = ssh cat's time less the login"
        )
        rows = []
        for link in links:
            login = med(link.login)
            ratios = []
            row: list[str | int] = [link.delay_ms]
            for ours, ssh in ((link.push, link.ssh_push), (link.pull, link.ssh_pull)):
                ratio = med(ssh) / med(ours)
                ratios.append(ratio)
                row += [
                    f"{args.size_mib / med(ours):.1f}",
                    f"{args.size_mib / med(ssh):.1f}",
                    f"{ratio:.2f}",
                    f"{(med(ssh) - login) / med(ours):.2f}",
                ]
            rows.append([*row, f"{login:.2f}", goal(min(ratios) >= 3)])
        print(
            tabulate(
                rows,
                headers=[
                    "one-way ms",
                    "push",
                    "ssh cat",
                    "ratio",
                    "no login",
                    "pull",
                    "ssh cat",
                    "ratio",
                    "no login",
                    "ssh login s",
                    "goal >= 3x",
                ],
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--delays",
        default="0,50,100",
        help="one-way delays, ms; the first is the baseline the extras are taken over",
    )
    parser.add_argument("--cells", type=int, default=30, help="1+1 cells per delay")
    parser.add_argument("--starts", type=int, default=5, help="prepared starts per delay")
    parser.add_argument("--first-starts", type=int, default=2, help="new hosts per delay")
    parser.add_argument("--size-mib", type=int, default=64, help="array size per transfer")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each transfer path")
    parser.add_argument("--parts", default=",".join(PARTS), help="which of " + ",".join(PARTS))
    args = parser.parse_args()
    args.parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not args.parts <= set(PARTS):
        parser.error(f"--parts: choose from {', '.join(PARTS)}")
    delays = [int(d) for d in args.delays.split(",") if d.strip()]
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="jrhw-w-"))
    proxy = None
    try:
        with loopback_host(work / "host") as host:
            proxy, ports = start_proxy(host, delays)
            links = [Link(ms, ports[ms]) for ms in delays]
            ssh_config = write_ssh_config(host, links, args.first_starts, work)
            for link in links:
                link.banner_s = statistics.median(banner_seconds(link.port) for _ in range(3))
            if args.parts & {"cells", "starts"}:
                asyncio.run(server_parts(args, ssh_config, links, work))
            if "transfer" in args.parts:
                transfer_part(args, ssh_config, links, work)
            report(args, links, time.perf_counter() - began)
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(10)
        # Agents and kernels left on the host (all under this run's own directory).
        kill_processes_mentioning(str(work))
        if os.environ.get("KEEP"):
            print("kept", work)
        else:
            with contextlib.suppress(OSError):
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
