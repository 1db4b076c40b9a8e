"""A stand-in ``nvidia-smi`` (the one part of a GPU host that cannot run here), and the
``PATH`` that puts it first, for agents and test hosts."""

from __future__ import annotations

import os
from pathlib import Path

#: The directory holding the stand-in ``nvidia-smi``.
FAKE_GPU_BIN = Path(__file__).resolve().parent

#: What it reports.
FAKE_GPU_NAME = "NVIDIA H100 80GB HBM3"
FAKE_GPU_UTILIZATION = 37.0
FAKE_GPU_MEMORY_USED_GIB = round(12390 / 1024, 2)
FAKE_GPU_MEMORY_TOTAL_GIB = round(81559 / 1024, 2)


def path_with_fake_gpu(path: str | None = None) -> str:
    """``path`` (this process's ``PATH`` by default) with the stand-in first."""
    rest = os.environ.get("PATH", "") if path is None else path
    return os.pathsep.join(filter(None, [str(FAKE_GPU_BIN), rest]))
