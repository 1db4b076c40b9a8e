"""Machines in the ledger: lifecycle events, accrued cost, migration, several writers at once."""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import sqlite3
from pathlib import Path

import pytest

from jupyter_remote_hw.ledger import Ledger, MachineExistsError
from jupyter_remote_hw.ledger.budget import BudgetExceededError, BudgetGuard


@pytest.fixture
def ledger(tmp_path: Path):
    opened = Ledger(tmp_path / "ledger.sqlite3")
    yield opened
    opened.close()


def test_cost_is_price_times_running_time(ledger: Ledger) -> None:
    m = ledger.add_machine(
        "m1",
        "aws-g5",
        "aws",
        owner="me@here",
        instance_type="g5.xlarge",
        region="us-east-1",
        price_per_hour=3.6,
    )
    assert m.state == "requested" and m.cost() == 0.0
    ledger.set_machine_state("m1", "running", at=1000.0)
    ledger.set_machine_state("m1", "stopped", "idle", at=1010.0)  # 10 s at $3.6/h
    ledger.set_machine_state("m1", "running", at=2000.0)
    running = ledger.get_machine("m1")
    assert running is not None
    assert running.cost(now=2005.0) == pytest.approx(0.015)  # + 5 s
    assert running.running_seconds(now=2005.0) == pytest.approx(15.0)
    done = ledger.set_machine_state("m1", "terminated", "by user", at=2020.0)
    assert done.cost(now=99999.0) == pytest.approx(0.03)  # 30 s in all, then frozen
    events = [(e.event, e.detail) for e in ledger.machine_events("m1")]
    assert events == [
        ("requested", ""),
        ("running", ""),
        ("stopped", "idle"),
        ("running", ""),
        ("terminated", "by user"),
    ]


def test_same_state_records_nothing_and_unknown_machine_is_named(ledger: Ledger) -> None:
    ledger.add_machine("m1", "aws-g5", "aws", owner="me", state="running", price_per_hour=1.0)
    ledger.set_machine_state("m1", "running")
    assert [e.event for e in ledger.machine_events("m1")] == ["running"]
    with pytest.raises(KeyError, match="no machine m9"):
        ledger.set_machine_state("m9", "running")
    with pytest.raises(ValueError, match="cannot change"):
        ledger.update_machine("m1", state="stopped")


def test_find_update_and_active_rate(ledger: Ledger) -> None:
    ledger.add_machine("m1", "aws-a", "aws", owner="me", price_per_hour=1.0, state="running")
    ledger.add_machine("m2", "aws-b", "aws", owner="me", price_per_hour=2.5, state="pending")
    ledger.add_machine("m3", "aws-c", "aws", owner="me", price_per_hour=9.0, state="stopped")
    ledger.update_machine("m2", resource_id="i-123", info={"address": "1.2.3.4"})
    ledger.update_machine("m2", info={"alias": "x"})
    found = ledger.find_machine("i-123")
    assert found is not None and found.machine_id == "m2"
    assert found.info == {"address": "1.2.3.4", "alias": "x"}
    assert ledger.find_machine("aws-c").machine_id == "m3"  # type: ignore[union-attr]
    assert ledger.active_rate() == pytest.approx(3.5)
    assert ledger.active_rate(exclude="m1") == pytest.approx(2.5)
    assert [m.machine_id for m in ledger.machines(states={"stopped"})] == ["m3"]


def test_old_ledger_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE kernels (kernel_id TEXT PRIMARY KEY, kernel_name TEXT NOT NULL, "
        "target TEXT NOT NULL, info TEXT NOT NULL, created REAL NOT NULL, "
        "updated REAL NOT NULL)"
    )
    db.execute("INSERT INTO kernels VALUES ('k1', 'remote-hw-local', 'local', '{}', 1, 1)")
    db.commit()
    db.close()
    ledger = Ledger(path)
    try:
        assert [k.kernel_id for k in ledger.kernels()] == ["k1"]
        ledger.add_machine("m1", "aws-a", "aws", owner="me")
        assert ledger.get_machine("m1") is not None
    finally:
        ledger.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2
    again = Ledger(path)  # opening a migrated ledger changes nothing
    assert again.get_machine("m1") is not None and again.get_kernel("k1") is not None
    again.close()


def _flip(path: str, worker: int, rounds: int) -> None:
    ledger = Ledger(Path(path))
    for i in range(rounds):
        ledger.set_machine_state("m1", "running" if i % 2 == 0 else "stopped", f"w{worker}")
        ledger.put_kernel(f"k{worker}-{i}", "spec", "aws-a", {"i": i})
    ledger.close()


