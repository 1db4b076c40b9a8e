"""The one view of machines and kernels that the panel and ``jupyter remote-hw list``
show: state words, notebook, uptime and cost, from a real ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.machines.view import (
    KERNEL_DISPLAY_NAME,
    KernelFacts,
    MachineView,
    kernel_state,
    machine_state,
)
from jupyter_remote_hw.providers import Target

LOCAL = Target(name="local", provider="local", hardware="4 CPUs", where="this machine")
BOX = Target(name="box", provider="ssh", hardware="A10G 24GB", where="box.example")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    yield ledger
    ledger.close()


@pytest.mark.parametrize(
    ("link", "kernels", "expected"),
    [
        (True, True, "running"),
        (False, True, "reconnecting"),
        (None, True, "unknown"),
        (None, False, "idle"),
        (True, False, "running"),
    ],
)
def test_owned_hardware_states(link: bool | None, kernels: bool, expected: str) -> None:
    assert machine_state(None, link, kernels) == expected


@pytest.mark.parametrize(
    ("execution", "machine", "expected"),
    [
        ("busy", "running", "busy"),
        ("idle", "reconnecting", "reconnecting"),
        (None, "unknown", "unknown"),
        ("starting", "running", "starting"),
    ],
)
def test_kernel_states(execution: str | None, machine: str, expected: str) -> None:
    assert kernel_state(execution, machine) == expected


def test_a_servers_kernel_has_its_notebook_uptime_and_state(ledger: Ledger) -> None:
    ledger.put_kernel("k-1", "remote-hw-local", "local", {})
    started = ledger.get_kernel("k-1").created  # type: ignore[union-attr]
    view = MachineView(
        {"local": LOCAL, "box": BOX},
        ledger,
        links={"local": True},
        kernels=[
            KernelFacts(
                "k-1",
                "local",
                "remote-hw-local",
                "busy",
                "analysis/train.ipynb",
                hibernate_after={"seconds": 0.0, "source": "target"},
            )
        ],
        now=started + 125,
    )
    [machine] = view.models()
    assert machine["name"] == "local" and machine["state"] == "running"
    assert machine["uptime_seconds"] == 125 and machine["cost_so_far"] == 0.0
    [kernel] = machine["kernels"]
    assert kernel == {
        "id": "k-1",
        "owner": "server",
        "kernel_name": "remote-hw-local",
        "display_name": KERNEL_DISPLAY_NAME,
        "path": "analysis/train.ipynb",
        "execution_state": "busy",
        "state": "busy",
        "hibernate_after": {"seconds": 0.0, "source": "target"},
        "hibernated": None,
        "run_by_others": False,
        "started": started,
        "uptime_seconds": 125.0,
        "cost_so_far": 0.0,
    }


def test_a_kernel_others_can_run_code_in_is_marked_by_the_server_or_its_record(
    ledger: Ledger,
) -> None:
    ledger.put_kernel("k-1", "remote-hw-local", "local", {})
    ledger.put_kernel("k-2", "remote-hw-local", "local", {"run_by_others": True})
    ledger.put_kernel("k-3", "remote-hw-local", "local", {})

    def marks(run_by_others: set[str]) -> dict[str, bool]:
        view = MachineView({"local": LOCAL}, ledger, run_by_others=run_by_others)
        [machine] = view.models()
        return {k["id"]: k["run_by_others"] for k in machine["kernels"]}

    assert marks(set()) == {"k-1": False, "k-2": True, "k-3": False}
    assert marks({"k-3"}) == {"k-1": False, "k-2": True, "k-3": True}


def test_a_hibernated_kernel_shows_its_stored_state_and_leaves_its_machine_idle(
    ledger: Ledger,
) -> None:
    hibernated = {
        "bytes": 1234,
        "kept_on": "the disk of box",
        "saved_at": 1000.0,
        "left_out": [{"name": "f", "type": "TextIOWrapper", "reason": "an open file"}],
        "kernel_info": "{}",
        "waking": False,
        "wake_error": None,
    }
    ledger.put_kernel("k-2", "remote-hw-box", "box", {"hibernated": hibernated})
    view = MachineView(
        {"local": LOCAL, "box": BOX},
        ledger,
        kernels=[KernelFacts("k-2", "box", "remote-hw-box", "idle")],
    )
    machine = view.model("box")
    assert machine["state"] == "idle"  # no link held, and its only kernel hibernates
    [kernel] = machine["kernels"]
    assert kernel["state"] == "hibernated"
    assert kernel["hibernated"] == {
        "bytes": 1234,
        "kept_on": "the disk of box",
        "saved_at": 1000.0,
        "left_out": [{"name": "f", "reason": "an open file"}],
        "waking": False,
        "wake_error": None,
    }


def test_from_the_ledger_alone_the_same_kernel_is_unknown(ledger: Ledger) -> None:
    ledger.put_kernel("k-1", "remote-hw-box", "box", {}, owner="magic:host:1")
    [machine] = MachineView({"local": LOCAL, "box": BOX}, ledger).models()
    assert machine["name"] == "box" and machine["state"] == "unknown"
    [kernel] = machine["kernels"]
    assert kernel["state"] == "unknown" and kernel["path"] is None
    assert kernel["owner"] == "magic:host:1"
    # A server that has the notebook whose kernel is that owner names it.
    view = MachineView(
        {"local": LOCAL, "box": BOX}, ledger, owner_paths={"magic:host:1": "work.ipynb"}
    )
    assert view.model("box")["kernels"][0]["path"] == "work.ipynb"


def test_a_cloud_machine_prices_its_kernels(ledger: Ledger) -> None:
    ledger.add_machine(
        "m-1",
        "aws-g5",
        "aws",
        owner="me",
        instance_type="g5.xlarge",
        region="us-east-1",
        price_per_hour=3.6,
    )
    ledger.set_machine_state("m-1", "running", at=1000.0)
    ledger.put_kernel("k-9", "remote-hw-aws-g5", "aws-g5", {})
    created = ledger.get_kernel("k-9").created  # type: ignore[union-attr]
    view = MachineView({}, ledger, links={"aws-g5": False}, now=created + 100)
    [machine] = view.models()
    assert machine["state"] == "reconnecting"
    assert machine["actions"] == ["stop", "terminate"]
    [kernel] = machine["kernels"]
    assert kernel["state"] == "reconnecting"
    assert kernel["cost_so_far"] == pytest.approx(0.1)
    ledger.set_machine_state("m-1", "terminated")
    assert MachineView({}, ledger).models() == []
    [ended] = MachineView({}, ledger).models(include_ended=True)
    assert ended["state"] == "terminated" and ended["actions"] == []
