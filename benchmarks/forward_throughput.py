"""Throughput of our SSH local forward against OpenSSH, on one loopback sshd.

    python3 benchmarks/forward_throughput.py [--size-mib 1024] [--repeat 3]

Starts a real sshd on 127.0.0.1 (``tests.testhosts.loopback_host``) in a
temporary directory, plus a TCP sink on that host, then pushes SIZE bytes
host-ward along three paths and reports the median throughput of each:

ours
    ``SSHConnection.forward_local_port`` to the sink; ``tcp_push.py``, a
    separate process with a plain blocking socket, writes into the local port.
    Timed from the first byte to the sink's line confirming the byte count.
openssh-stdin
    ``ssh -F CONFIG ALIAS 'cat > /dev/null'`` fed the same bytes on stdin by
    ``tcp_push.py``. Timed from the start of ``ssh`` to its exit, so it
    includes OpenSSH's login (printed as "ssh login" in the header).
openssh -L
    ``ssh -N -L`` to the same sink, driven exactly like ours: the
    like-for-like forward comparison.

Each path runs once with the cipher every tool negotiates by default, then
once per ``--cipher`` with that cipher pinned for both through a ``Ciphers``
line in the ssh_config (which asyncssh and OpenSSH both honour). The ratio
is ours / openssh-stdin (the target is >= 0.7) and ours / openssh -L.

The CPU columns say who is busy: "client" is the forwarding process (our
Python process, or ``ssh``), "server" is the sshd process tree (sshd and,
for openssh-stdin, ``cat``), both as a share of one core over the wall time.

``--profile PREFIX`` adds, per cipher setting, one untimed run of ours under
cProfile (event-loop thread only) and writes its statistics to
``PREFIX-<setting>.prof`` (view with ``python3 -m pstats``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import asyncssh

from jupyter_remote_hw.transport import SSHConnection, TransportSettings
from tests.testhosts import SSHTestHost, free_port, loopback_host, wait_for_port

MIB = 1 << 20
TARGET_RATIO = 0.7
_TICK = os.sysconf("SC_CLK_TCK")


# -- measuring ----------------------------------------------------------------


@dataclass
class Sample:
    """One timed transfer."""

    seconds: float
    client_cpu: float | None = None
    server_cpu: float | None = None


@dataclass
class Series:
    """All runs of one path with one cipher setting."""

    path: str
    setting: str
    cipher: str
    samples: list[Sample] = field(default_factory=list)

    def mibps(self, size: int) -> list[float]:
        return [size / MIB / s.seconds for s in self.samples]

    def median_mibps(self, size: int) -> float:
        return statistics.median(self.mibps(size))

    def cpu_share(self, which: str) -> float | None:
        values = [
            getattr(s, which) / s.seconds for s in self.samples if getattr(s, which) is not None
        ]
        return statistics.median(values) if values else None


def proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of process ``pid`` (plus its reaped children's when asked)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICK


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its live descendants, and of those they reaped."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(stat[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == pid and p not in tree]
        tree.update(kids)
        frontier.extend(kids)
    total = 0.0
    for pid in tree:
        with contextlib.suppress(OSError):
            total += proc_cpu(pid, children=True)
    return total


PUSH = Path(__file__).with_name("tcp_push.py")


def openssh_version() -> str:
    """What ``ssh -V`` says."""
    return subprocess.run(["ssh", "-V"], check=False, capture_output=True, text=True).stderr.strip()


def push_to_port(port: int, size: int) -> float:
    """Run ``tcp_push.py`` into 127.0.0.1:``port``; return its seconds to the sink's answer."""
    done = subprocess.run(
        [sys.executable, str(PUSH), str(port), str(size)],
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"tcp_push.py failed: {done.stderr.strip()}")
    return float(done.stdout)


# -- the host -------------------------------------------------------------------


