"""Placing arriving tensors and modules on a device (``--device cuda``), and saying
where a variable's tensors and modules live (what hibernation records).

Runs inside kernels on hosts: Python 3.8 syntax, torch imported only when a
device is asked for.
"""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING, Any

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


#: What :func:`device_of` says of a variable whose tensors live on more than one device.
MIXED = "mixed"

#: The most tensors, modules and container items :func:`device_of` looks at in one
#: variable; past them, the devices of those seen answer for the whole.
LOOK_LIMIT = 100_000

if TYPE_CHECKING:  # an alias for the type checker only: Python 3.8 runs this module
    #: Where arriving variables go: one device for all, or one per variable name
    #: (names left out stay where they arrive, on the CPU).
    Placement = str | dict[str, str] | None


def device_of(value: Any) -> str | None:
    """Where ``value``'s tensors and modules live: ``cpu``, ``cuda:0`` ..., :data:`MIXED`
    when on several devices, or None when it holds none (or torch was never imported).

    It looks where :func:`to_device` moves (tensors, a module's parameters and
    buffers, dicts, lists and tuples around them), reading each tensor's
    ``device`` only: nothing is copied.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    found: set[str] = set()
    pending = [value]
    for _ in range(LOOK_LIMIT):
        if not pending:
            break
        item = pending.pop()
        if isinstance(item, torch.Tensor):
            found.add(str(item.device))
        elif isinstance(item, torch.nn.Module):
            found.update(str(t.device) for t in itertools.chain(item.parameters(), item.buffers()))
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)) and not hasattr(item, "_fields"):
            pending.extend(item)
    found.discard("meta")  # no memory anywhere: nothing to put back
    if not found:
        return None
    return found.pop() if len(found) == 1 else MIXED


def placements(device: Placement) -> list[str]:
    """Every device a placement names."""
    if isinstance(device, dict):
        return sorted(set(device.values()))
    return [device] if device else []


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
