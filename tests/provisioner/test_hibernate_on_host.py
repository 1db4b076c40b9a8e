"""A kernel on an SSH host keeps its hibernated state on the host's own disk: it writes
its variables there itself and reads them back there when it wakes, so the bytes never
cross the link; the store keeps the manifest and the digests. A host whose disk does
not outlive it (``hibernate_on_host: false``) keeps its state in the store. Real
jupyter_server, real sshd test host (this machine, so its disk is readable here), real
ipykernels."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.providers.ssh.provider import HIBERNATED_DIR

from ..testhosts import SSHTestHost
from .conftest import HARDWARE, SSH_KERNEL, Fetch, OpenChannels, StartKernel
from .test_hibernate import hibernate, kernel_row, store, stored


@pytest.fixture
def hosts(ssh_host: SSHTestHost, remote_root: Path, request: pytest.FixtureRequest) -> Any:
    """The loopback test host, with the host entry's extra keys a test asks for."""
    extra = getattr(request, "param", {})
    return [
        {
            "host": ssh_host.alias,
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root),
            **extra,
        }
    ]


def data_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("var-*.bin"))


async def test_a_kernel_on_a_host_keeps_its_state_on_the_hosts_disk(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    remote_root: Path,
    ssh_host: SSHTestHost,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    setup = "import numpy as np\nweights = np.arange(1 << 20, dtype=np.float64)\nx = 41"
    assert (await kc.execute(setup)).status == "ok"

    answer = await hibernate(jp_fetch, kernel_id)
    assert answer["hibernated"] is True
    assert answer["kept_on"] == f"the disk of {ssh_host.alias}"
    entry = store().entry(kernel_id)
    assert entry.far is not None and entry.far["label"] == f"the disk of {ssh_host.alias}"
    kept = remote_root / HIBERNATED_DIR / kernel_id
    assert Path(entry.far["path"]) == kept and data_files(kept)
    # The store holds the manifest and the digests, not the bytes.
    assert data_files(store().entry_path(kernel_id)) == []
    assert store().entry_path(kernel_id).joinpath("manifest.json").exists()
    assert (await kernel_row(jp_fetch, kernel_id))["hibernated"]["kept_on"] == entry.far["label"]

    woken = await kc.execute("print(x + 1, float(weights.sum()))", timeout=120)
    assert woken.status == "ok", woken
    assert woken.stdout.split() == ["42", str(float(sum(range(1 << 20))))]
    assert not stored(kernel_id) and not kept.exists()

    # Shutting down a kernel hibernated again removes its files on the host too.
    assert (await hibernate(jp_fetch, kernel_id))["hibernated"] is True
    assert data_files(kept)
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert not kept.exists() and not stored(kernel_id)
    assert not list((remote_root / HIBERNATED_DIR).glob(f"*{kernel_id}*"))


@pytest.mark.parametrize("hosts", [{"hibernate_on_host": False}], indirect=True)
async def test_a_host_whose_disk_does_not_persist_keeps_its_state_in_the_store(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    remote_root: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    answer = await hibernate(jp_fetch, kernel_id)
    assert answer["hibernated"] is True and answer["kept_on"] is None
    assert store().entry(kernel_id).far is None
    assert data_files(store().entry_path(kernel_id))
    assert not (remote_root / HIBERNATED_DIR / kernel_id).exists()
    assert (await kc.execute("x + 1", timeout=120)).result == "42"
