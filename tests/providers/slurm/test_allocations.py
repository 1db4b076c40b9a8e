"""Which allocation a kernel runs in (no cluster needed: naming and picking only)."""

from __future__ import annotations

import pytest

from jupyter_remote_hw.providers.slurm.allocations import machine_name, place, share_name, split

TARGETS = {"slurm-dev-gpu-a100", "slurm-dev-v1.2-t4", "slurm-dev-v1"}


def is_target(name: str) -> bool:
    return name in TARGETS


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("slurm-dev-gpu-a100", ("slurm-dev-gpu-a100", None)),
        ("slurm-dev-gpu-a100.1", ("slurm-dev-gpu-a100", 1)),
        ("slurm-dev-gpu-a100.12", ("slurm-dev-gpu-a100", 12)),
        # A target whose own name ends in a number is never split.
        ("slurm-dev-v1.2-t4", ("slurm-dev-v1.2-t4", None)),
        ("slurm-dev-v1.2", ("slurm-dev-v1", 2)),
        # Not an allocation of a target: left whole.
        ("slurm-dev-gpu-h100.2", ("slurm-dev-gpu-h100.2", None)),
        ("slurm-dev-gpu-a100.0", ("slurm-dev-gpu-a100.0", None)),
        ("slurm-dev-gpu-a100.x", ("slurm-dev-gpu-a100.x", None)),
    ],
)
def test_a_name_splits_into_its_target_and_allocation(
    name: str, parts: tuple[str, int | None]
) -> None:
    assert split(name, is_target) == parts


def test_the_first_allocation_has_the_targets_name_and_shares_by_number_one() -> None:
    assert machine_name("t", 1) == "t" and machine_name("t", 3) == "t.3"
    assert share_name("t", "t") == "t.1" and share_name("t.3", "t") == "t.3"


def test_each_kernel_gets_the_first_free_allocation() -> None:
    base = "slurm-dev-gpu-a100"
    assert place(base, set(), is_target) == base
    assert place(base, {base}, is_target) == base + ".2"
    assert place(base, {base, base + ".2"}, is_target) == base + ".3"
    # A gap is filled first.
    assert place(base, {base + ".2"}, is_target) == base
    assert place(base, {base, base + ".3"}, is_target) == base + ".2"


def test_asking_for_an_allocation_runs_in_it_taken_or_not() -> None:
    base = "slurm-dev-gpu-a100"
    assert place(base + ".1", {base}, is_target) == base
    assert place(base + ".2", {base, base + ".2"}, is_target) == base + ".2"


def test_a_restart_keeps_its_allocation_and_a_switch_gets_a_new_one() -> None:
    base = "slurm-dev-gpu-a100"
    assert place(base, {base}, is_target, current=base + ".4") == base + ".4"
    other = "slurm-dev-v1"
    assert place(other, {base}, is_target, current=base + ".4") == other


def test_a_cluster_that_shares_puts_every_kernel_in_one_allocation() -> None:
    base = "slurm-dev-gpu-a100"
    assert place(base, {base, base + ".2"}, is_target, share=True) == base
