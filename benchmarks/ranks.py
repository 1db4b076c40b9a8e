"""A cell on every rank of a two-node allocation: ``%%ranks`` against ipyparallel and
against a new ``srun`` for each run (the ``sbatch`` + ``torchrun`` way).

    python3 benchmarks/ranks.py [--repeat 30]

Needs the dev cluster (``../shared/slurm/up.sh``, as root), torch, and
``pip install ipyparallel``. Submits a holder job of two nodes × one GPU (the
cluster's ``gpu`` partition) and, in a step on its first node, where a notebook's
kernel runs, times:

ours
    ``%%ranks``' controller (what the magic calls): starting the two engines (steps
    of the job); an empty cell; a cell whose two ranks print a line each (the lines
    back in the cell); one all-reduce of one float with torch.distributed (gloo) once
    the group exists; ``--out`` of a 1 MiB array from each rank; what a hibernation
    does with the ranks, each holding a 64 MiB array: every rank's variables gathered
    as pickles into the notebook's kernel (``save``), and given back (``give back``).
ipyparallel
    ``ipp.Cluster(n=2)``: two engines on the same node, plain processes with no SLURM
    step (which favours it), and the same cells through ``view.execute`` and
    ``view.pull`` (``save``: pulling the 64 MiB array; ``give back``: scattering
    one to each engine; ipyparallel has no hibernation, so this is the same bytes
    moved, not the same feature).
srun per run
    What a script user pays for each change: ``srun -N2 --ntasks-per-node 1 python -c
    '<import torch, init_process_group, all_reduce>'``, a new process on each node
    for every run (torch's import and the rendezvous included).

Medians over --repeat runs (3 for srun per run); ratios are ipyparallel / ours and
srun / ours (above 1: ours is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SLURM_CONF = os.environ.get("SLURM_CONF") or "/tmp/slurm-dev/etc/slurm.conf"
HOLDER = "#!/bin/sh\nsleep 900\n"
ALL_REDUCE_SCRIPT = (
    "import os, torch, torch.distributed as dist; "
    "os.environ.update(RANK=os.environ['SLURM_PROCID'], WORLD_SIZE=os.environ['SLURM_NTASKS'], "
    "MASTER_ADDR='127.0.0.1', MASTER_PORT=os.environ['PORT']); "
    "dist.init_process_group('gloo'); t = torch.ones(1); dist.all_reduce(t); "
    "assert t.item() == 2.0; dist.destroy_process_group()"  # else gloo may abort at exit
)


#: Runs of the 64 MiB rows (each moves 128 MiB).
LARGE_REPEAT = 5


def median_seconds(action: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def ours(repeat: int) -> dict[str, float]:
    sys.path.insert(0, str(REPO))
    from jupyter_remote_hw.transfer.kernel_side.ranks.controller import (
        Controller,
        engine_command,
    )
    from jupyter_remote_hw.transfer.kernel_side.ranks.world import read_world

    world = read_world()
    ranks = [r.rank for r in world.ranks]
    lines: list[str] = []

    def keep(number: int, message: dict[str, Any]) -> None:
        if message.get("ev") == "stream":
            lines.append(str(message.get("text")))

    controller = Controller(world, engine_command())
    began = time.perf_counter()
    controller.start(lambda _line: None)
    found = {"start": time.perf_counter() - began}
    try:
        found["empty cell"] = median_seconds(lambda: controller.run("pass", ranks, keep), repeat)
        found["print a line"] = median_seconds(
            lambda: controller.run("print('a line')", ranks, keep), repeat
        )
        assert lines.count("a line\n") == 2 * repeat, lines[:4]
        controller.run(
            "import numpy as np, torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\na = np.ones(262144, dtype='float32')",
            ranks,
            keep,
        )
        found["all-reduce"] = median_seconds(
            lambda: controller.run("t = torch.ones(1)\ndist.all_reduce(t)", ranks, keep), repeat
        )
        found["gather 2 x 1 MiB"] = median_seconds(
            lambda: controller.run("pass", ranks, keep, outputs=["a"]), repeat
        )
        controller.run("b = np.ones(16 * 2**20, dtype='float32')", ranks, keep)
        saved: dict[int, dict[str, Any]] = {}
        found["save 2 x 64 MiB"] = median_seconds(
            lambda: saved.update(controller.save_state()), LARGE_REPEAT
        )
        pickled = {number: rank["values"] for number, rank in saved.items()}
        found["give back 2 x 64 MiB"] = median_seconds(
            lambda: controller.run("pass", ranks, keep, pickled=pickled), LARGE_REPEAT
        )
    finally:
        controller.stop()
    return found


def ipyparallel(repeat: int) -> dict[str, float]:
    import ipyparallel as ipp

    began = time.perf_counter()
    cluster = ipp.Cluster(n=2, log_level=40)
    client = cluster.start_and_connect_sync()
    client.wait_for_engines(2, timeout=120)
    found = {"start": time.perf_counter() - began}
    view = client[:]
    try:
        found["empty cell"] = median_seconds(lambda: view.execute("pass", block=True), repeat)
        found["print a line"] = median_seconds(
            lambda: view.execute("print('a line')", block=True), repeat
        )
        port = _free_port()
        for number, engine in enumerate(client):
            engine.execute(
                f"import os; os.environ.update(RANK='{number}', WORLD_SIZE='2', "
                f"MASTER_ADDR='127.0.0.1', MASTER_PORT='{port}')",
                block=True,
            )
        view.execute(
            "import numpy as np, torch, torch.distributed as dist\n"
            "dist.init_process_group('gloo')\na = np.ones(262144, dtype='float32')",
            block=True,
        )
        found["all-reduce"] = median_seconds(
            lambda: view.execute("t = torch.ones(1)\ndist.all_reduce(t)", block=True), repeat
        )
        found["gather 2 x 1 MiB"] = median_seconds(lambda: view.pull("a", block=True), repeat)
        view.execute("b = np.ones(16 * 2**20, dtype='float32')", block=True)
        found["save 2 x 64 MiB"] = median_seconds(lambda: view.pull("b", block=True), LARGE_REPEAT)
        import numpy as np

        big = np.ones(16 * 2**20, dtype="float32")
        found["give back 2 x 64 MiB"] = median_seconds(
            lambda: view.scatter("b", [big, big], block=True), LARGE_REPEAT
        )
    finally:
        client.close()
        cluster.stop_cluster_sync()
    return found


def srun_per_run(job: str, repeat: int) -> dict[str, float]:
    failures: list[str] = []

    def run() -> None:
        for _ in range(3):  # a rendezvous port taken meanwhile fails a run: run it again
            done = subprocess.run(
                ["srun", f"--jobid={job}", "--overlap", "-N2", "-n2", "--ntasks-per-node=1",
                 sys.executable, "-c", ALL_REDUCE_SCRIPT],
                check=False,
                # As from the login node: not the variables of the step this runs in
                # (its one node and one task would bound the new step).
                env={
                    **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
                    "SLURM_CONF": SLURM_CONF,
                    "PORT": str(_free_port()),
                },
                capture_output=True,
                text=True,
            )  # fmt: skip
            if done.returncode == 0:
                return
            failures.append(done.stderr.strip().splitlines()[-1])
        raise SystemExit("srun per run failed three times: " + " / ".join(failures[-3:]))

    found = {"all-reduce": median_seconds(run, repeat)}
    if failures:
        sys.stderr.write(f"srun per run: {len(failures)} runs failed and ran again\n")
    return found


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("", 0))
        return int(probe.getsockname()[1])


def inside(repeat: int) -> None:
    """Run in a step on the allocation's first node; print the figures as JSON."""
    figures = {
        "ours": ours(repeat),
        "ipyparallel": ipyparallel(repeat),
        "srun per run": srun_per_run(os.environ["SLURM_JOB_ID"], 3),
    }
    sys.stdout.write(json.dumps(figures) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        inside(args.repeat)
        return
    env = {**os.environ, "SLURM_CONF": SLURM_CONF}
    job = subprocess.run(
        ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "--gres=gpu:1", "-t", "15",
         "-o", "/dev/null", "-J", "jrhw-bench-ranks"],
        input=HOLDER, text=True, capture_output=True, check=True, env=env,
    ).stdout.strip()  # fmt: skip
    try:
        for _ in range(100):
            state = subprocess.run(
                ["squeue", "-h", "-j", job, "-o", "%T"],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            ).stdout.strip()
            if state == "RUNNING":
                break
            time.sleep(0.2)
        done = subprocess.run(
            ["srun", f"--jobid={job}", "--overlap", "-N1", "-n1", sys.executable,
             str(Path(__file__).resolve()), "--inside", "--repeat", str(args.repeat)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"the measurements failed:\n{done.stderr[-3000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["scancel", job], env=env, check=False)
    rows = sorted({name for found in figures.values() for name in found})
    paths = list(figures)
    header = f"{'seconds (median)':<20}" + "".join(f"{p:>16}" for p in paths)
    lines = [f"SLURM job {job}, 2 nodes, repeat {args.repeat}", header]
    for row in rows:
        cells = "".join(
            f"{figures[p][row]:>16.4f}" if row in figures[p] else f"{'-':>16}" for p in paths
        )
        lines.append(f"{row:<20}{cells}")
    for row in rows:
        mine = figures["ours"].get(row)
        for other in paths[1:]:
            theirs = figures[other].get(row)
            if mine and theirs:
                lines.append(f"{row}: {other} / ours = {theirs / mine:.2f}x")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
