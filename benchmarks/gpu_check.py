"""The CUDA path end to end, on the one machine this runs on: a Jupyter server with the
extension, its ``local`` kernel on the GPU, hibernation that gives the GPU's memory
back, ``%%remote --device cuda`` and a 4 GiB tensor moved between two kernels.

    python3 benchmarks/gpu_check.py [--gib 4] [--json results.json]

Made for a single-GPU machine with PyTorch and CUDA but no Jupyter packages and no
network: the wheels it needs travel with it and go on ``PYTHONPATH`` (docs/benchmarks.md,
"The GPU check", says how). On a machine without CUDA every step still runs with
its tensors on the CPU, and the steps that need a GPU say they were skipped.

Steps, each printed as ``ok``, ``FAIL`` or ``skip`` with its figures:

1. the Jupyter server starts with the extension and only the ``local`` provider;
2. the hardware listing's ``local`` row names the GPU and its memory as nvidia-smi does;
3. a ``remote-hw-local`` kernel starts, and torch in it sees the GPU;
4. the live view (``GET .../usage/<kernel>``) names the GPU and its memory in use;
5. the kernel makes a 1 GiB tensor and a module on ``cuda:0`` and a CPU tensor;
   it hibernates (``POST .../hibernate/<kernel>``), and nvidia-smi shows the GPU's
   memory given back;
6. the next cell wakes it: the tensors are back on ``cuda:0`` with equal values;
   a second hibernation of the same state is timed too;
7. in a plain ``python3`` kernel, ``%%remote local --in small --device cuda`` puts the
   tensor it sends on ``cuda:0``;
8. a ``--gib`` GiB tensor moves from that kernel to the ``local`` kernel with
   ``%%remote --in``, timed against the GPU's own copies (device to host and back,
   what ``cudaMemcpy`` does) and against writing and reading the same bytes on disk;
9. the library-level device checks of ``benchmarks/gpu_hibernate_check.py`` (a wake
   where no GPU is seen, ``device="cuda"``).

Exit status: 0 when every step that ran passed, 1 when one failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from tests.kernelws import KernelChannels
from tests.serverprocess import Server, server_dirs, start_server

GIB = 1024**3
MIB = 1024**2
#: The GPU's memory in use may stay this far above where it was before the kernel.
RELEASED_SLACK_MIB = 600


def smi() -> list[dict[str, Any]]:
    """Each GPU's name and memory (MiB) as nvidia-smi reports them; [] without one."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(
        [
            "nvidia-smi",
            "--query-gpu=name,memory.used,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    gpus = []
    for line in out.stdout.splitlines():
        name, used, total, driver = (part.strip() for part in line.split(","))
        gpus.append(
            {"name": name, "used_mib": int(used), "total_mib": int(total), "driver": driver}
        )
    return gpus


def torch_facts() -> dict[str, Any]:
    """torch's version and what CUDA it sees, in this process."""
    try:
        import torch
    except ImportError:
        return {"torch": None, "cuda": False}
    cuda = torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "cuda": cuda,
        "device": torch.cuda.get_device_name(0) if cuda else None,
    }


class Steps:
    """The steps' outcomes and figures, printed as they come."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    @property
    def failed(self) -> int:
        return sum(result.get("outcome") == "FAIL" for result in self.results)

    def record(self, step: str, outcome: str, detail: str, **figures: Any) -> None:
        self.results.append({"step": step, "outcome": outcome, "detail": detail, **figures})
        shown = " ".join(f"{k}={v}" for k, v in figures.items())
        print(f"{outcome:<4} {step}: {detail}" + (f" [{shown}]" if shown else ""), flush=True)

    def expect(self, step: str, ok: bool, detail: str, **figures: Any) -> bool:
        self.record(step, "ok" if ok else "FAIL", detail, **figures)
        return ok

    def skip(self, step: str, why: str) -> None:
        self.record(step, "skip", why)

    async def run(self, step: str, body: Callable[[], Awaitable[None]], timeout: float) -> None:
        """Run one step; a step that raises or outlasts ``timeout`` is a failure."""
        try:
            await asyncio.wait_for(body(), timeout)
        except Exception as exc:  # noqa: BLE001  (every failure is reported, then the next step)
            self.record(step, "FAIL", f"{type(exc).__name__}: {str(exc)[:600]}")


def server_config(root: Path) -> dict[str, Any]:
    """The server's config: the extension on, only ``local``, state under ``root``."""
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
        "LocalProvider": {"state_dir": str(root / "local")},
        "SSHProvider": {"hosts": []},
        "MachineManager": {"ledger_path": str(root / "ledger.sqlite3")},
        "HibernationStore": {"root": str(root / "store"), "min_free_bytes": 0},
        "RemoteHWProvisioner": {"launch_timeout": 180.0},
    }


