"""On a machine with CUDA: a kernel holding tensors on the GPU hibernates and wakes with
them back on the GPU, and on a machine without a GPU it wakes with them on the CPU.

    python3 benchmarks/gpu_hibernate_check.py

What it does, with local ipykernels and a store in a temporary directory (the
same calls the provisioner makes when a kernel hibernates and wakes):

1. a kernel makes a tensor and a module on ``cuda:0``, a CPU tensor, and a list
   with one tensor on each (and a tensor on ``cuda:1`` when there are two GPUs);
   :func:`~jupyter_remote_hw.hibernation.save` must record each one's device;
2. the kernel is shut down, a fresh one started, and
   :func:`~jupyter_remote_hw.hibernation.restore` (no ``device``) must put each
   tensor back on its device, the mixed list on the CPU with a note;
3. restored again into a kernel that sees no GPU (``CUDA_VISIBLE_DEVICES=""``):
   everything must come back, on the CPU, with a note naming each variable and
   its device, and the wake must not fail;
4. restored with ``device="cuda"``: everything on the GPU.

Exit status: 0 when every check passes, 1 when one fails (each is printed),
77 when this machine has no usable CUDA device (nothing was checked). The
pytest counterpart, which the test suite skips without CUDA, is
``tests/hibernation/test_devices.py``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from jupyter_client.multikernelmanager import AsyncMultiKernelManager

from jupyter_remote_hw.hibernation import HibernationStore, restore, save
from jupyter_remote_hw.transfer.variables import transfer_client

#: Exit status of a check that could not run here (as automake's test drivers read it).
SKIPPED = 77

STATE = """
import torch
t = torch.arange(1000., device="cuda:0")
layer = torch.nn.Linear(4, 2).to("cuda:0")
host = torch.ones(3)
both = [torch.ones(1, device="cuda:0"), torch.ones(1)]
if torch.cuda.device_count() > 1:
    second = torch.full((2,), 5., device="cuda:1")
"""

#: Printed by the kernel: where each variable is, and whether its values are whole.
WHERE = (
    "print(t.device, next(layer.parameters()).device, host.device, both[0].device, "
    "float(t.sum()) == 499500.0, "
    "str(second.device) if 'second' in globals() else '-')"
)


class Checks:
    """The checks' outcomes, printed as they come."""

    def __init__(self) -> None:
        self.failed = 0

    def expect(self, what: str, seen: Any, wanted: Any) -> None:
        ok = seen == wanted
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {seen!r}" + ("" if ok else f", not {wanted!r}"))


async def start(kernels: AsyncMultiKernelManager, home: str, **env: str) -> str:
    """A ``python3`` kernel that can answer transfers (this checkout on its path)."""
    kernel_id = str(
        await kernels.start_kernel(
            kernel_name="python3",
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
                ),
                **env,
            },
            cwd=home,
        )
    )
    client: Any = kernels.get_kernel(kernel_id).client()  # an async client
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=120)
    finally:
        client.stop_channels()
    return kernel_id


async def run(kernels: AsyncMultiKernelManager, kernel_id: str, code: str) -> str:
    """What ``code`` printed in the kernel (raises on an error)."""
    outputs: list[dict[str, Any]] = []
    async with transfer_client(kernels, kernel_id) as client:
        await client.link.outputs_ready()
        reply = await client.link.execute(code, outputs.append)
    if reply["status"] != "ok":
        raise RuntimeError(f"{reply.get('ename')}: {reply.get('evalue')}")
    return "".join(o["content"]["text"] for o in outputs if o["msg_type"] == "stream").strip()


async def check(workdir: str) -> int:
    """Run every check; the number that failed."""
    import torch

    gpus = torch.cuda.device_count()
    second = "cuda:1" if gpus > 1 else "-"
    checks = Checks()
    store = HibernationStore(root=os.path.join(workdir, "store"), max_bytes=0, min_free_bytes=0)
    kernels = AsyncMultiKernelManager()
    try:
        old = await start(kernels, workdir)
        await run(kernels, old, STATE)
        summary = await save(kernels, old, store, "refuse")
        wanted = {"t": "cuda:0", "layer": "cuda:0", "host": "cpu", "both": "mixed"}
        if gpus > 1:
            wanted["second"] = "cuda:1"
        checks.expect("devices recorded at save", summary.entry.manifest.get("devices"), wanted)
        await kernels.shutdown_kernel(old, now=True)

        woken = await start(kernels, workdir)
        woke = await restore(kernels, woken, store, old)
        placed = {"t": "cuda:0", "layer": "cuda:0"} | ({"second": "cuda:1"} if gpus > 1 else {})
        checks.expect("devices after a wake on this machine", woke.devices, placed)
        checks.expect("notes of that wake", len(woke.notes), 1)
        checks.expect(
            "where each variable is",
            await run(kernels, woken, WHERE),
            f"cuda:0 cuda:0 cpu cpu True {second}",
        )

        blind = await start(kernels, workdir, CUDA_VISIBLE_DEVICES="")
        woke = await restore(kernels, blind, store, old)
        checks.expect("devices after a wake where no GPU is seen", woke.devices, {})
        named = sorted(name for name in wanted if name != "host")
        checks.expect(
            "variables named in its notes",
            sorted(name for name in named if any(f"'{name}'" in n for n in woke.notes)),
            named,
        )
        checks.expect(
            "where each variable is",
            await run(kernels, blind, WHERE),
            "cpu cpu cpu cpu True " + ("cpu" if gpus > 1 else "-"),
        )

        asked = await start(kernels, workdir)
        await restore(kernels, asked, store, old, device="cuda")
        checks.expect(
            "where each variable is with device='cuda'",
            (await run(kernels, asked, WHERE)).split()[:4],
            ["cuda:0", "cuda:0", "cuda:0", "cuda:0"],
        )
    finally:
        await kernels.shutdown_all(now=True)
    return checks.failed


def main() -> int:
    """Run the checks when this machine has CUDA."""
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return SKIPPED
    if not torch.cuda.is_available():
        print(f"skipped: no usable CUDA device here (torch {torch.__version__})")
        return SKIPPED
    with tempfile.TemporaryDirectory(prefix="gpu-hibernate-") as workdir:
        failed = asyncio.run(check(workdir))
    print("all checks passed" if not failed else f"{failed} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
