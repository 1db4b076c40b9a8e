"""Hibernating a kernel and waking it, against rerunning the notebook that built its state.

    python3 benchmarks/hibernate.py [--sizes-gib 1] [--repeat 1] [--device cuda]

For each size, a local ipykernel runs the code cells of ``benchmarks/state_notebook.ipynb``
(load, features, sort, a model fitted, summary: four float64 arrays of SIZE GiB in all, a DataFrame,
a notebook-defined function and class), each cell timed: that is the rerun, what a
user does today after an idle machine was released. Then:

save
    :func:`jupyter_remote_hw.hibernation.save` of that kernel into a
    :class:`~jupyter_remote_hw.hibernation.HibernationStore` in a temporary
    directory (the server's disk), as hibernation does before it releases the
    hardware;
restore
    a fresh kernel, then :func:`jupyter_remote_hw.hibernation.restore` into it
    (with ``--device cuda``: what can go to the GPU goes there), as a wake does
    once the hardware is back.

The same expression (:data:`CHECK`) is evaluated after the rerun and
after the restore: the figures count only when both answers are equal. The
reference is ElasticNotebook (VLDB 2024), whose published restores are 94-99%
faster than rerunning the notebook (a speed-up of 17x to 100x); the ratio printed
here is rerun time / restore time. Provisioning the hardware again (an EC2 start,
a SLURM queue) comes on top of the restore and is the same for a rerun.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import nbformat
from jupyter_client.manager import AsyncKernelManager
from tabulate import tabulate

from jupyter_remote_hw.hibernation import HibernationStore, restore, save

GIB = 1024**3
#: The notebook whose state is saved and restored.
NOTEBOOK = Path(__file__).resolve().parent / "state_notebook.ipynb"
#: The code cells it runs, in order.
CELLS = [
    cell.source for cell in nbformat.read(NOTEBOOK, as_version=4).cells if cell.cell_type == "code"
]
#: Evaluated in the kernel after a rerun and after a restore: the same answer both ways.
CHECK = (
    "(round(float(raw[:1000].sum()), 6), round(float(energy[-1]), 3), "
    "round(model.predict(2.0), 9), quantiles(ranked)[0.5], int(summary.shape[0]), round(w, 9))"
)
#: ElasticNotebook's published restore speed-up over a rerun (94-99% faster).
REFERENCE = "17x-100x (94-99% faster)"


async def start_kernel(size_gib: float) -> AsyncKernelManager:
    """A local ipykernel whose notebook builds ``size_gib`` of state."""
    manager = AsyncKernelManager(kernel_name="python3")
    env = {**os.environ, "BENCH_STATE_GIB": str(size_gib)}
    await manager.start_kernel(env=env)
    return manager


async def execute(manager: AsyncKernelManager, code: str, timeout: float = 3600) -> str:
    """Run ``code`` in the kernel; its text result (raises on an error)."""
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
        result: list[str] = []

        def output(message: dict[str, Any]) -> None:
            if message["msg_type"] == "execute_result":
                result.append(message["content"]["data"].get("text/plain", ""))
            elif message["msg_type"] == "error":
                result.append("ERROR " + message["content"]["evalue"])

        reply = await client.execute_interactive(code, timeout=timeout, output_hook=output)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"cell failed: {reply['content'].get('evalue')}")
        return "".join(result)
    finally:
        client.stop_channels()


def rss_anon() -> int:
    """This process's anonymous memory in bytes (what it allocated, not the page cache
    its maps of files show)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


class AnonPeak:
    """The most anonymous memory this process held above where it was at the start,
    sampled every 5 ms by a thread while the block runs."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> Self:
        start = rss_anon()

        def sample() -> None:
            while not self._stop.wait(0.005):
                self.peak = max(self.peak, rss_anon() - start)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


async def one_round(size_gib: float, store: HibernationStore, device: str | None) -> dict[str, Any]:
    """Rerun, save and restore once at ``size_gib``; the times in seconds."""
    first = await start_kernel(size_gib)
    cells = []
    try:
        for code in CELLS:
            began = time.perf_counter()
            await execute(first, code)
            cells.append(time.perf_counter() - began)
        expected = await execute(first, CHECK)
        began = time.perf_counter()
        with AnonPeak() as save_memory:
            saved = await save(first, first.kernel_id, store)
        save_seconds = time.perf_counter() - began
    finally:
        await first.shutdown_kernel(now=True)
    second = await start_kernel(size_gib)
    try:
        began = time.perf_counter()
        with AnonPeak() as restore_memory:
            await restore(second, second.kernel_id, store, entry_id=first.kernel_id, device=device)
        restore_seconds = time.perf_counter() - began
        got = await execute(second, CHECK)
    finally:
        await second.shutdown_kernel(now=True)
        store.delete(first.kernel_id)
    if got != expected:
        raise RuntimeError(f"the restored state differs: {got} != {expected}")
    return {
        "cells": cells,
        "rerun": sum(cells),
        "save": save_seconds,
        "restore": restore_seconds,
        "save_peak_mib": save_memory.peak / 2**20,
        "restore_peak_mib": restore_memory.peak / 2**20,
        "bytes": saved.total_bytes,
        "check": got,
    }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-gib", default="1", help="comma-separated sizes (GiB)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--device", default=None, help="restore tensors to this device")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes_gib.split(",")]
    rows = []
    results = []
    with tempfile.TemporaryDirectory(prefix="jrhw-hibernate-bench-") as tmp:
        store = HibernationStore(root=str(Path(tmp) / "store"), max_bytes=0, min_free_bytes=0)
        for size in sizes:
            runs = [await one_round(size, store, args.device) for _ in range(args.repeat)]
            rerun = statistics.median(r["rerun"] for r in runs)
            saved = statistics.median(r["save"] for r in runs)
            restored = statistics.median(r["restore"] for r in runs)
            stored = runs[0]["bytes"]
            rows.append(
                [
                    f"{size:g} GiB",
                    f"{stored / GIB:.2f} GiB",
                    " + ".join(f"{c:.1f}" for c in runs[0]["cells"]),
                    f"{rerun:.1f}",
                    f"{saved:.1f}",
                    f"{stored / GIB / saved:.2f}",
                    f"{restored:.1f}",
                    f"{stored / GIB / restored:.2f}",
                    f"{rerun / restored:.1f}x",
                    f"{100 * (1 - restored / rerun):.0f}%",
                    f"{max(r['save_peak_mib'] for r in runs):.0f}",
                    f"{max(r['restore_peak_mib'] for r in runs):.0f}",
                ]
            )
            results.append({"size_gib": size, "runs": runs})
    print(
        tabulate(
            rows,
            headers=[
                "state",
                "stored",
                "cells (s)",
                "rerun s",
                "save s",
                "save GiB/s",
                "restore s",
                "restore GiB/s",
                "rerun/restore",
                "restore faster by",
                "save peak MiB",
                "restore peak MiB",
            ],
        )
    )
    print(f"\nreference: ElasticNotebook's published restore speed-up over a rerun: {REFERENCE}")
    print(
        f"{platform.node()} · {os.cpu_count()} CPUs · Python {platform.python_version()} · "
        f"{datetime.date.today()}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
