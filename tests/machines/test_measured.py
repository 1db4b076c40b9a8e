"""The listing's columns from what a host's agent measured."""

from __future__ import annotations

from jupyter_remote_hw.machines.measured import facts_of


def test_a_reading_fills_cpus_memory_and_gpu_memory() -> None:
    reading = {
        "cpu": {"percent": 3.0, "count": 16},
        "memory": {"total_gib": 62.734, "used_gib": 3.1, "percent": 5.0},
        "gpus": [{"index": 0, "memory_total_gib": 79.65}, {"index": 1, "memory_total_gib": 79.65}],
    }
    assert facts_of(reading) == {"vcpus": 16, "memory_gib": 62.7, "gpu_memory_gib": 79.7}


def test_what_a_reading_lacks_or_gets_wrong_stays_blank() -> None:
    assert facts_of({"cpu": {"count": None}, "memory": None, "gpus": []}) == {}
    assert facts_of({"cpu": {"count": 0}, "memory": {"total_gib": "lots"}}) == {}
    assert facts_of({"gpus": ["not a gpu"]}) == {}
