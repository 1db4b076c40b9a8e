"""A stand-in ``nvidia-smi`` (the one part of a GPU host that cannot run here), and the
``PATH`` that puts it first, for agents and test hosts; and, in ``accelerators/``,
stand-ins for ``neuron-ls`` (AWS Trainium and Inferentia) and ``hl-smi`` (Habana Gaudi),
kept apart so that a host given the fake GPU sees no accelerator."""

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


#: The directory holding the stand-in ``neuron-ls`` and ``hl-smi``.
FAKE_ACCELERATOR_BIN = FAKE_GPU_BIN / "accelerators"


def path_with_fake_accelerators(path: str | None = None) -> str:
    """``path`` (this process's ``PATH`` by default) with the stand-in ``neuron-ls`` and
    ``hl-smi`` first."""
    rest = os.environ.get("PATH", "") if path is None else path
    return os.pathsep.join(filter(None, [str(FAKE_ACCELERATOR_BIN), rest]))
