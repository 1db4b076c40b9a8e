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
