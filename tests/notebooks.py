"""Run real notebooks through nbclient in a local kernel configured for the test hosts."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .agent.kernelclient import shell_reply

REPO = str(Path(__file__).resolve().parents[1])


def kernel_env(config: dict[str, Any], directory: Path) -> dict[str, str]:
    """Environment of a local kernel whose Jupyter config is ``config`` (written here)."""
    config_dir = directory / "jupyter-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / "jupyter_server_config.json").write_text(json.dumps(config))
    return {**os.environ, "JUPYTER_CONFIG_DIR": str(config_dir), "PYTHONPATH": REPO}


@contextlib.contextmanager
def local_kernel(env: dict[str, str], cwd: Path, setup: str) -> Iterator[tuple[KernelManager, Any]]:
    """A local ``python3`` kernel that has run ``setup``, and its client. Afterwards its
    channels stop and the kernel is shut down, unless the test ended it already."""
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=env, cwd=str(cwd))
    kc = manager.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        assert shell_reply(kc, kc.execute(setup), 60)["content"]["status"] == "ok"
        yield manager, kc
    finally:
        kc.stop_channels()
        if manager.has_kernel:
            manager.shutdown_kernel(now=False)


class TimedClient(NotebookClient):
    """nbclient, noting when each output message arrived (monotonic seconds, by cell)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: dict[int, list[tuple[float, dict[str, Any]]]] = {}

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        self.arrivals.setdefault(cell_index, []).append((time.monotonic(), msg))
        return super().process_message(msg, cell, cell_index)


def run_notebook(
    cells: list[str], env: dict[str, str], cwd: Path, allow_errors: bool = False, timeout: int = 120
) -> tuple[Any, TimedClient]:
    """Execute a notebook of ``cells`` in a fresh local ``python3`` kernel; shut it down."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = TimedClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=env)
    return nb, client


def text_of(cell: Any) -> str:
    """Every stream and text/plain output of a cell, joined."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(output.data.get("text/plain", ""))
    return "".join(parts)


def error_of(cell: Any) -> Any:
    """The cell's error output (one must be there)."""
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    return error
