"""``jupyter remote-hw hibernated --delete`` of a kernel whose state waits in a SLURM
cluster's home: the files there go too, over the login node, not only the manifest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from jupyter_remote_hw.hibernation import HibernationStore, save
from jupyter_remote_hw.hibernation.far import FarPlace

from ...cli.conftest import run_cli
from ...conftest import TEST_TRANSPORT
from ...hibernation.conftest import StartKernel, kernels, run, start_kernel  # noqa: F401
from ...testhosts import SSHTestHost
from .conftest import CLUSTER, cluster_entry


async def test_deleting_a_kernels_state_kept_on_a_cluster_removes_it_there(
    tmp_path: Path,
    short_tmp: Path,
    login_host: SSHTestHost,
    kernels: Any,
    start_kernel: StartKernel,
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # no server runs
    root = short_tmp / "c"
    store_root = tmp_path / "store"
    kernel_id = await start_kernel()
    await run(kernels, kernel_id, "import numpy as np\na = np.ones(1 << 16)")
    # The kernel writes its variables in the cluster's home (this machine's disk here,
    # as the login node's): the store keeps the manifest.
    place = FarPlace("slurm", f"slurm:{CLUSTER}", str(root / "hibernated" / kernel_id), "dev")
    store = HibernationStore(root=str(store_root), max_bytes=0, min_free_bytes=0)
    await save(kernels, kernel_id, store, far=place)
    far = root / "hibernated" / kernel_id
    assert sorted(p.name for p in far.iterdir()) == ["index.json", "var-0000.bin"]

    def cli(*argv: str) -> tuple[int, str, str]:
        return run_cli(
            tmp_path,
            argv,
            HibernationStore={"root": str(store_root)},
            TransportManager={"ssh_config_files": [str(login_host.ssh_config)], **TEST_TRANSPORT},
            SLURMProvider={"clusters": {CLUSTER: cluster_entry(login_host.alias, root)}},
        )

    code, out, err = await asyncio.to_thread(cli, "hibernated", "--delete", kernel_id, "--yes")
    assert code == 0, (out, err)
    lines = out.splitlines()
    assert lines[0].startswith(f"deleted the saved state of kernel {kernel_id}")
    assert lines[1] == f"its saved state in {far} on dev removed"
    assert not far.exists() and store.entries() == []
