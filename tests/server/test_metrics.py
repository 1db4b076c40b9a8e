"""The live hardware view through a real jupyter_server: kernels on this machine (the
``local`` target and a plain ``python3`` kernel), on the loopback sshd test host (no
GPU) and on a second loopback host whose PATH has a stand-in nvidia-smi."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from ..fakegpu import FAKE_GPU_MEMORY_TOTAL_GIB, FAKE_GPU_NAME, path_with_fake_gpu
from ..provisioner.conftest import (
    HARDWARE,
    LOCAL_KERNEL,
    SHOWN,
    SSH_KERNEL,
    StartKernel,
    write_config,
)
from ..testhosts import SSHTestHost, loopback_host
from .apiclient import Fetch, failure, get

GPU_TARGET = "ssh-gpuhost"


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHTestHost]:
    """A loopback sshd whose sessions find the stand-in nvidia-smi first on their PATH."""
    with loopback_host(
        tmp_path_factory.mktemp("gpuhost"), alias="gpuhost", env={"PATH": path_with_fake_gpu()}
    ) as host:
        yield host


@pytest.fixture
def jp_server_config(
    ssh_host: SSHTestHost, gpu_host: SSHTestHost, short_tmp: Path, remote_root: Path
) -> dict[str, Any]:
    ssh_config = short_tmp / "ssh_config"
    ssh_config.write_text(ssh_host.ssh_config.read_text() + gpu_host.ssh_config.read_text())
    hosts = [
        {
            "host": ssh_host.alias,
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root),
        },
        {
            "host": gpu_host.alias,
            "python": sys.executable,
            "hardware": "H100 80GB",
            "root": str(short_tmp / "g"),
        },
    ]
    return write_config(short_tmp / "config.json", ssh_config, remote_root, short_tmp / "l", hosts)


def meminfo_total_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024**2, 3)
    raise AssertionError("no MemTotal")


def check_this_machine(metrics: dict[str, Any]) -> None:
    """CPU and memory of this machine (every test host is this machine), in sane ranges."""
    assert 0.0 <= metrics["cpu"]["percent"] <= 100.0
    assert metrics["memory"]["total_gib"] == meminfo_total_gib()
    assert 0.0 < metrics["memory"]["used_gib"] < metrics["memory"]["total_gib"]
    assert len(metrics["load"]) == 3
    assert metrics["kernel"]["memory_gib"] > 0.01  # an ipykernel holds tens of MiB
    assert metrics["kernel"]["cpu_percent"] >= 0.0


def no_gpu_here() -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")


async def test_local_target_kernel(jp_fetch: Fetch, start_kernel: StartKernel) -> None:
    no_gpu_here()
    kernel_id = await start_kernel(LOCAL_KERNEL)
    metrics = await get(jp_fetch, "usage", kernel_id)
    check_this_machine(metrics)
    assert metrics["kernel_id"] == kernel_id
    assert metrics["target"] == "local"
    assert metrics["where"] == "this machine"
    assert metrics["gpus"] == []
    assert metrics["warnings"] == []
    assert (metrics["price_per_hour"], metrics["cost_so_far"]) == (0.0, 0.0)
    # The local agent runs the kernel: the pid is its process, not the server's.
    assert metrics["kernel"]["pid"] != os.getpid()
    assert f"{kernel_id}" in Path(f"/proc/{metrics['kernel']['pid']}/cmdline").read_text()

    # Tabs polling together share one reading for 2 s; then the host is read again.
    again = await asyncio.gather(*(get(jp_fetch, "usage", kernel_id) for _ in range(3)))
    assert {m["time"] for m in again} == {metrics["time"]}
    await asyncio.sleep(2.1)
    later = await get(jp_fetch, "usage", kernel_id)
    assert later["time"] > metrics["time"]


async def test_ssh_host_without_nvidia_smi_reports_no_gpu(
    jp_fetch: Fetch, start_kernel: StartKernel
) -> None:
    no_gpu_here()
    kernel_id = await start_kernel(SSH_KERNEL)
    metrics = await get(jp_fetch, "usage", kernel_id)
    check_this_machine(metrics)
    assert metrics["target"] == "ssh-testhost"
    assert metrics["hardware"] == SHOWN
    assert metrics["gpus"] == []
    assert (metrics["price_per_hour"], metrics["cost_so_far"]) == (0.0, 0.0)


async def test_ssh_host_with_nvidia_smi_reports_its_gpu(
    jp_fetch: Fetch, start_kernel: StartKernel
) -> None:
    kernel_id = await start_kernel(f"remote-hw-{GPU_TARGET}")
    metrics = await get(jp_fetch, "usage", kernel_id)
    check_this_machine(metrics)
    assert metrics["target"] == GPU_TARGET
    assert metrics["where"] == "gpuhost"
    [gpu] = metrics["gpus"]
    assert gpu["name"] == FAKE_GPU_NAME
    assert gpu["utilization"] == 37.0
    assert gpu["memory_total_gib"] == FAKE_GPU_MEMORY_TOTAL_GIB
    assert 0 < gpu["memory_used_gib"] < gpu["memory_total_gib"]
    assert metrics["warnings"] == []


async def test_plain_python3_kernel_reads_this_machine(
    jp_fetch: Fetch, jp_serverapp: Any, start_kernel: StartKernel
) -> None:
    no_gpu_here()
    kernel_id = await start_kernel("python3")
    metrics = await get(jp_fetch, "usage", kernel_id)
    check_this_machine(metrics)
    assert metrics["target"] is None
    assert metrics["where"] == "this machine"
    assert metrics["gpus"] == []
    provisioner = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert metrics["kernel"]["pid"] == provisioner.pid
    assert (metrics["price_per_hour"], metrics["cost_so_far"]) == (0.0, 0.0)


async def test_unknown_kernel_is_404(jp_fetch: Fetch) -> None:
    status, body = await failure(jp_fetch, "usage", "no-such-kernel", method="GET")
    assert status == 404
    assert body["field"] == "kernel_id"
    assert "no-such-kernel" in body["message"]


async def test_metrics_need_authentication(
    jp_fetch: Fetch, jp_http_port: int, jp_base_url: str
) -> None:
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}jupyter-remote-hw/api/usage/x"
    with pytest.raises(HTTPClientError) as caught:
        await AsyncHTTPClient().fetch(url)
    assert caught.value.code == 401
