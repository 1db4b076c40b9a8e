"""``%%ranks`` where it cannot run: a kernel outside an allocation, a wrong line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_remote_hw.transfer.kernel_side.ranks.magic import RanksUsageError, register


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    made = InteractiveShell()
    register(made)
    yield made
    made.cleanup()


def test_outside_an_allocation_the_cell_says_what_to_pick(shell: InteractiveShell) -> None:
    ran = shell.run_cell("%%ranks\nprint(1)")
    error = ran.error_in_exec
    assert isinstance(error, RanksUsageError)
    assert "does not run in a SLURM allocation" in str(error)
    assert "slurm-<cluster>-<partition>-<gpu>-2x1" in str(error)


def test_a_wrong_line_is_named_before_anything_starts(shell: InteractiveShell) -> None:
    ran = shell.run_cell("%%ranks --nodes 2\nprint(1)")
    assert isinstance(ran.error_in_exec, RanksUsageError)
    assert "%%ranks: unrecognized arguments: --nodes 2" in str(ran.error_in_exec)
    ran = shell.run_cell("%ranks reboot")
    assert "use %ranks, %ranks restart or %ranks stop" in str(ran.error_in_exec)
    ran = shell.run_cell("%ranks")
    assert ran.success


def test_ranks_saved_by_a_hibernation_are_named_where_no_allocation_can_take_them(
    shell: InteractiveShell,
) -> None:
    # As after a wake on other hardware than an allocation (this machine, an SSH host).
    shell.user_ns["_ranks_hibernated"] = {"size": 2, "nodes": ["gpu1", "gpu2"], "ranks": {}}
    ran = shell.run_cell("%%ranks\nprint(1)")
    assert isinstance(ran.error_in_exec, RanksUsageError)
    said = str(ran.error_in_exec)
    assert "does not run in a SLURM allocation" in said
    assert "the variables of 2 ranks saved when the kernel hibernated wait in" in said
    assert "_ranks_hibernated" in shell.user_ns
