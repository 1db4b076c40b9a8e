"""%%remote, %remote_push, %remote_pull and %remote_hw in real notebooks (nbclient), on the
loopback sshd test host: values come back equal, outputs stream, errors are clear and
nothing is half-assigned, interrupts reach the remote cell."""

from __future__ import annotations

import queue
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ..agent.kernelclient import shell_reply, wait_for_stream
from ..conftest import TEST_TRANSPORT
from ..notebooks import error_of, kernel_env, local_kernel, run_notebook, text_of
from ..processes import processes_under
from ..testhosts import SSHTestHost
from ..transfer.kernel_side.test_pickling import NOTEBOOK_CODE

TARGET = "ssh-testhost"
HARDWARE = "Test GPU 24GB"
#: How the listing and the launch steps name it: memory in GiB.
SHOWN = "Test GPU 24 GiB"


@pytest.fixture
def env(ssh_host: SSHTestHost, short_tmp: Path) -> dict[str, str]:
    """A local kernel's environment: its Jupyter config offers the test host and ``local``."""
    config = {
        "TransportManager": {"ssh_config_files": [str(ssh_host.ssh_config)], **TEST_TRANSPORT},
        "SSHProvider": {
            "hosts": [
                {
                    "host": ssh_host.alias,
                    "python": sys.executable,
                    "hardware": HARDWARE,
                    "root": str(short_tmp / "r"),
                }
            ]
        },
        "LocalProvider": {"state_dir": str(short_tmp / "l")},
        "MachineManager": {"ledger_path": str(short_tmp / "ledger.sqlite3")},
        "RemoteHWProvisioner": {"launch_timeout": 90.0},
    }
    return kernel_env(config, short_tmp)


VALUES = (
    NOTEBOOK_CODE
    + """
%load_ext jupyter_remote_hw
import os, numpy as np, pandas as pd
base = np.arange(60, dtype=np.float64).reshape(6, 10)
f32, i8, strided, scalar = np.linspace(0, 1, 2_000_000, dtype=np.float32), \\
    np.array([-3, 0, 7], dtype=np.int8), base[::2, 1::3], np.array(2.5)
frame = pd.DataFrame({"x": np.arange(3), "name": ["a", "b", "c"],
                       "when": pd.date_range("2026-01-01", periods=3)},
                     index=pd.Index(["p", "q", "r"], name="key"))
nested = {"list": [1, "two", (3.0, None)], "inner": {"set": {1, 2}}}
NAMES = "f32,i8,strided,scalar,frame,nested,scale,Point"
"""
)


def test_push_and_pull_through_an_ssh_host_give_equal_values(
    env: dict[str, str], short_tmp: Path
) -> None:
    cells = [
        VALUES,
        f"%remote_push {{NAMES}} --to {TARGET}",
        (
            f"%%remote {TARGET}\n"
            "import os\nprint(os.getpid(), type(frame).__name__, scale(2), Point(3, 4).norm2())"
        ),
        (
            f"%remote_pull {{NAMES}} --from {TARGET} --as "
            "{','.join(n + '_back' for n in NAMES.split(','))}"
        ),
        (
            "for name in NAMES.split(','):\n"
            "    a, b = globals()[name], globals()[name + '_back']\n"
            "    if isinstance(a, np.ndarray):\n"
            "        assert a.dtype == b.dtype and a.shape == b.shape and (a == b).all(), name\n"
            "    elif isinstance(a, pd.DataFrame):\n"
            "        pd.testing.assert_frame_equal(a, b)\n"
            "    elif name not in ('scale', 'Point'):\n"
            "        assert a == b, name\n"
            "assert scale_back(5) == 15 and Point_back(3, 4).norm2() == 25\n"
            "print('equal', os.getpid())"
        ),
    ]
    nb, _ = run_notebook(cells, env, short_tmp)
    assert f"sent to {TARGET}: f32 (numpy.ndarray)" in text_of(nb.cells[1])
    remote_pid, kind, scaled, norm = text_of(nb.cells[2]).split()[-4:]
    assert (kind, scaled, norm) == ("DataFrame", "6", "25")
    assert "equal" in text_of(nb.cells[4])
    local_pid = text_of(nb.cells[4]).split()[-1]
    assert remote_pid != local_pid
    # The first use showed its launch steps while it started, in the cell that started
    # the kernel; once the kernel was ready they became one line, all the notebook keeps.
    launched = text_of(nb.cells[1])
    # Named as the picker names the machine: its hardware and place.
    assert f"Kernel on {SHOWN} · testhost ready in " in launched
    assert "connect channels" in launched and "prepare host" in launched
    assert "Starting a kernel" not in launched and "checking" not in launched
    assert [line for line in launched.splitlines() if "ready in" in line] == [
        line for line in launched.splitlines() if "connect channels" in line
    ]
    # The local kernel has exited: its remote kernel was stopped with it.
    assert not [p for p in processes_under(str(short_tmp / "r")) if "ipykernel" in p]


