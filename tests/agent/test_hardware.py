"""The hardware report: this test machine has no GPU and says so plainly; the accelerators
that are not GPUs come from neuron-ls and hl-smi (stand-ins here) where those exist."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.agent.hardware import (
    gaudi_name,
    gpu_size_label,
    parse_gpu_csv,
    parse_hl_smi_csv,
    parse_neuron_ls,
    summarize,
)

from ..fakegpu import path_with_fake_accelerators
from .agentclient import Agent, AgentClient


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
    if not (shutil.which("neuron-ls") or shutil.which("hl-smi")):
        assert report["accelerators"] == []
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


def neuron_device(index: int, **extra: Any) -> dict[str, Any]:
    """One device as ``neuron-ls --json-output`` lists it."""
    return {
        "neuron_device": index,
        "bdf": f"00:1{index}.0",
        "connected_to": None,
        "nc_count": 2,
        "memory_size": 34359738368,
        "neuroncore_ids": [2 * index, 2 * index + 1],
        "neuron_processes": [],
        **extra,
    }


def test_neuron_ls_json_in_both_forms() -> None:
    # Up to Neuron 2.33: an array of devices, each naming the instance (since 2.20).
    legacy = json.dumps([neuron_device(i, instance_type="inf2.24xlarge") for i in range(6)])
    devices = parse_neuron_ls(legacy)
    assert len(devices) == 6
    assert devices[5] == {
        "index": 5,
        "kind": "neuron",
        "name": "Inferentia2",
        "memory_mib": 32768,
        "cores": 2,
    }
    # Before 2.20 no instance is named: the device is a Neuron device.
    assert parse_neuron_ls(json.dumps([neuron_device(0)]))[0]["name"] == "Neuron device"
    # From 2.34: an object holding the devices beside the instance's details.
    newer = json.dumps(
        {
            "instance_info": {"instance_type": "trn2.48xlarge"},
            "neuron_devices": [
                neuron_device(i, memory_size=96 * 1024**3, nc_count=8) for i in range(16)
            ],
        }
    )
    trn2 = parse_neuron_ls(newer)
    assert {(d["name"], d["memory_mib"], d["cores"]) for d in trn2} == {("Trainium2", 98304, 8)}
    assert parse_neuron_ls("[]") == []
    with pytest.raises(ValueError, match="no list of neuron_device"):
        parse_neuron_ls('{"instance_info": {}}')
    with pytest.raises(ValueError):
        parse_neuron_ls("neuron-ls: no devices")


def test_hl_smi_csv_and_the_summary_with_accelerators() -> None:
    gaudis = parse_hl_smi_csv(
        "".join(f"{i}, HL-205, 32768, 1.15.1-62f612b\n" for i in range(8)) + "\n"
    )
    assert len(gaudis) == 8
    assert gaudis[0] == {
        "index": 0,
        "kind": "gaudi",
        "name": "Gaudi HL-205",
        "memory_mib": 32768,
        "driver": "1.15.1-62f612b",
    }
    assert parse_hl_smi_csv("0, HL-225, 98304 MiB, 1.17.0\n")[0]["memory_mib"] == 98304
    assert (gaudi_name("HL-225"), gaudi_name("HL-325L")) == ("Gaudi2 HL-225", "Gaudi 3 HL-325L")
    assert summarize([], None, 96, 786432, gaudis) == (
        "8 × Gaudi HL-205 32 GiB · 96 CPUs · 768.0 GiB RAM"
    )
    trainium = parse_neuron_ls(
        json.dumps([neuron_device(i, instance_type="trn1.32xlarge") for i in range(16)])
    )
    assert summarize([], None, 128, None, trainium) == "16 × Trainium 32 GiB · 128 CPUs"


async def hardware_of(start_agent: Callable[..., Agent]) -> dict[str, Any]:
    client = await start_agent().client()
    try:
        return await client.call("hardware")
    finally:
        await client.close()


async def test_accelerators_come_from_neuron_ls_and_hl_smi_on_the_path(
    start_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with_fake_accelerators())
    monkeypatch.setenv("FAKE_HL_SMI_DEVICES", "2")
    report = await hardware_of(start_agent)
    assert report["warnings"] == []
    accelerators = report["accelerators"]
    neuron = [a for a in accelerators if a["kind"] == "neuron"]
    gaudi = [a for a in accelerators if a["kind"] == "gaudi"]
    assert [a["index"] for a in neuron] == list(range(16))
    assert {(a["name"], a["memory_mib"], a["cores"]) for a in neuron} == {("Trainium", 32768, 2)}
    assert [(a["index"], a["name"], a["memory_mib"]) for a in gaudi] == [
        (0, "Gaudi HL-205", 32768),
        (1, "Gaudi HL-205", 32768),
    ]
    assert report["gpus"] == [] or shutil.which("nvidia-smi")
    assert "16 × Trainium 32 GiB + 2 × Gaudi HL-205 32 GiB · " in report["summary"]


async def test_neuron_ls_of_neuron_2_34_and_a_failing_hl_smi(
    start_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with_fake_accelerators())
    monkeypatch.setenv("FAKE_NEURON_LS_NEW_FORMAT", "1")
    monkeypatch.setenv("FAKE_NEURON_LS_INSTANCE_TYPE", "inf2.xlarge")
    monkeypatch.setenv("FAKE_NEURON_LS_DEVICES", "1")
    monkeypatch.setenv("FAKE_HL_SMI_FAIL", "1")
    report = await hardware_of(start_agent)
    assert [(a["kind"], a["name"]) for a in report["accelerators"]] == [("neuron", "Inferentia2")]
    assert report["summary"].startswith("1 × Inferentia2 32 GiB · ")
    assert report["warnings"] == [
        "hl-smi failed: hl-smi: no Habana devices found (is the habanalabs driver loaded?)"
    ]


async def test_a_failing_neuron_ls_is_a_warning_not_a_device(
    start_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", path_with_fake_accelerators())
    monkeypatch.setenv("FAKE_NEURON_LS_FAIL", "1")
    monkeypatch.setenv("FAKE_HL_SMI_DEVICES", "0")
    report = await hardware_of(start_agent)
    assert report["accelerators"] == []
    assert report["warnings"] == [
        "neuron-ls failed: neuron-ls: failed to open the Neuron driver: No such file or directory"
    ]
    assert report["summary"].startswith("no GPU · ") or shutil.which("nvidia-smi")
