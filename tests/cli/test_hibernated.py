"""``jupyter remote-hw hibernated``: the saved state of hibernated kernels with its size
and what it holds, the total against the cap, and deleting one kernel's state."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.hibernation import HibernationStore, save

from ..hibernation.conftest import StartKernel, kernels, run, start_kernel  # noqa: F401
from .conftest import run_cli


def cli(tmp_path: Path, store: Path, *argv: str) -> tuple[int, str, str]:
    return run_cli(tmp_path, argv, HibernationStore={"root": str(store), "max_bytes": 1 << 30})


async def test_saved_state_is_listed_with_its_size_and_deleted(
    tmp_path: Path,
    kernels: Any,
    start_kernel: StartKernel,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # no server runs
    root = tmp_path / "hibernated"
    code, out, _ = await asyncio.to_thread(cli, tmp_path, root, "hibernated")
    assert code == 0
    assert out.splitlines()[0] == "no hibernated kernel state is kept on this machine"

    kernel_id = await start_kernel()
    await run(kernels, kernel_id, "import numpy as np\na = np.ones(4 << 20)\nf = open('x', 'w')")
    store = HibernationStore(root=str(root), max_bytes=0, min_free_bytes=0)
    saved = await save(kernels, kernel_id, store)
    code, out, _ = await asyncio.to_thread(cli, tmp_path, root, "hibernated")
    assert code == 0, out
    header, _, row, *rest = out.splitlines()
    assert header.split() == [
        "kernel",
        "hardware",
        "saved",
        "size",
        "kept",
        "on",
        "variables",
        "left",
        "out",
        "others",
        "ran",
        "code",
        "problem",
    ]
    # Its id, the kernel it came from, when, 32 MiB of array, one variable, the open file,
    # and no one else could run code in it (the column says "yes" for a shared one).
    assert row.split()[:2] == [kernel_id[:8], "python3"]
    assert " ago " in row and "32.0 MiB  this machine" in row and row.split()[-2:] == ["f", "-"]
    total = f"{saved.entry.nbytes / (1 << 20):.1f} MiB"
    assert rest == [f"in all: {total} of 1.0 GiB (c.HibernationStore.max_bytes), in {root}"]

    # Deleting asks first; --yes answers; a prefix of the id is enough.
    code, out, err = await asyncio.to_thread(
        cli, tmp_path, root, "hibernated", "--delete", kernel_id[:6]
    )
    assert code == 1 and "Pass --yes to confirm" in err, (out, err)
    assert [e.entry_id for e in store.entries()] == [kernel_id]
    code, out, _ = await asyncio.to_thread(
        cli, tmp_path, root, "hibernated", "--delete", kernel_id[:6], "--yes"
    )
    assert code == 0 and out.startswith(f"deleted the saved state of kernel {kernel_id}")
    assert store.entries() == []
    code, _, err = await asyncio.to_thread(
        cli, tmp_path, root, "hibernated", "--delete", kernel_id[:6], "--yes"
    )
    assert code == 1 and f"no saved state of kernel {kernel_id[:6]}" in err
    # A bad id is refused before anything is read.
    with pytest.raises(SystemExit) as ended:
        await asyncio.to_thread(cli, tmp_path, root, "hibernated", "--delete", "../x")
    assert ended.value.code == 2
    assert "argument --delete: kernel '../x' is not valid" in capsys.readouterr().err