@dataclass
class Bench:
    host: SSHTestHost
    sink_port: int
    size: int
    sshd_pid: int

    def config(self, cipher: str | None) -> Path:
        """ssh_config for the host alias, with ``Ciphers`` pinned when given."""
        if cipher is None:
            return self.host.ssh_config
        path = self.host.root / f"ssh_config.{re.sub(r'[^A-Za-z0-9]+', '_', cipher)}"
        path.write_text(self.host.config_block(Ciphers=cipher))
        return path

    def ssh(self, config: Path, *args: str) -> list[str]:
        return ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-T", "-x", *args]

    def login_seconds(self) -> float:
        """Median time of ``ssh ALIAS true``: the login cost inside openssh-stdin's time."""
        times = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(self.ssh(self.host.ssh_config, self.host.alias, "true"), check=True)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def openssh_cipher(self, config: Path) -> str:
        out = subprocess.run(
            self.ssh(config, "-v", self.host.alias, "true"),
            capture_output=True,
            text=True,
            check=True,
        ).stderr
        found = re.search(r"kex: client->server cipher: (\S+)", out)
        return found.group(1) if found else "?"

    # -- openssh-stdin ------------------------------------------------------------

    def run_openssh_stdin(self, config: Path) -> Sample:
        pusher = subprocess.Popen(
            [sys.executable, str(PUSH), "-", str(self.size)], stdout=subprocess.PIPE
        )
        try:
            # Let the pusher start and fill the pipe, so that its start-up is not timed.
            time.sleep(0.3)
            server0 = tree_cpu(self.sshd_pid)
            start = time.perf_counter()
            proc = subprocess.Popen(
                self.ssh(config, self.host.alias, "cat > /dev/null"), stdin=pusher.stdout
            )
            _, status, usage = os.wait4(proc.pid, 0)
            elapsed = time.perf_counter() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        finally:
            assert pusher.stdout is not None
            pusher.stdout.close()
            pusher_rc = pusher.wait()
        if proc.returncode != 0 or pusher_rc != 0:
            raise RuntimeError(
                f"ssh 'cat > /dev/null' exited with {proc.returncode}, tcp_push.py with {pusher_rc}"
            )
        return Sample(elapsed, usage.ru_utime + usage.ru_stime, tree_cpu(self.sshd_pid) - server0)

    # -- openssh -L ---------------------------------------------------------------

    @contextlib.contextmanager
    def openssh_forward(self, config: Path) -> Iterator[tuple[int, int]]:
        port = free_port()
        proc = subprocess.Popen(
            self.ssh(
                config,
                "-N",
                "-o",
                "ExitOnForwardFailure=yes",
                "-L",
                f"127.0.0.1:{port}:127.0.0.1:{self.sink_port}",
                self.host.alias,
            )
        )
        try:
            wait_for_port("127.0.0.1", port)
            yield port, proc.pid
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    def run_port(self, port: int, client_pid: int | None) -> Sample:
        """One push through a forwarded local port, with CPU of both ends."""
        server0 = tree_cpu(self.sshd_pid)
        client0 = proc_cpu(client_pid) if client_pid else time.process_time()
        elapsed = push_to_port(port, self.size)
        client = (proc_cpu(client_pid) if client_pid else time.process_time()) - client0
        return Sample(elapsed, client, tree_cpu(self.sshd_pid) - server0)


def settings(config: Path) -> TransportSettings:
    return TransportSettings(
        ssh_config_files=(str(config),), connect_timeout=10.0, command_timeout=30.0
    )


# -- running ------------------------------------------------------------------------


async def measure_setting(
    bench: Bench, cipher: str | None, repeat: int, profile: Path | None
) -> list[Series]:
    """All three paths with one cipher setting, the runs of each path interleaved."""
    config = bench.config(cipher)
    setting = cipher or "default"
    async with SSHConnection(bench.host.alias, settings(config)) as conn:
        raw: asyncssh.SSHClientConnection = await conn.wait_connected()
        ours_cipher = str(raw.get_extra_info("send_cipher"))
        forward = await conn.forward_local_port(bench.sink_port)
        openssh_cipher = await asyncio.to_thread(bench.openssh_cipher, config)
        ours = Series("ours (asyncssh forward)", setting, ours_cipher)
        stdin = Series("openssh-stdin (cat)", setting, openssh_cipher)
        tunnel = Series("openssh -L", setting, openssh_cipher)
        with bench.openssh_forward(config) as (ssh_port, ssh_pid):
            for _ in range(repeat):
                ours.samples.append(
                    await asyncio.to_thread(bench.run_port, forward.local_port, None)
                )
                stdin.samples.append(await asyncio.to_thread(bench.run_openssh_stdin, config))
                tunnel.samples.append(await asyncio.to_thread(bench.run_port, ssh_port, ssh_pid))
        if profile is not None:
            profiler = cProfile.Profile()
            profiler.enable()
            try:
                await asyncio.to_thread(push_to_port, forward.local_port, bench.size)
            finally:
                profiler.disable()
            profiler.dump_stats(profile)
            print(f"# cProfile of one untimed run of ours ({setting}): {profile}", flush=True)
    return [ours, stdin, tunnel]


