"""Moving variables to and from a kernel on an SSH host: ours against raw OpenSSH and ipyparallel.

    python3 benchmarks/transfer.py [--size-mib 1024] [--repeat 3] [--small-repeat 30]

Starts a real sshd on 127.0.0.1 (``tests.testhosts.loopback_host``) in a
temporary directory and a local ipykernel (``python3``) whose Jupyter config
offers that host as the target ``ssh-bench``. The local kernel loads the magics,
as a user would, and the times are taken inside it around the magic calls.
The same SIZE of float32 data goes along three paths:

ours
    ``%remote_push a --to ssh-bench`` and ``%remote_pull a --from ssh-bench --as b``
    between the local kernel and its kernel on the host (chunks through the
    local kernel's SSH forward to the remote kernel's shell channel).
openssh
    ``ssh -F CONFIG bench 'cat > /dev/null' < FILE`` and
    ``ssh -F CONFIG bench 'cat FILE' > /dev/null`` (the file in the page
    cache): the bytes over one SSH channel, no serialization, no kernel.
    Includes OpenSSH's login (about 0.1 s).
ipyparallel, plain TCP
    ``view.push({"a": a})`` and ``view.pull("a")`` with a controller here and
    one engine started on the host over SSH. The engine talks to the
    controller over loopback TCP with no SSH and no encryption, which favours
    ipyparallel.
ipyparallel over SSH
    The same, with the controller on the host as well and the client reaching
    it through an OpenSSH tunnel (``ssh -N -L`` for each of its ports), as a
    user reaches a cluster on a remote machine: the like-for-like comparison.

Each path runs --repeat times, the paths taking turns, and the medians are
compared (the machine may be shared, so one run of each can mislead).
Ratios are throughput ours / openssh (target >= 0.7) and ours / ipyparallel
(target >= 3). Peak extra memory is the high-water RSS of each kernel process
during the transfer (Linux ``clear_refs`` then ``VmHWM``) minus its RSS before:
the receiver's includes the received object itself (one copy).

Then a 1 KB object: ``%remote_push`` against a trivial ``%%remote ssh-bench``
ssh-bench`` cell (``pass``), medians over --small-repeat runs (target: push <= 2x cell).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from jupyter_client.manager import KernelManager
from tabulate import tabulate

from tests.testhosts import SSHTestHost, free_port, loopback_host, wait_for_port

MIB = 1024 * 1024


def rss(pid: int, field: str) -> int:
    """``VmRSS`` or ``VmHWM`` of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak(pid: int) -> int:
    """Reset the process's high-water RSS; return its RSS now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return rss(pid, "VmRSS")


class LocalKernel:
    """A local ipykernel driven like a notebook: code in, user expressions out."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env, cwd=str(cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str, **expressions: str) -> dict[str, Any]:
        outputs: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                outputs.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                outputs.append("\n".join(msg["content"]["traceback"]))

        reply = self.client.execute_interactive(
            code, timeout=600, output_hook=hook, user_expressions=expressions
        )["content"]
        if reply["status"] != "ok":
            raise RuntimeError(f"{code!r} failed: {reply.get('evalue')}\n{''.join(outputs)}")
        values = {}
        for name, value in reply["user_expressions"].items():
            if value["status"] != "ok":
                raise RuntimeError(f"{name}: {value}")
            values[name] = json.loads(value["data"]["text/plain"].replace("'", '"'))
        return values

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel()


def timed(kernel: LocalKernel, statement: str) -> float:
    """Seconds ``statement`` (a magic line) takes inside the kernel."""
    kernel.run(
        "import time as _t\n_t0 = _t.perf_counter()\n"
        f"get_ipython().run_line_magic({statement.split()[0]!r}, "
        f"{' '.join(statement.split()[1:])!r})\n_dt = _t.perf_counter() - _t0"
    )
    return float(kernel.run("", dt="_dt")["dt"])


def timed_cell(kernel: LocalKernel, line: str, cell: str) -> float:
    kernel.run(
        "import time as _t\n_t0 = _t.perf_counter()\n"
        f"get_ipython().run_cell_magic('remote', {line!r}, {cell!r})\n"
        "_dt = _t.perf_counter() - _t0"
    )
    return float(kernel.run("", dt="_dt")["dt"])


def measure(kernel: LocalKernel, statement: str, sender: int, receiver: int) -> dict[str, float]:
    before = {pid: reset_peak(pid) for pid in (sender, receiver)}
    seconds = timed(kernel, statement)
    return {
        "seconds": seconds,
        "sender_extra": rss(sender, "VmHWM") - before[sender],
        "receiver_extra": rss(receiver, "VmHWM") - before[receiver],
    }


def openssh(host: SSHTestHost, data_file: Path) -> tuple[float, float]:
    base = ["ssh", "-F", str(host.ssh_config), host.alias]
    began = time.perf_counter()
    with data_file.open("rb") as stdin:
        subprocess.run([*base, "cat > /dev/null"], stdin=stdin, check=True)
    push = time.perf_counter() - began
    began = time.perf_counter()
    subprocess.run([*base, f"cat {data_file}"], stdout=subprocess.DEVNULL, check=True)
    return push, time.perf_counter() - began


