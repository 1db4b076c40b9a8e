"""``jupyter remote-hw list``'s table rows, from machines as the server lists them."""

from __future__ import annotations

from typing import Any

from jupyter_remote_hw.cli.machines import render_rows


def _machine(**kernel: Any) -> dict[str, Any]:
    return {
        "name": "ssh-gpubox",
        "provider": "ssh",
        "hardware": "A10G 24GB",
        "state": "running",
        "price_per_hour": 0.0,
        "cost_so_far": 0.0,
        "uptime_seconds": 60.0,
        "kernels": [{"id": "k1", "owner": "server", "path": "a.ipynb", "state": "idle", **kernel}],
    }


def test_a_kernel_that_others_can_run_code_in_says_so() -> None:
    def state(model: dict[str, Any]) -> str:
        return render_rows([model], lambda d: f"${d or 0:.2f}", lambda s: f"{s:.0f} s")[1][3]

    assert state(_machine()) == "idle"
    assert state(_machine(run_by_others=False)) == "idle"
    assert state(_machine(run_by_others=True)) == "idle · others can run code"
