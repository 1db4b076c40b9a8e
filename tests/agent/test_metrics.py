"""The agent's live view of its host: CPU and memory from /proc, GPUs from nvidia-smi
(a stand-in script here, the one part of a GPU host that cannot run on this machine)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_remote_hw.agent.metrics import parse_gpu_metrics, read_memory

from ..fakegpu import (
    FAKE_GPU_MEMORY_TOTAL_GIB,
    FAKE_GPU_MEMORY_USED_GIB,
    FAKE_GPU_NAME,
    FAKE_GPU_UTILIZATION,
    path_with_fake_gpu,
)
from .agentclient import Agent, AgentClient
from .kernelclient import execute, kernel_client


def meminfo_gib(key: str) -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024**2
    raise AssertionError(f"no {key}")


def check_host(metrics: dict[str, object]) -> None:
    """CPU, load and memory are this machine's, within sane ranges."""
    cpu = metrics["cpu"]
    assert isinstance(cpu, dict)
    assert 0.0 <= cpu["percent"] <= 100.0
    assert cpu["count"] == len(os.sched_getaffinity(0))
    memory = metrics["memory"]
    assert isinstance(memory, dict)
    assert memory["total_gib"] == round(meminfo_gib("MemTotal"), 3)
    assert 0.0 < memory["used_gib"] < memory["total_gib"]
    assert memory["percent"] == pytest.approx(
        100 * memory["used_gib"] / memory["total_gib"], abs=0.2
    )
    load = metrics["load"]
    assert isinstance(load, list) and len(load) == 3 and all(v >= 0 for v in load)


async def test_host_without_gpu_reports_none(client: AgentClient) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi")
    metrics = await client.call("metrics")
    check_host(metrics)
    assert metrics["gpus"] == []
    assert metrics["kernel"] is None
    assert metrics["warnings"] == []


async def test_gpus_come_from_nvidia_smi_on_the_path(
    start_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with_fake_gpu())
    agent = start_agent()
    client = await agent.client()
    try:
        metrics = await client.call("metrics")
    finally:
        await client.close()
    check_host(metrics)
    assert metrics["gpus"] == [
        {
            "index": 0,
            "name": FAKE_GPU_NAME,
            "utilization": FAKE_GPU_UTILIZATION,
            "memory_used_gib": FAKE_GPU_MEMORY_USED_GIB,
            "memory_total_gib": FAKE_GPU_MEMORY_TOTAL_GIB,
        }
    ]
    assert metrics["warnings"] == []


async def test_a_failing_nvidia_smi_is_a_warning_not_a_failure(
    start_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with_fake_gpu())
    monkeypatch.setenv("FAKE_NVIDIA_SMI_FAIL", "1")
    agent = start_agent()
    client = await agent.client()
    try:
        metrics = await client.call("metrics")
    finally:
        await client.close()
    check_host(metrics)
    assert metrics["gpus"] == []
    driver = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    assert metrics["warnings"] == [f"nvidia-smi failed: {driver}"]


async def test_a_kernels_own_cpu_and_memory(agent: Agent, client: AgentClient) -> None:
    started = await client.call("start_kernel", kernel_id="k-m")
    agent.kernel_pids.add(started["pid"])
    before = await client.call("metrics", kernel_id="k-m")
    assert before["kernel"]["pid"] == started["pid"]
    assert before["kernel"]["cpu_percent"] is not None
    assert 0.0 <= before["kernel"]["cpu_percent"] < 100.0 * os.cpu_count()  # type: ignore[operator]
    with kernel_client(started["connection"]) as kc:
        code = (
            "import time\nblock = bytearray(300 * 1024 * 1024)\n"
            "end = time.process_time() + 1.5\nwhile time.process_time() < end: pass"
        )
        reply = await asyncio.to_thread(execute, kc, code)
        assert reply["status"] == "ok"
    after = await client.call("metrics", kernel_id="k-m")
    # 1.5 s of CPU time within the window since the last reading: well above idle.
    assert after["kernel"]["cpu_percent"] > 20.0
    assert after["kernel"]["memory_gib"] - before["kernel"]["memory_gib"] > 0.25
    check_host(after)


async def test_an_unknown_kernel_is_named(client: AgentClient) -> None:
    response = await client.response("metrics", kernel_id="nope")
    assert response["ok"] is False
    assert response["kind"] == "unknown_kernel"
    assert "nope" in response["error"]


def test_nvidia_smi_csv() -> None:
    # As nvidia-smi prints it on a two-GPU box where one GPU cannot report its use.
    gpus = parse_gpu_metrics(
        "0, NVIDIA A100-SXM4-80GB, 98, 40123, 81920\n"
        "1, Tesla K80, [N/A], 11, [Not Supported]\n"
        "No devices were found\n"
    )
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA A100-SXM4-80GB",
            "utilization": 98.0,
            "memory_used_gib": 39.18,
            "memory_total_gib": 80.0,
        },
        {
            "index": 1,
            "name": "Tesla K80",
            "utilization": None,
            "memory_used_gib": 0.01,
            "memory_total_gib": None,
        },
    ]


def test_meminfo_used_is_total_less_available(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        "MemTotal:       32768000 kB\nMemFree:  1000 kB\nMemAvailable:   24576000 kB\n"
    )
    assert read_memory(str(meminfo)) == {"total_gib": 31.25, "used_gib": 7.812, "percent": 25.0}


def test_one_reading_from_the_command_line_names_its_node(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the agent of a multi-node allocation runs on each other node, in a step.
    monkeypatch.setenv("PATH", path_with_fake_gpu())
    monkeypatch.setenv("SLURMD_NODENAME", "gpu7")
    done = subprocess.run(
        [sys.executable, "-m", "jupyter_remote_hw.agent", "metrics"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    reading = json.loads(done.stdout)
    assert reading["host"] == "gpu7"
    check_host(reading)
    assert reading["gpus"][0]["name"] == FAKE_GPU_NAME
    assert "nodes" not in reading