async def cell(kc: KernelChannels, code: str, timeout: float = 120.0) -> str:
    """What ``code`` printed; raises with its error when it failed."""
    ran = await kc.execute(code, timeout=timeout)
    if ran.status != "ok":
        raise RuntimeError(f"cell failed ({ran.ename}): {ran.stderr[-400:]}{ran.stdout[-400:]}")
    return ran.stdout.strip()


def drop_page_cache() -> bool:
    """Flush and drop the page cache (root only), as hours asleep would; whether it did."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1")
    except OSError:
        return False
    return True


def read_cold_seconds(paths: list[Path]) -> float:
    """Seconds to read ``paths`` from the disk with the page cache dropped first."""
    drop_page_cache()
    began = time.perf_counter()
    piece = bytearray(8 * MIB)
    for path in paths:
        with open(path, "rb", buffering=0) as file:
            while file.readinto(piece):
                pass
    return time.perf_counter() - began


def rate(nbytes: int, seconds: float) -> float:
    """MiB per second."""
    return round(nbytes / MIB / seconds, 1) if seconds > 0 else float("inf")


def disk_figures(directory: Path, nbytes: int) -> dict[str, float]:
    """Writing ``nbytes`` to a file with fsync, and reading it back, in MiB/s."""
    path = directory / "disk-check.bin"
    block = os.urandom(64 * MIB)
    began = time.perf_counter()
    with path.open("wb") as out:
        for _ in range(nbytes // len(block)):
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    written = time.perf_counter() - began
    # Reading what was just written comes from the page cache, as a wake's restore
    # of a fresh save does; the figure is that, not the platter.
    began = time.perf_counter()
    with path.open("rb") as source:
        while source.readinto(bytearray(64 * MIB)):
            pass
    read = time.perf_counter() - began
    path.unlink()
    return {"disk_write_mib_s": rate(nbytes, written), "disk_read_mib_s": rate(nbytes, read)}


def cp_sync_seconds(directory: Path, nbytes: int) -> float:
    """Seconds ``cp`` and ``sync`` take to copy a file of ``nbytes`` on this disk (its
    source freshly written, so read from the page cache, as a save reads memory)."""
    source, copy = directory / "cp-source.bin", directory / "cp-copy.bin"
    block = os.urandom(64 * MIB)
    with source.open("wb") as out:
        for _ in range(max(1, nbytes // len(block))):
            out.write(block)
    subprocess.run(["sync"], check=True)
    began = time.perf_counter()
    subprocess.run(["cp", str(source), str(copy)], check=True)
    subprocess.run(["sync"], check=True)
    seconds = time.perf_counter() - began
    source.unlink()
    copy.unlink()
    return seconds


def copy_figures(nbytes: int) -> dict[str, float]:
    """The GPU's own copies of ``nbytes``: device to host and host to device, pageable
    and pinned host memory (what ``cudaMemcpy`` does under ``tensor.cpu()``)."""
    import torch

    source = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda:0").normal_()
    figures = {}
    for kind, pinned in (("pageable", False), ("pinned", True)):
        host = torch.empty(source.shape, dtype=source.dtype, pin_memory=pinned)
        torch.cuda.synchronize()
        began = time.perf_counter()
        host.copy_(source)
        torch.cuda.synchronize()
        figures[f"d2h_{kind}_mib_s"] = rate(nbytes, time.perf_counter() - began)
        began = time.perf_counter()
        source.copy_(host)
        torch.cuda.synchronize()
        figures[f"h2d_{kind}_mib_s"] = rate(nbytes, time.perf_counter() - began)
        del host
    del source
    torch.cuda.empty_cache()
    return figures


class Check:
    """The steps, against one server."""

    def __init__(
        self, server: Server, workdir: Path, gib: float, cuda: bool, cold: bool = False
    ) -> None:
        self.cold = cold
        self.server = server
        self.workdir = workdir
        self.nbytes = int(gib * GIB)
        self.cuda = cuda
        self.device = "cuda:0" if cuda else "cpu"
        self.steps = Steps()
        self.kernel_id = ""
        self.kc: KernelChannels | None = None
        self.plain: KernelChannels | None = None

    async def api(self, *path: str, method: str = "GET", body: Any = None) -> Any:
        """Jupyter's own REST API (``/api/...``)."""
        return await self.server.api(*path, method=method, body=body)

    async def ours(self, *path: str, method: str = "GET") -> Any:
        """The extension's REST API (``/jupyter-remote-hw/api/...``)."""
        request = HTTPRequest(
            f"{self.server.url}/jupyter-remote-hw/api/{'/'.join(path)}",
            method=method,
            headers={"Authorization": f"token {self.server.token}"},
            body=b"" if method == "POST" else None,
            request_timeout=600,
        )
        response = await AsyncHTTPClient().fetch(request)
        return json.loads(response.body) if response.body else None

    async def listing(self) -> None:
        rows = (await self.ours("hardware"))["hardware"]
        [local] = [row for row in rows if row["name"] == "local"]
        gpus = smi()
        if not gpus:
            self.steps.expect(
                "hardware listing",
                not local.get("gpu") and "CPU" in local["label"],
                f"local row without a GPU: {local['label']!r}",
            )
            return
        model = gpus[0]["name"].split()[-1]  # "NVIDIA H200" -> "H200"
        total_gib = gpus[0]["total_mib"] / 1024
        shown = local.get("gpu_memory_gib") or 0
        self.steps.expect(
            "hardware listing",
            model in (local.get("gpu") or "") + local["label"] and abs(shown - total_gib) < 2,
            f"local row {local['label']!r}, gpu {local.get('gpu')!r} ×{local.get('gpu_count')}",
            gpu_memory_gib=shown,
            smi_total_gib=round(total_gib, 1),
        )

    async def start_local_kernel(self) -> None:
        began = time.perf_counter()
        kernel = await self.api("kernels", method="POST", body={"name": "remote-hw-local"})
        self.kernel_id = kernel["id"]
        self.kc = await self.server.channels(self.kernel_id)
        seen = await cell(
            self.kc,
            "import torch\nprint(torch.__version__, torch.cuda.is_available(), "
            "torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-')",
        )
        self.steps.expect(
            "local kernel",
            (" True " in f" {seen} ") == self.cuda,
            f"torch in the kernel: {seen}",
            seconds=round(time.perf_counter() - began, 2),
        )

    async def live_view(self) -> None:
        usage = await self.ours("usage", self.kernel_id)
        gpus = usage.get("gpus") or []
        if not self.cuda:
            self.steps.expect(
                "live view",
                usage["cpu"]["count"] > 0 and usage["kernel"] is not None,
                f"{usage['hardware']!r}: {usage['cpu']['count']} CPUs, no GPU "
                f"({len(gpus)} listed), warnings {usage.get('warnings')}",
            )
            return
        named = gpus[0]["name"] if gpus else "-"
        self.steps.expect(
            "live view",
            bool(gpus) and smi()[0]["name"] == named and gpus[0]["memory_total_gib"] is not None,
            f"{usage['hardware']!r}: GPU {named}, "
            f"{gpus[0]['memory_used_gib'] if gpus else '-'} of "
            f"{gpus[0]['memory_total_gib'] if gpus else '-'} GiB in use",
        )

    async def hibernate_and_wake(self) -> None:
        assert self.kc is not None
        before = smi()
        await cell(
            self.kc,
            f"t = torch.empty({GIB // 4}, device='{self.device}').normal_()\n"
            f"layer = torch.nn.Linear(256, 16).to('{self.device}')\n"
            "host = torch.arange(10.)\n"
            "check = float(t.double().sum())\n"
            "print(check)",
        )
        held = smi()
        # The same bytes copied on the same disk by cp and sync, just before the save and
        # just after it: on a disk whose speed depends on where a write lands (new space
        # or space just freed), the two bracket what the save met.
        cp_before = cp_sync_seconds(self.workdir, GIB)
        began = time.perf_counter()
        saved = await self.ours("hibernate", self.kernel_id, method="POST")
        first = time.perf_counter() - began
        after = smi()
        cp_sync = cp_sync_seconds(self.workdir, int(saved["bytes"]))
        disk = {
            "cp_sync_mib_s": rate(saved["bytes"], cp_sync),
            "ratio_to_cp_sync": round(cp_sync / first, 2),
            "cp_sync_before_mib_s": rate(GIB, cp_before),
            "ratio_to_cp_sync_before": round(cp_before * saved["bytes"] / GIB / first, 2),
        }
        if held:
            given_back = after[0]["used_mib"] <= before[0]["used_mib"] + RELEASED_SLACK_MIB
            self.steps.expect(
                "hibernate releases the GPU",
                saved["hibernated"] and given_back,
                f"nvidia-smi MiB in use: {before[0]['used_mib']} before the state, "
                f"{held[0]['used_mib']} holding it, {after[0]['used_mib']} hibernated",
                seconds=round(first, 2),
                bytes=saved["bytes"],
                mib_s=rate(saved["bytes"], first),
                **disk,
            )
        else:
            self.steps.expect(
                "hibernate",
                saved["hibernated"],
                f"saved {[v['name'] for v in saved['saved']]}",
                seconds=round(first, 2),
                bytes=saved["bytes"],
                mib_s=rate(saved["bytes"], first),
                **disk,
            )
        cold = self.cold and drop_page_cache()  # as after hours asleep
        began = time.perf_counter()
        seen = await cell(
            self.kc,
            "print(t.device, next(layer.parameters()).device, host.device, "
            "float(t.double().sum()) == check)",
            timeout=300,
        )
        woke = time.perf_counter() - began
        self.steps.expect(
            "wake puts the tensors back" + (" (page cache dropped first)" if cold else ""),
            seen == f"{self.device} {self.device} cpu True",
            f"first cell after the wake printed {seen!r}",
            seconds=round(woke, 2),
            mib_s=rate(saved["bytes"], woke),
        )
        began = time.perf_counter()
        again = await self.ours("hibernate", self.kernel_id, method="POST")
        second = time.perf_counter() - began
        self.steps.expect(
            "second hibernation of the same state",
            again["hibernated"],
            f"{again['bytes']} bytes stored",
            seconds=round(second, 2),
            ratio_to_first=round(second / first, 2),
        )
        if cold:
            # What the disk alone takes to give back the saved bytes, page cache dropped:
            # what a wake would wait for after the kernel started, were they not read
            # while it starts. The files are where this machine keeps them (the local
            # agent's state).
            files = sorted(self.workdir.glob(f"**/hibernated/{self.kernel_id}/var-*.bin"))
            nbytes = sum(f.stat().st_size for f in files)
            seconds = read_cold_seconds(files)
            self.steps.expect(
                "reading the saved state from the disk (page cache dropped)",
                nbytes > 0,
                f"{len(files)} files, {nbytes} bytes",
                seconds=round(seconds, 2),
                mib_s=rate(nbytes, seconds),
            )
        await cell(self.kc, "print(t.device)", timeout=300)

    async def start_plain_kernel(self) -> None:
        kernel = await self.api("kernels", method="POST", body={"name": "python3"})
        self.plain = await self.server.channels(kernel["id"])
        await cell(self.plain, "%load_ext jupyter_remote_hw\nimport torch")

    async def remote_device(self) -> None:
        assert self.plain is not None
        if not self.cuda:
            await cell(self.plain, "small = torch.ones(3)")
            ran = await self.plain.execute(
                "%%remote local --in small --device cuda\nprint(small)", timeout=180
            )
            said = " ".join(
                m["content"].get("text", "") + " ".join(m["content"].get("traceback", []))
                for m in ran.messages
            )
            self.steps.expect(
                "%%remote --device cuda without a GPU",
                ran.status == "error" and "no usable CUDA device" in said,
                f"the cell answered {ran.status}: {said.strip()[-300:]!r}",
            )
            return
        await cell(self.plain, "small = torch.ones(3)")
        seen = await cell(
            self.plain, "%%remote local --in small --device cuda\nprint(small.device)", 300
        )
        self.steps.expect("%%remote --device cuda", seen.endswith("cuda:0"), f"printed {seen!r}")

    async def big_move(self) -> None:
        assert self.plain is not None
        await cell(
            self.plain,
            f"big = torch.empty({self.nbytes // 4}, device='{self.device}').normal_()\n"
            "want = float(big.double().sum())",
            timeout=300,
        )
        device = " --device cuda" if self.cuda else ""
        began = time.perf_counter()
        seen = await cell(
            self.plain,
            f"%%remote local --in big{device}\nprint(big.device, big.numel())",
            timeout=420,
        )
        moved = time.perf_counter() - began
        figures = {"seconds": round(moved, 2), "mib_s": rate(self.nbytes, moved)}
        figures |= disk_figures(self.workdir, self.nbytes)
        if self.cuda:
            figures |= copy_figures(self.nbytes)
        self.steps.expect(
            f"{self.nbytes / GIB:g} GiB tensor between two kernels",
            seen.split()[-2:] == [self.device, str(self.nbytes // 4)],
            f"printed {seen!r}",
            **figures,
        )
        await cell(self.plain, "del big")

    async def library_devices(self) -> None:
        if not self.cuda:
            self.steps.skip("library device checks", "no CUDA here")
            return
        from benchmarks.gpu_hibernate_check import check

        failed = await check(str(self.workdir))
        self.steps.expect("library device checks", failed == 0, f"{failed} failed")

    async def all(self) -> None:
        run = self.steps.run
        await run("hardware listing", self.listing, 60)
        await run("local kernel", self.start_local_kernel, 240)
        if self.kc is None:
            return
        await run("live view", self.live_view, 60)
        await run("hibernate and wake", self.hibernate_and_wake, 600)
        await run("plain kernel", self.start_plain_kernel, 120)
        if self.plain is not None:
            await run("%%remote --device cuda", self.remote_device, 360)
            await run("big tensor", self.big_move, 900)
        await run("library device checks", self.library_devices, 300)


async def main_async(args: argparse.Namespace) -> Steps:
    facts = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        **torch_facts(),
        "gpus": smi(),
    }
    print("machine:", json.dumps(facts), flush=True)
    cuda = bool(facts["cuda"]) and not args.cpu
    with tempfile.TemporaryDirectory(prefix="gpu-check-", dir=args.workdir) as tmp:
        root = Path(tmp)
        dirs = server_dirs(root)
        (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps(server_config(root)))
        os.environ["JUPYTER_CONFIG_DIR"] = str(dirs["config"])  # for %%remote in kernels
        server = start_server(dirs, root / "server.log")
        check = Check(server, root, args.gib, cuda, cold=args.cold)
        try:
            began = time.perf_counter()
            await server.ready(120)
            check.steps.expect(
                "server",
                True,
                "jupyter_server with the extension",
                seconds=round(time.perf_counter() - began, 2),
            )
            await check.all()
        except (OSError, HTTPClientError, RuntimeError) as exc:
            check.steps.record("server", "FAIL", str(exc)[:600])
        finally:
            server.stop()
            AsyncHTTPClient().close()
            log = (root / "server.log").read_text()
            # Where a hibernation's and a wake's time went, step by step, as the server says.
            for line in log.splitlines():
                if any(word in line for word in (" saved: ", " woke on ", " hibernated: ")):
                    print("server:", line.split("] ", 1)[-1])
            if check.steps.failed:
                print("--- server log (end) ---\n" + log[-6000:])
        check.steps.results.insert(0, {"step": "machine", **facts})
        return check.steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=4.0, help="size of the moved tensor")
    parser.add_argument("--json", type=Path, help="write every step's figures here")
    parser.add_argument("--workdir", help="where the server's state and the disk figures go")
    parser.add_argument("--cpu", action="store_true", help="keep tensors on the CPU")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="drop the page cache before the wake (root), as hours asleep would, and time "
        "reading the saved state from the disk alone",
    )
    args = parser.parse_args()
    steps = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(steps.results, indent=2))
    print("every step that ran passed" if not steps.failed else f"{steps.failed} step(s) failed")
    return 1 if steps.failed else 0


if __name__ == "__main__":
    sys.exit(main())
