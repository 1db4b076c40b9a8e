"""The server copies variables from one of its kernels to another (switching hardware)."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_remote_hw.transfer import TransferError
from jupyter_remote_hw.transfer.variables import copy_variables

from ..kernelws import KernelChannels
from .conftest import LOCAL_KERNEL, SSH_KERNEL, OpenChannels, StartKernel


async def two_kernels(
    start_kernel: StartKernel, channels: OpenChannels, source_name: str, destination_name: str
) -> tuple[str, str, KernelChannels, KernelChannels]:
    """Start a source and a destination kernel; their ids and open channels."""
    source_id = await start_kernel(source_name)
    destination_id = await start_kernel(destination_name)
    return source_id, destination_id, await channels(source_id), await channels(destination_id)


async def test_variables_move_from_the_local_kernel_to_the_ssh_host(
    start_kernel: StartKernel, channels: OpenChannels, jp_serverapp: Any
) -> None:
    source_id, destination_id, source, destination = await two_kernels(
        start_kernel, channels, LOCAL_KERNEL, SSH_KERNEL
    )
    ran = await source.execute(
        "import numpy as np, os\nweights = np.arange(3_000_000.)\n"
        "def loss(w):\n    return float((w ** 2).sum())\n"
        "note = f'from {os.getpid()}'"
    )
    assert ran.status == "ok", ran
    seen: list[tuple[int, int]] = []
    assigned = await copy_variables(
        jp_serverapp.kernel_manager,
        source_id,
        destination_id,
        ["weights", "loss", "note"],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [a["name"] for a in assigned] == ["weights", "loss", "note"]
    assert seen[-1][0] == seen[-1][1] > 24_000_000
    check = await destination.execute("import os\nprint(loss(weights[:3]), note, os.getpid())")
    assert check.status == "ok", check
    value, _, source_pid, destination_pid = check.stdout.split()
    assert value == "5.0" and source_pid != destination_pid


async def test_a_failed_copy_names_the_variable_and_assigns_nothing(
    start_kernel: StartKernel, channels: OpenChannels, jp_serverapp: Any
) -> None:
    source_id, destination_id, source, destination = await two_kernels(
        start_kernel, channels, LOCAL_KERNEL, LOCAL_KERNEL
    )
    assert (
        await source.execute("import threading\nfine = 1\nlock = threading.Lock()")
    ).status == "ok"
    with pytest.raises(TransferError, match=r"'lock' \(_thread.lock\)"):
        await copy_variables(
            jp_serverapp.kernel_manager, source_id, destination_id, ["fine", "lock"]
        )
    check = await destination.execute("print('fine' in globals())")
    assert check.stdout.strip() == "False"


async def test_a_plain_kernel_is_made_to_answer_transfers(
    start_kernel: StartKernel, jp_serverapp: Any
) -> None:
    plain_id = await start_kernel("python3")
    ours_id = await start_kernel(LOCAL_KERNEL)
    # It answers (the handler was loaded into it): the error is about the variable.
    with pytest.raises(TransferError, match="no variable named 'x'"):
        await copy_variables(jp_serverapp.kernel_manager, plain_id, ours_id, ["x"])