def test_torch_tensors_and_modules_round_trip(env: dict[str, str], short_tmp: Path) -> None:
    pytest.importorskip("torch")
    cells = [
        (
            "%load_ext jupyter_remote_hw\nimport torch\n"
            "t = torch.arange(12.).reshape(3, 4)[:, ::2]\n"
            "h = torch.ones(5, dtype=torch.bfloat16)\n"
            "g = torch.ones(2, requires_grad=True)\n"
            "torch.manual_seed(0)\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 3), "
            "torch.nn.ReLU())"
        ),
        (
            f"%%remote {TARGET} --in t,h,g,model --out y\n"
            "import torch\ny = model(torch.ones(1, 4))\nprint(t.device, h.dtype, g.requires_grad)"
        ),
        f"%remote_pull t,h,g,model --from {TARGET} --as t2,h2,g2,model2",
        (
            "assert torch.equal(t, t2) and torch.equal(h, h2) and h2.dtype == torch.bfloat16\n"
            "assert g2.requires_grad and torch.equal(g, g2)\n"
            "assert torch.equal(model2(torch.ones(1, 4)), model(torch.ones(1, 4)))\n"
            "assert torch.allclose(y, model(torch.ones(1, 4)))\nprint('torch equal')"
        ),
    ]
    nb, _ = run_notebook(cells, env, short_tmp)
    assert "cpu torch.bfloat16 True" in text_of(nb.cells[1])
    assert "torch equal" in text_of(nb.cells[3])


def test_outputs_stream_as_they_happen(env: dict[str, str], short_tmp: Path) -> None:
    cells = [
        "%load_ext jupyter_remote_hw\na = 20",
        (
            f"%%remote {TARGET} --in a --out b\nimport time\n"
            "for i in range(4):\n    print('tick', i, flush=True)\n    time.sleep(1)\nb = a * 2"
        ),
        "print(b)",
    ]
    nb, client = run_notebook(cells, env, short_tmp)
    arrivals = client.arrivals[1]
    ticks = [
        t
        for t, msg in arrivals
        if msg["msg_type"] == "stream" and "tick 0" in msg["content"]["text"]
    ]
    last = arrivals[-1][0]
    assert ticks, arrivals
    # The first line came while the remote cell still had three seconds to go.
    assert last - ticks[0] > 2.0
    assert text_of(nb.cells[2]).strip() == "40"


def test_rich_outputs_and_remote_errors(env: dict[str, str], short_tmp: Path) -> None:
    cells = [
        "%load_ext jupyter_remote_hw",
        (
            f"%%remote {TARGET}\nfrom IPython.display import HTML, display\n"
            "display(HTML('<b>bold</b>'))\nimport pandas as pd\npd.DataFrame({'x': [1, 2]})"
        ),
        f"%%remote {TARGET}\ndef inner():\n    return 1 / 0\ninner()",
        "print('local kernel still fine')",
    ]
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    html = [
        o.data["text/html"] for o in nb.cells[1].outputs if "data" in o and "text/html" in o.data
    ]
    assert "<b>bold</b>" in html[0]
    assert "<table" in html[1]  # the DataFrame's own HTML
    error = error_of(nb.cells[2])
    assert error.ename == "ZeroDivisionError"
    assert error.evalue == "division by zero"
    trace = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert f"Error on {TARGET}" in trace and "inner()" in trace
    assert "jupyter_remote_hw" not in trace  # no frames of the magic itself
    assert "local kernel still fine" in text_of(nb.cells[3])


def test_an_unpicklable_input_assigns_nothing_remotely(
    env: dict[str, str], short_tmp: Path
) -> None:
    cells = [
        "%load_ext jupyter_remote_hw\nimport threading\nok = 1\nlock = threading.Lock()",
        f"%%remote {TARGET}\nprint('started')",
        f"%%remote {TARGET} --in ok,lock\nprint('ran')",
        f"%%remote {TARGET}\nprint('ok' in globals(), 'lock' in globals())",
        f"%remote_pull nothing_here --from {TARGET}",
        "%%remote no-such-box\n1",
    ]
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    error = error_of(nb.cells[2])
    assert error.ename == "NotSerializableError"
    assert "'lock' (_thread.lock)" in error.evalue and "a lock" in error.evalue
    assert "ran" not in text_of(nb.cells[2])
    assert text_of(nb.cells[3]).strip() == "False False"
    assert "no variable named 'nothing_here'" in error_of(nb.cells[4]).evalue
    # IPython shows usage errors as a line on stderr, without a traceback.
    unknown = text_of(nb.cells[5])
    assert unknown.startswith("UsageError: ") and "no-such-box" in unknown
    assert f"targets are local, {TARGET}" in unknown


def test_device_cuda_fails_clearly_on_a_host_without_cuda(
    env: dict[str, str], short_tmp: Path
) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the test host has CUDA here; the refusal is for hosts without it")
    cells = [
        "%load_ext jupyter_remote_hw\nimport torch\nt = torch.ones(3)",
        f"%remote_push t --to {TARGET} --device cuda",
        f"%%remote {TARGET}\nprint('t' in globals())",
    ]
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    error = error_of(nb.cells[1])
    assert "--device cuda: this host has no usable CUDA device" in error.evalue
    assert "Nothing was assigned" in error.evalue
    assert text_of(nb.cells[2]).strip() == "False"


