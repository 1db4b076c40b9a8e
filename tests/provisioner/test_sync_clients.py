"""A kernelspec of an SSH target from the usual clients outside a Jupyter server.

``jupyter run`` and papermill run as the user runs them (subprocesses finding
the kernelspec in ``JUPYTER_PATH`` and the host in ``jupyter_server_config.json``);
nbclient's synchronous ``execute()`` and a plain ``KernelManager`` run here.
None of them runs an event loop while it waits on the kernel.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from jupyter_remote_hw.machines.manager import MachineManager

from ..testhosts import SSHTestHost
from .clients import SSH_KERNEL, ClientEnv, client_env

CELLS = [
    "import os, sys\nprint('kernel pid', os.getpid())",
    "sum(range(7))",
    "print('last cell', flush=True)",
]

#: Seconds ``jupyter run`` may take to exit after its last cell printed.
EXIT_LIMIT = 2.0


@pytest.fixture
def setup(ssh_host: SSHTestHost) -> Iterator[ClientEnv]:
    """Kernelspecs and config for the SSH test host, in this process and for subprocesses."""
    with client_env(ssh_host) as env:
        yield env


def notebook(path: Path | None = None) -> Any:
    """A notebook of :data:`CELLS`, written to ``path`` when given."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {
        "name": SSH_KERNEL,
        "display_name": SSH_KERNEL,
        "language": "python",
    }
    if path is not None:
        nbformat.write(nb, path)
    return nb


def check_outputs(nb: Any) -> None:
    """The cells of :func:`notebook` ran, on the SSH host's kernel, in order."""
    first, second, third = nb.cells
    assert first.outputs[0]["text"].startswith("kernel pid ")
    assert second.outputs[0]["output_type"] == "execute_result"
    assert second.outputs[0]["data"]["text/plain"] == "21"
    assert third.outputs[0]["text"] == "last cell\n"


def reply_to(kc: BlockingKernelClient, msg_id: str, timeout: float = 30) -> dict[str, Any]:
    """The shell reply to ``msg_id`` (other replies are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        reply: dict[str, Any] = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


def wait_busy(
    kc: BlockingKernelClient, msg_id: str, timeout: float = 30, printed: str | None = None
) -> None:
    """Wait for the kernel to go busy on ``msg_id`` (and, if given, to print ``printed``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if (
            printed is None
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "busy"
        ):
            return
        if (
            printed is not None
            and msg["msg_type"] == "stream"
            and printed in msg["content"]["text"]
        ):
            return
    raise AssertionError(
        "the kernel never went busy" if printed is None else f"the cell never printed {printed!r}"
    )


def test_jupyter_run_exits_soon_after_its_last_cell_and_leaves_no_kernel(
    setup: ClientEnv, tmp_path: Path
) -> None:
    script = tmp_path / "cells.py"
    script.write_text("\n".join(CELLS) + "\n")
    with subprocess.Popen(
        [sys.executable, "-m", "jupyter_client.runapp", "--kernel", SSH_KERNEL, str(script)],
        env=setup.env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        lines, last_cell = [], None
        try:
            for line in process.stdout:
                lines.append(line)
                if line == "last cell\n":
                    last_cell = time.monotonic()
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        exited = time.monotonic()
        stderr = process.stderr.read()
    assert process.returncode == 0, stderr
    assert last_cell is not None, (lines, stderr)
    assert any(line.startswith("kernel pid ") for line in lines)
    assert exited - last_cell < EXIT_LIMIT, f"exited {exited - last_cell:.2f} s after its last cell"
    assert "Traceback" not in stderr, stderr
    # The stopping kernel's clients reconnecting to its forwards are expected, not warned of.
    assert "dropped a client" not in stderr, stderr
    assert setup.kernels() == []
    # With no kernel left, the host's agent was told to go.
    assert setup.wait_for_no_processes(5.0) == []


def test_papermill_runs_a_notebook_on_the_ssh_host(setup: ClientEnv, tmp_path: Path) -> None:
    source, result = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    notebook(source)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(source),
            str(result),
            "-k",
            SSH_KERNEL,
            "--no-progress-bar",
        ],
        env=setup.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    check_outputs(nbformat.read(result, as_version=4))
    assert setup.kernels() == []


def test_nbclient_runs_a_notebook_on_the_ssh_host(setup: ClientEnv, tmp_path: Path) -> None:
    nb = notebook()
    NotebookClient(
        nb, timeout=60, startup_timeout=90, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    check_outputs(nb)
    assert setup.kernels() == []


def test_kernel_manager_starts_executes_interrupts_restarts_and_shuts_down(
    setup: ClientEnv,
) -> None:
    km = KernelManager(kernel_name=SSH_KERNEL)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        ports = (km.shell_port, km.iopub_port, km.control_port)
        assert MachineManager.instance().cached("ssh-testhost") is not None
        assert len(setup.kernels()) == 1
        assert km.is_alive()

        # Idle for longer than the SSH keep-alive allows (1 s, 2 missed) while
        # this thread runs no loop: the link stays up, the kernel answers.
        assert reply_to(kc, kc.execute("x = 41"))["content"]["status"] == "ok"
        time.sleep(4)
        reply = kc.execute_interactive("x + 1", timeout=30, store_history=False)
        assert reply["content"]["status"] == "ok"

        msg_id = kc.execute("import time; print('sleeping', flush=True); time.sleep(60)")
        wait_busy(kc, msg_id, printed="sleeping")  # the cell's own code runs
        started = time.monotonic()
        km.interrupt_kernel()
        reply = reply_to(kc, msg_id)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - started < 10

        km.restart_kernel()
        kc.wait_for_ready(timeout=60)
        assert (km.shell_port, km.iopub_port, km.control_port) == ports
        reply = reply_to(kc, kc.execute("x"))
        assert reply["content"]["ename"] == "NameError"  # a fresh kernel
        assert len(setup.kernels()) == 1
    finally:
        kc.stop_channels()
        km.shutdown_kernel()
    assert not km.is_alive()
    assert setup.kernels() == []


def test_kernel_info_in_the_ledger_is_gone_after_shutdown(setup: ClientEnv) -> None:
    km = KernelManager(kernel_name=SSH_KERNEL)
    km.start_kernel()
    try:
        ledger = MachineManager.instance().ledger
        record = ledger.get_kernel(km.kernel_id)
        assert record is not None and record.target == "ssh-testhost"
        assert json.dumps(record.info)  # written from the machines' thread, read here
    finally:
        km.shutdown_kernel(now=True)
    assert ledger.get_kernel(km.kernel_id) is None
