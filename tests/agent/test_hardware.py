"""The hardware report: this test machine has no GPU and says so plainly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from jupyter_remote_hw.agent.hardware import gpu_size_label, parse_gpu_csv, summarize

from .agentclient import AgentClient


def meminfo_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal")


async def test_host_without_gpu_reports_no_gpu(client: AgentClient) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    report = await client.call("hardware")
    assert report["gpus"] == []
    assert report["cpu_count"] == len(os.sched_getaffinity(0))
    assert report["memory_mib"] == meminfo_mib()
    cpus = report["cpu_count"]
    gib = report["memory_mib"] / 1024
    assert report["summary"] == f"no GPU · {cpus} CPU{'' if cpus == 1 else 's'} · {gib:.1f} GiB RAM"
    try:
        import torch  # noqa: F401
    except ImportError:
        assert report["torch"] is None
    else:
        assert report["torch"]["cuda_available"] is False
    assert report["warnings"] == []


async def test_hardware_is_cached_and_refreshable(client: AgentClient) -> None:
    first = await client.call("hardware")
    assert await client.call("hardware") == first
    assert await client.call("hardware", refresh=True) == first


async def test_torch_probe_runs_the_given_python(client: AgentClient) -> None:
    report = await client.call("hardware", python="/nonexistent/python3")
    assert report["torch"] is None
    assert any("/nonexistent/python3" in warning for warning in report["warnings"])


def test_nvidia_smi_csv_and_summary() -> None:
    # Output as nvidia-smi prints it on a g5.12xlarge (four A10G) and an H100 box.
    gpus = parse_gpu_csv(
        "0, NVIDIA A10G, 23028, 535.104.05\n"
        "1, NVIDIA A10G, 23028, 535.104.05\n"
        "2, NVIDIA A10G, 23028, 535.104.05\n"
        "3, NVIDIA A10G, 23028, 535.104.05\n"
    )
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA A10G",
        "memory_mib": 23028,
        "driver": "535.104.05",
    }
    assert summarize(gpus, None, 48, 196608) == "4 × NVIDIA A10G 24 GiB · 48 CPUs · 192.0 GiB RAM"
    h100 = parse_gpu_csv("0, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n")
    assert summarize(h100, None, 1, None) == "1 × NVIDIA H100 80GB HBM3 80 GiB · 1 CPU"
    assert gpu_size_label(15360) == "16 GiB"  # T4
    assert gpu_size_label(143771) == "141 GiB"  # H200
    assert gpu_size_label(30000) == "29 GiB"
    torch_only = {"cuda_available": True, "devices": ["NVIDIA L4"]}
    assert summarize([], torch_only, 8, None).startswith("1 × NVIDIA L4 · ")