def test_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    ledger = Ledger(path)
    ledger.add_machine("m1", "aws-a", "aws", owner="me", price_per_hour=1.0)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_flip, args=(str(path), n, 40)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert len(ledger.kernels()) == 120
    events = ledger.machine_events("m1")
    # Every recorded event is a real change: no two in a row name the same state.
    assert all(a.event != b.event for a, b in itertools.pairwise(events))
    record = ledger.get_machine("m1")
    assert record is not None and record.accrued_seconds >= 0
    ledger.close()


def _launch(
    path: str,
    worker: int,
    budget: float,
    start: multiprocessing.synchronize.Event,
    results: multiprocessing.queues.Queue,
) -> None:  # type: ignore[type-arg]
    """One process's launch: the name "aws-same" when there is no budget, else its own
    name at $1/h under a total of ``budget``."""
    ledger = Ledger(Path(path))
    guard = BudgetGuard(max_total=budget)
    name = f"aws-{worker}" if budget else "aws-same"
    start.wait(30)
    try:
        ledger.add_machine(
            f"m{worker}",
            name,
            "aws",
            owner=f"w{worker}",
            price_per_hour=1.0,
            admit=lambda running: guard.check("g5", 1.0, ledger, running=running),
        )
        results.put(("added", ""))
    except (MachineExistsError, BudgetExceededError) as exc:
        results.put(("refused", str(exc)))
    ledger.close()


def launch_at_once(path: Path, processes: int, budget: float = 0.0) -> list[tuple[str, str]]:
    """Launch from ``processes`` processes released together; what each got, sorted."""
    Ledger(path).close()
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    workers = [
        context.Process(target=_launch, args=(str(path), n, budget, start, results))
        for n in range(processes)
    ]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = sorted(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(60)
    return outcomes


def test_one_machine_of_a_name_even_when_processes_launch_it_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    outcomes = launch_at_once(path, 4)
    assert [kind for kind, _ in outcomes] == ["added", "refused", "refused", "refused"]
    assert all(
        "a machine named aws-same already exists" in why
        for kind, why in outcomes
        if kind == "refused"
    )
    ledger = Ledger(path)
    (winner,) = [m.machine_id for m in ledger.machines()]
    # Once it has ended, the name is free again.
    ledger.set_machine_state(winner, "terminated")
    assert ledger.add_machine("m-next", "aws-same", "aws", owner="me").state == "requested"
    ledger.close()


def test_the_total_budget_holds_when_processes_launch_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    outcomes = launch_at_once(path, 4, budget=2.5)
    # $1/h each under a $2.5/h total: two are admitted, whatever the timing.
    assert [kind for kind, _ in outcomes] == ["added", "added", "refused", "refused"]
    assert all(
        "plus the $2/h of the machines already running" in why
        for kind, why in outcomes
        if kind == "refused"
    )
    ledger = Ledger(path)
    assert ledger.active_rate() == 2.0 and len(ledger.machines()) == 2
    ledger.close()


def test_budget_refuses_with_figures(ledger: Ledger) -> None:
    guard = BudgetGuard(max_per_machine=5.0, max_total=8.0)
    guard.check("g5.xlarge in us-east-1", 1.006, ledger)
    with pytest.raises(BudgetExceededError, match=r"\$32.77/h, above the limit of \$5/h per"):
        guard.check("p4d.24xlarge in us-east-1", 32.7726, ledger)
    ledger.add_machine("m1", "aws-a", "aws", owner="me", price_per_hour=4.0, state="running")
    ledger.add_machine("m2", "aws-b", "aws", owner="me", price_per_hour=3.0, state="pending")
    ledger.add_machine("m3", "aws-c", "aws", owner="me", price_per_hour=4.0, state="stopped")
    with pytest.raises(BudgetExceededError) as caught:
        guard.check("g5.12xlarge", 1.5, ledger)
    assert "$7/h of the machines already running makes $8.5/h" in str(caught.value)
    assert caught.value.running == pytest.approx(7.0) and caught.value.limit == 8.0
    guard.check("g5.xlarge", 1.0, ledger)  # exactly at the limit is allowed
    guard.check("again", 4.0, ledger, exclude="m1")
    with pytest.raises(BudgetExceededError, match="no known price"):
        guard.check("p5e.48xlarge", None, ledger)
    BudgetGuard().check("p5e.48xlarge", None, ledger)  # no limits: nothing to check