def test_remote_hw_lists_targets_and_sets_the_default(env: dict[str, str], short_tmp: Path) -> None:
    cells = [
        "%load_ext jupyter_remote_hw\n%remote_hw",
        "%remote_hw testhost",  # the SSH host as the picker shows it, not the target's name
        "%%remote\nimport os\nprint(os.getpid())",
        "%remote_hw",
    ]
    nb, _ = run_notebook(cells, env, short_tmp)
    listing = text_of(nb.cells[0])
    assert TARGET in listing and SHOWN in listing and "this machine" in listing
    assert f"default hardware: {TARGET}" in text_of(nb.cells[1])
    after = text_of(nb.cells[3])
    (row,) = [line for line in after.splitlines() if TARGET in line]
    assert row.lstrip().startswith("*") and "running" in row


def test_interrupting_the_local_cell_interrupts_the_remote_one(
    env: dict[str, str], short_tmp: Path
) -> None:
    with local_kernel(env, short_tmp, f"%load_ext jupyter_remote_hw\n%remote_hw {TARGET}") as (
        manager,
        kc,
    ):
        cell = kc.execute(
            "%%remote\nimport time, os\nx = 'kept'\nprint('sleeping', flush=True)\n"
            "time.sleep(120)\nprint('woke')"
        )
        wait_for_stream(kc, cell, "sleeping", 60)
        began = time.monotonic()
        manager.interrupt_kernel()
        reply = shell_reply(kc, cell, 60)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - began < 15  # not the cell's two minutes
        # ipykernel aborts a request that reaches it while it still ends the interrupted
        # cell (stop_on_error), as the stock kernel does: such a cell is sent again.
        for _ in range(10):
            after = kc.execute("%%remote\nprint('remote alive', x)")
            answer = shell_reply(kc, after, 90)["content"]
            if answer["status"] != "aborted":
                break
            time.sleep(0.1)
        assert answer["status"] == "ok", answer
        try:
            wait_for_stream(kc, after, "remote alive kept", 30)  # printed before it answered
        except (queue.Empty, AssertionError):
            pytest.fail(f"the next cell printed nothing: {answer}\n{_threads(kc)}")
    assert not [p for p in processes_under(str(short_tmp / "r")) if "ipykernel" in p]


def _threads(kc: Any) -> str:
    """Where each thread of the local kernel stands, asked on the shell channel (which
    answers even when nothing comes on IOPub)."""
    stacks = (
        "'\\n'.join(f'--- {t.name}\\n' + ''.join(__import__('traceback').format_stack(f)) "
        "for t in __import__('threading').enumerate() "
        "for f in [__import__('sys')._current_frames().get(t.ident)] if f)"
    )
    msg_id = kc.execute("", silent=True, user_expressions={"stacks": stacks})
    value = shell_reply(kc, msg_id, 30)["content"]["user_expressions"]["stacks"]
    return str(value.get("data", {}).get("text/plain", value))


def test_a_remote_kernel_that_dies_mid_cell_fails_the_cell_and_a_new_one_starts(
    env: dict[str, str], short_tmp: Path
) -> None:
    cells = [
        "%load_ext jupyter_remote_hw",
        f"%%remote {TARGET} --out first\nimport os\nfirst = os.getpid()",
        (
            f"%%remote {TARGET}\nimport os, signal, time\nprint('going', flush=True)\n"
            "time.sleep(0.5)\nos.kill(os.getpid(), signal.SIGKILL)\ntime.sleep(60)"
        ),
        f"%%remote {TARGET} --out second\nimport os\nsecond = os.getpid()",
        "print('new kernel:', second != first)",
    ]
    began = time.monotonic()
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    error = error_of(nb.cells[2])
    assert error.ename == "RemoteKernelLostError"
    assert f"the kernel on {TARGET} ended while this cell was waiting" in error.evalue
    assert "the next %%remote starts a new kernel there" in error.evalue
    assert "new kernel: True" in text_of(nb.cells[4])
    assert time.monotonic() - began < 90  # not the cell's 60 s sleep plus a timeout
    assert not [p for p in processes_under(str(short_tmp / "r")) if "ipykernel" in p]


def test_loading_the_magics_keeps_a_handler_the_user_had_set(
    env: dict[str, str], short_tmp: Path
) -> None:
    cells = [
        (
            "def mine(shell, etype, value, tb, tb_offset=None):\n"
            "    print('handled by mine:', value)\n"
            "get_ipython().set_custom_exc((LookupError,), mine)"
        ),
        "%load_ext jupyter_remote_hw",
        "raise KeyError('k')",
        f"import threading\nlock = threading.Lock()\n%remote_push lock --to {TARGET}",
    ]
    nb, _ = run_notebook(cells, env, short_tmp, allow_errors=True)
    assert "handled by mine: 'k'" in text_of(nb.cells[2])
    # The magics' own errors are still shown without the magic's frames.
    error = error_of(nb.cells[3])
    assert error.ename == "NotSerializableError"
    assert error.traceback == [f"NotSerializableError: {error.evalue}"]