def tunnel_client_file(
    host: SSHTestHost, profile: Path, tunnels: list[subprocess.Popen[bytes]]
) -> Path:
    """A client connection file whose ports are OpenSSH tunnels to the controller's.

    One ``ssh -N -L ...`` carries every port of the controller on the host
    (what ``Client(sshserver=...)`` sets up, one tunnel per port).
    """
    remote = profile / "security" / "ipcontroller-client.json"
    for _ in range(300):
        if remote.exists():
            break
        time.sleep(0.1)
    info = json.loads(remote.read_text())
    names = ["registration", "control", "mux", "task", "iopub", "notification", "broadcast"]
    local = {name: free_port() for name in names if isinstance(info.get(name), int)}
    forwards = [
        arg
        for name, port in local.items()
        for arg in ("-L", f"127.0.0.1:{port}:127.0.0.1:{info[name]}")
    ]
    tunnels.append(
        subprocess.Popen(["ssh", "-F", str(host.ssh_config), "-N", *forwards, host.alias])
    )
    for port in local.values():
        wait_for_port("127.0.0.1", port)
    path = profile / "client-through-ssh.json"
    path.write_text(json.dumps({**info, **local}))
    return path


def ipyparallel(
    host: SSHTestHost, work: Path, size: int, repeat: int, tunnelled: bool
) -> list[tuple[float, float]] | None:
    """Push and pull times through one ipyparallel engine on the host.

    ``tunnelled``: the controller runs on the host too, and the client here
    reaches it through OpenSSH tunnels (``Client(sshserver=...)``), as a user
    reaches a cluster on a remote machine. Otherwise the controller runs here
    and the engine connects to it over plain loopback TCP.
    """
    try:
        import ipyparallel as ipp
        import numpy as np
    except ImportError:
        return None
    profile = work / ("ipp-ssh" if tunnelled else "ipp")
    tunnels: list[subprocess.Popen[bytes]] = []
    ssh = ["ssh", "-F", str(host.ssh_config), host.alias]
    controller_argv = [
        sys.executable,
        "-m",
        "ipyparallel.controller",
        f"--profile-dir={profile}",
        "--ip=127.0.0.1",
        "--log-level=WARN",
    ]
    controller = subprocess.Popen(
        [*ssh, "exec " + " ".join(controller_argv)] if tunnelled else controller_argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    engine_file = profile / "security" / "ipcontroller-engine.json"
    for _ in range(300):
        if engine_file.exists():
            break
        time.sleep(0.1)
    engine = subprocess.Popen(
        [
            *ssh,
            f"exec {sys.executable} -m ipyparallel.engine --file={engine_file} --log-level=WARN",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        if tunnelled:
            client = ipp.Client(str(tunnel_client_file(host, profile, tunnels)))
        else:
            client = ipp.Client(profile_dir=str(profile))
        client.wait_for_engines(1, timeout=60)
        view = client[0]
        array = np.random.default_rng(0).random(size // 4, dtype=np.float32)
        view.push({"warm": np.zeros(10)}, block=True)
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            view.push({"a": array}, block=True)
            push = time.perf_counter() - began
            began = time.perf_counter()
            back = view.pull("a", block=True)
            pull = time.perf_counter() - began
            assert back.nbytes == array.nbytes
            del back
            view.execute("del a", block=True)
            times.append((push, pull))
        client.shutdown(hub=True, block=True)
        client.close()
        return times
    finally:
        for process in (*tunnels, engine, controller):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        # Ending the local ssh does not end what it started on the host (the
        # controller, its schedulers, the engine and its nanny): end them there.
        subprocess.run([*ssh, f"pkill -f {profile}"], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small-repeat", type=int, default=30)
    args = parser.parse_args()
    size = args.size_mib * MIB
    with tempfile.TemporaryDirectory(prefix="jrhw-b-", dir="/tmp") as tmp:
        work = Path(tmp)
        with loopback_host(work / "host") as host:
            config_dir = work / "config"
            config_dir.mkdir()
            (config_dir / "jupyter_server_config.json").write_text(
                json.dumps(
                    {
                        "TransportManager": {"ssh_config_files": [str(host.ssh_config)]},
                        "SSHProvider": {
                            "hosts": [
                                {
                                    "host": host.alias,
                                    "python": sys.executable,
                                    "name": "bench",
                                    "hardware": "loopback",
                                    "root": str(work / "r"),
                                }
                            ]
                        },
                        "LocalProvider": {"state_dir": str(work / "l")},
                        "MachineManager": {"ledger_path": str(work / "ledger.sqlite3")},
                    }
                )
            )
            env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config_dir), "PYTHONPATH": str(REPO)}
            kernel = LocalKernel(env, work)
            try:
                report(kernel, host, work, size, args)
            finally:
                kernel.close()


def report(
    kernel: LocalKernel, host: SSHTestHost, work: Path, size: int, args: argparse.Namespace
) -> None:
    local_pid = int(
        kernel.run(
            "%load_ext jupyter_remote_hw\nimport os, numpy as np\n"
            f"a = np.random.default_rng(0).random({size // 4}, "
            "dtype=np.float32)\nsmall = bytes(1000)",
            pid="os.getpid()",
        )["pid"]
    )
    kernel.run("%%remote ssh-bench --out rpid\nimport os\nrpid = os.getpid()")
    remote_pid = int(kernel.run("", pid="rpid")["pid"])

    data_file = work / "data.bin"
    data_file.write_bytes(os.urandom(size))
    pushes, pulls, ssh_times = [], [], []
    for _ in range(args.repeat):
        pushes.append(measure(kernel, "remote_push a --to ssh-bench", local_pid, remote_pid))
        pulls.append(
            measure(kernel, "remote_pull a --from ssh-bench --as b", remote_pid, local_pid)
        )
        kernel.run("assert (b == a).all()\ndel b")
        kernel.run("%%remote ssh-bench\ndel a")
        ssh_times.append(openssh(host, data_file))
    ipp_times = ipyparallel(host, work, size, args.repeat, tunnelled=False)
    ipp_ssh_times = ipyparallel(host, work, size, args.repeat, tunnelled=True)

    small_push = [
        timed(kernel, "remote_push small --to ssh-bench") for _ in range(args.small_repeat)
    ]
    trivial = [timed_cell(kernel, "ssh-bench", "pass") for _ in range(args.small_repeat)]

    mib = size / MIB

    def rate(seconds: float) -> float:
        return mib / seconds

    def median(values: list[float]) -> float:
        return statistics.median(values)

    def runs(values: list[float]) -> str:
        return " ".join(f"{rate(v):.0f}" for v in values)

    push = {
        "seconds": median([r["seconds"] for r in pushes]),
        "sender_extra": max(r["sender_extra"] for r in pushes),
        "receiver_extra": max(r["receiver_extra"] for r in pushes),
    }
    pull = {
        "seconds": median([r["seconds"] for r in pulls]),
        "sender_extra": max(r["sender_extra"] for r in pulls),
        "receiver_extra": max(r["receiver_extra"] for r in pulls),
    }
    ssh_push = median([t[0] for t in ssh_times])
    ssh_pull = median([t[1] for t in ssh_times])
    ipps = [
        (label, (median([t[0] for t in times]), median([t[1] for t in times])))
        for label, times in (("plain TCP", ipp_times), ("over SSH", ipp_ssh_times))
        if times
    ]

    print(
        f"# transfer benchmark, {datetime.date.today()}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"# {mib:.0f} MiB float32 between a local kernel and its kernel on a loopback sshd")
    print(f"# medians of {args.repeat} runs each, the paths taking turns; every run in brackets")
    rows = [
        ("ours", [r["seconds"] for r in pushes], [r["seconds"] for r in pulls]),
        ("openssh cat", [t[0] for t in ssh_times], [t[1] for t in ssh_times]),
    ]
    if ipp_times:
        rows.append(
            ("ipyparallel, plain TCP", [t[0] for t in ipp_times], [t[1] for t in ipp_times])
        )
    if ipp_ssh_times:
        rows.append(
            ("ipyparallel over SSH", [t[0] for t in ipp_ssh_times], [t[1] for t in ipp_ssh_times])
        )
    print(
        tabulate(
            [
                (
                    name,
                    f"{rate(median(a)):.0f}",
                    f"[{runs(a)}]",
                    f"{rate(median(b)):.0f}",
                    f"[{runs(b)}]",
                )
                for name, a, b in rows
            ],
            headers=["path", "push MiB/s", "runs", "pull MiB/s", "runs"],
        )
    )
    print(
        f"ours / openssh: push {ssh_push / push['seconds']:.2f}, "
        f"pull {ssh_pull / pull['seconds']:.2f} (target >= 0.7)"
    )
    for label, (ipp_push, ipp_pull) in ipps:
        print(
            f"ours / ipyparallel {label}: push {ipp_push / push['seconds']:.2f}x, "
            f"pull {ipp_pull / pull['seconds']:.2f}x (target >= 3x)"
        )
    for name, result in (("push", push), ("pull", pull)):
        print(
            f"peak extra memory (largest of the runs), {name}: sender {result['sender_extra'] / MIB:.0f} MiB, "
            f"receiver {result['receiver_extra'] / MIB:.0f} MiB "
            f"(the object is {mib:.0f} MiB)"
        )
    push_ms = statistics.median(small_push) * 1000
    cell_ms = statistics.median(trivial) * 1000
    print(
        f"1 KB push: median {push_ms:.1f} ms; trivial %%remote cell: median {cell_ms:.1f} ms; "
        f"ratio {push_ms / cell_ms:.2f} (target <= 2)"
    )


if __name__ == "__main__":
    main()