def report(size: int, results: list[list[Series]]) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.0f}%"

    head = (
        f"{'path':<24} {'setting':<24} {'cipher':<30} {'median MiB/s':>12} "
        f"{'runs MiB/s':<22} {'client CPU':>10} {'server CPU':>10}"
    )
    lines = [head, "-" * len(head)]
    for group in results:
        for s in group:
            runs = " ".join(f"{v:.0f}" for v in s.mibps(size))
            lines.append(
                f"{s.path:<24} {s.setting:<24} {s.cipher:<30} {s.median_mibps(size):>12.1f} "
                f"{runs:<22} {pct(s.cpu_share('client_cpu')):>10} "
                f"{pct(s.cpu_share('server_cpu')):>10}"
            )
    lines.append("")
    default_stdin = results[0][1].median_mibps(size)
    for ours, stdin, tunnel in results:
        r_stdin = ours.median_mibps(size) / stdin.median_mibps(size)
        r_tunnel = ours.median_mibps(size) / tunnel.median_mibps(size)
        verdict = "meets" if r_stdin >= TARGET_RATIO else "below"
        lines.append(
            f"{ours.setting:<24} ours/openssh-stdin = {r_stdin:.2f} ({verdict} the "
            f"{TARGET_RATIO} target)   ours/openssh -L = {r_tunnel:.2f}"
        )
    for ours, _, _ in results[1:]:
        lines.append(
            f"ours with {ours.setting} / openssh-stdin with its default cipher = "
            f"{ours.median_mibps(size) / default_stdin:.2f}"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    size = args.size_mib * MIB
    with (
        tempfile.TemporaryDirectory(prefix="jrhw-bench-") as tmp,
        loopback_host(Path(tmp) / "host", alias="benchhost") as host,
    ):
        sink_port = free_port()
        host.spawn(
            [
                sys.executable,
                str(Path(__file__).with_name("tcp_sink.py")),
                "127.0.0.1",
                str(sink_port),
            ]
        )
        wait_for_port("127.0.0.1", sink_port)
        sshd_pid = int((host.root / "sshd.pid").read_text())
        bench = Bench(host, sink_port, size, sshd_pid)
        print(
            f"# {args.size_mib} MiB x {args.repeat} runs per path, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"asyncssh {asyncssh.__version__}, "
            f"{openssh_version()}, "
            f"{datetime.date.today()}; ssh login {bench.login_seconds():.2f} s",
            flush=True,
        )
        results = []
        for cipher in [None, *args.cipher]:
            slug = re.sub(r"[^A-Za-z0-9]+", "_", cipher or "default")
            profile = Path(f"{args.profile}-{slug}.prof") if args.profile else None
            results.append(await measure_setting(bench, cipher, args.repeat, profile))
            print(f"# done: {cipher or 'default'}", flush=True)
        print(report(size, results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="MiB per transfer")
    parser.add_argument("--repeat", type=int, default=3, help="runs per path and setting")
    parser.add_argument(
        "--cipher",
        action="append",
        default=None,
        help="also run with this cipher pinned for both tools (repeatable; "
        "default: aes128-gcm@openssh.com; 'none' for only the defaults)",
    )
    parser.add_argument(
        "--profile",
        metavar="PREFIX",
        default=None,
        help="write cProfile stats of one extra run of ours per cipher "
        "setting to PREFIX-<setting>.prof",
    )
    args = parser.parse_args()
    if args.cipher is None:
        args.cipher = ["aes128-gcm@openssh.com"]
    args.cipher = [c for c in args.cipher if c != "none"]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
