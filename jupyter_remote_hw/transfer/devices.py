"""Placing arriving tensors and modules on a device (``--device cuda``).

Runs inside kernels on hosts: Python 3.8 syntax, torch imported only when a
device is asked for.
"""

from __future__ import annotations

import sys
from typing import Any

from .errors import TransferError


def check_device(device: str) -> None:
    """Fail before anything is received when ``device`` cannot be used here.

    Raises:
        TransferError: torch is missing, or it sees no such device.
    """
    if device == "cpu":
        return
    try:
        import torch
    except ImportError:
        raise TransferError(
            f"--device {device}: torch is not installed in this kernel's Python "
            f"({sys.executable}). Nothing was assigned; install torch there, or leave out "
            "--device."
        ) from None
    if not device.startswith("cuda"):
        raise TransferError(
            f"--device {device}: only 'cuda', 'cuda:N' and 'cpu' are supported. "
            "Nothing was assigned."
        )
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        raise TransferError(
            f"--device {device}: this host has no usable CUDA device (torch {torch.__version__}, "
            f"{build}). Nothing was assigned; pick GPU hardware, or leave out --device."
        )
    index = device.partition(":")[2]
    if index and int(index) >= torch.cuda.device_count():
        raise TransferError(
            f"--device {device}: this host has {torch.cuda.device_count()} CUDA device(s). "
            "Nothing was assigned."
        )


def to_device(value: Any, device: str) -> Any:
    """``value`` with its tensors and modules moved to ``device``.

    Tensors and ``nn.Module``s are moved; dicts, lists and tuples are rebuilt
    around their moved items; anything else is returned as it is.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return value
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return value.to(device)
    if isinstance(value, dict):
        return type(value)((key, to_device(item, device)) for key, item in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(to_device(item, device) for item in value)
    return value
