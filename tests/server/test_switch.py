"""Switching a notebook's hardware on a real jupyter_server: what can be carried is
listed at once (also from a plain ``python3`` kernel), what cannot is named with the
reason, modules are re-imported under their names, and each step is pushed as it
happens, the copy with bytes and rate."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from ..provisioner.conftest import LOCAL_KERNEL, OpenChannels
from .apiclient import API, Events, Fetch, failure, get, post

#: A kernel in whose Python jupyter_remote_hw cannot be imported.
NO_PACKAGE_KERNEL = "python3-without-remote-hw"


@pytest.fixture
def kernel_without_package(jp_kernel_dir: Path) -> str:
    """A kernelspec whose kernel cannot import jupyter_remote_hw."""
    spec = jp_kernel_dir / NO_PACKAGE_KERNEL
    spec.mkdir(parents=True)
    code = (
        "import sys; sys.modules['jupyter_remote_hw'] = None; "
        "from ipykernel import kernelapp; kernelapp.launch_new_instance()"
    )
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-c", code, "-f", "{connection_file}"],
                "display_name": "Python 3 without jupyter-remote-hw",
                "language": "python",
            }
        )
    )
    return NO_PACKAGE_KERNEL


async def listed(jp_fetch: Fetch, session_id: str, hardware: str) -> Any:
    """The carry listing of a session for a switch to ``hardware``."""
    response = await jp_fetch(*API, "variables", session_id, params={"hardware": hardware})
    return json.loads(response.body)


async def timed_get(jp_fetch: Fetch, *path: str) -> tuple[float, Any]:
    began = time.monotonic()
    body = await get(jp_fetch, *path)
    return time.monotonic() - began, body


async def test_a_plain_python3_kernel_lists_what_can_be_carried_at_once(
    jp_fetch: Fetch,
    sessions: Any,
    channels: OpenChannels,
) -> None:
    session = await sessions("python3")
    kc = await channels(session["kernel"]["id"])
    ran = await kc.execute(
        "import json, threading\nimport numpy as np\n"
        "x = 1\nrows = list(range(100))\nlk = threading.Lock()"
    )
    assert ran.status == "ok", ran
    seconds, listing = await timed_get(jp_fetch, "variables", session["id"])
    assert seconds < 1.0, f"the listing took {seconds:.2f} s"
    variables = {v["name"]: v for v in listing["variables"]}
    assert set(variables) == {"x", "rows", "lk"}
    assert variables["x"]["carriable"] is True and variables["rows"]["nbytes"] > 0
    assert variables["lk"]["carriable"] is False
    assert "cannot pickle '_thread.lock'" in variables["lk"]["reason"]
    modules = {m["name"]: m for m in listing["modules"]}
    assert {n: m["module"] for n, m in modules.items()} == {
        "json": "json",
        "threading": "threading",
        "np": "numpy",
    }
    assert all(m["importable"] for m in modules.values())
    # Nothing was added to the user's namespace, nothing counted as a cell.
    ran = await kc.execute("print(sorted(k for k in globals() if not k.startswith('_')))")
    assert ran.stdout.strip() == str(
        sorted(
            [
                "In",
                "Out",
                "exit",
                "get_ipython",
                "json",
                "lk",
                "np",
                "open",
                "quit",
                "rows",
                "threading",
                "x",
            ]
        )
    )
    # Asked again, it answers at once too.
    seconds, _ = await timed_get(jp_fetch, "variables", session["id"])
    assert seconds < 1.0


async def test_a_kernel_that_cannot_load_the_package_is_an_immediate_409_saying_why(
    jp_fetch: Fetch,
    sessions: Any,
    kernel_without_package: str,
) -> None:
    session = await sessions(kernel_without_package)
    began = time.monotonic()
    code, error = await failure(jp_fetch, "variables", session["id"], method="GET")
    assert time.monotonic() - began < 1.0
    assert code == 409
    assert "cannot be loaded in it" in error["message"]
    assert "Install jupyter-remote-hw in that kernel's Python" in error["message"]


async def test_a_kernel_running_a_cell_is_an_immediate_409(
    jp_fetch: Fetch,
    sessions: Any,
    channels: OpenChannels,
) -> None:
    session = await sessions("python3")
    kc = await channels(session["kernel"]["id"])
    await kc.start("import time; time.sleep(30)")
    await asyncio.sleep(0.5)  # the server has seen it go busy
    began = time.monotonic()
    code, error = await failure(jp_fetch, "variables", session["id"], method="GET")
    assert time.monotonic() - began < 2.0
    assert code == 409 and "running a cell" in error["message"]
    await jp_fetch("api", "kernels", session["kernel"]["id"], "interrupt", method="POST", body="{}")


async def test_a_switch_re_imports_modules_carries_the_confirmed_variables_and_reports_progress(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    sessions: Any,
    channels: OpenChannels,
    events: Events,
    tmp_path: Path,
) -> None:
    (tmp_path / "only_here.py").write_text("VALUE = 7\n")
    session = await sessions("python3")
    old = await channels(session["kernel"]["id"])
    ran = await old.execute(
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import json, threading, only_here\nimport numpy as np\n"
        "x = 1\nbig = np.ones(3 * 2**20)\nlk = threading.Lock()\nleft = 'not confirmed'"
    )
    assert ran.status == "ok", ran

    report = await post(
        jp_fetch,
        "switch",
        session["id"],
        body={"hardware": "local", "carry": ["x", "big", "np", "json", "only_here"]},
    )
    assert sorted(c["name"] for c in report["carried"]) == ["big", "x"]
    assert report["imported"] == [
        {"name": "np", "module": "numpy"},
        {"name": "json", "module": "json"},
    ]
    assert [n["name"] for n in report["not_carried"]] == ["only_here"]
    assert "No module named 'only_here'" in report["not_carried"][0]["reason"]
    new = await channels(report["kernel_id"])
    ran = await new.execute(
        "print(np.arange(3).tolist(), json.dumps(x), big.nbytes,\n"
        "      'lk' in globals(), 'left' in globals())"
    )
    assert ran.status == "ok", ran
    assert ran.stdout.split() == ["[0,", "1,", "2]", "1", str(3 * 2**20 * 8), "False", "False"]
    assert session["kernel"]["id"] not in jp_serverapp.kernel_manager

    done = await events.until(lambda e: e["type"] == "switch" and e["state"] == "done")
    assert done["imported"] == ["np", "json"]
    steps = [e["state"] for e in events.received if e["type"] == "switch"]
    for step in (
        "starting kernel",
        "importing modules",
        "carrying variables",
        "switching session",
        "stopping the old kernel",
        "done",
    ):
        assert step in steps
    assert (
        steps.index("starting kernel")
        < steps.index("importing modules")
        < steps.index("carrying variables")
        < steps.index("done")
    )
    copied = [
        e
        for e in events.received
        if e["type"] == "switch" and "done" in e and e["state"] == "carrying variables"
    ]
    last = copied[-1]
    assert last["done"] == last["total"] > 3 * 2**20 * 8
    assert last["rate"] > 0
    assert last["detail"].startswith("24.0 MiB of 24.0 MiB · ") and last["detail"].endswith("/s")


async def test_a_switch_carrying_all_takes_the_modules_too_and_names_what_cannot_come(
    jp_fetch: Fetch,
    sessions: Any,
    channels: OpenChannels,
) -> None:
    session = await sessions(LOCAL_KERNEL)
    old = await channels(session["kernel"]["id"])
    assert (
        await old.execute("import os.path as osp, threading\nlk = threading.Lock()\nn = 3")
    ).status == "ok"
    report = await post(
        jp_fetch, "switch", session["id"], body={"hardware": "local", "carry": "all"}
    )
    assert [c["name"] for c in report["carried"]] == ["n"]
    assert {m["name"] for m in report["imported"]} == {"osp", "threading"}
    assert [n["name"] for n in report["not_carried"]] == ["lk"]
    new = await channels(report["kernel_id"])
    ran = await new.execute("print(osp.join('a', str(n)))")
    assert ran.stdout.strip() == "a/3"


async def test_the_listing_names_modules_the_open_new_hardware_lacks(
    jp_fetch: Fetch,
    sessions: Any,
    channels: OpenChannels,
    tmp_path: Path,
) -> None:
    (tmp_path / "only_here.py").write_text("VALUE = 7\n")
    session = await sessions(LOCAL_KERNEL)  # the local machine (its agent) is open now
    kc = await channels(session["kernel"]["id"])
    ran = await kc.execute(
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\nimport json, only_here"
    )
    assert ran.status == "ok", ran
    began = time.monotonic()
    listing = await listed(jp_fetch, session["id"], "local")
    assert time.monotonic() - began < 1.0
    modules = {m["name"]: m for m in listing["modules"]}
    assert modules["json"]["installed_there"] is True
    assert modules["only_here"]["installed_there"] is False
    assert modules["only_here"]["missing_reason"] == "No module named 'only_here'"
    # Hardware whose machine is not open: nothing is known before the switch.
    listing = await listed(jp_fetch, session["id"], "ssh-testhost")
    assert all("installed_there" not in m for m in listing["modules"])
    with pytest.raises(HTTPClientError) as caught:
        await listed(jp_fetch, session["id"], "nowhere")
    assert caught.value.code == 404 and caught.value.response is not None
    assert json.loads(caught.value.response.body)["field"] == "hardware"


async def test_a_switch_that_cannot_read_the_old_kernel_moves_nothing(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """The old kernel's process was killed just before a switch: the switch answers 409
    saying its variables could not be read, and the notebook keeps its kernel (before,
    it answered 200 carrying nothing and shut the old kernel down: what a kernel that
    was only slow to answer held would have been lost)."""
    session = await sessions(LOCAL_KERNEL)
    old_id = session["kernel"]["id"]
    kc = await channels(old_id)
    pid = int((await kc.execute("import os; print(os.getpid())")).stdout)
    os.kill(pid, signal.SIGKILL)
    code, error = await failure(
        jp_fetch, "switch", session["id"], body={"hardware": "local", "carry": "all"}
    )
    assert code == 409, error
    assert error["message"].startswith(f"the variables of kernel {old_id} could not be read: ")
    # Where the kernel runs, in words (not "the kernel on kernel <id> (remote-hw-local)").
    assert "the kernel on local " in error["message"], error["message"]
    assert error["message"].endswith("The notebook keeps that kernel; nothing was moved")
    model = json.loads((await jp_fetch("api", "sessions", session["id"])).body)
    assert model["kernel"]["id"] == old_id
    assert jp_serverapp.kernel_manager.list_kernel_ids() == [old_id]
