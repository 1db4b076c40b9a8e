"""Hibernating a kernel on the SSH test host and waking it, through the real jupyter_server:
the kernel keeps its id and ports, its clients never see it dead, and the next cell wakes
it with its variables back."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from jupyter_remote_hw.hibernation import HibernationStore
from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.provisioner import RemoteHWProvisioner
from jupyter_remote_hw.transfer.variables import kernel_namespace

from ..kernelws import KernelChannels
from ..serverprocess import Server
from .conftest import SSH_KERNEL, SSH_TARGET, Fetch, OpenChannels, StartKernel
from .test_reattach import dirs, http_client, start_server  # noqa: F401 (fixtures)

API = ("jupyter-remote-hw", "api")

SETUP = """\
import os, numpy as np
arr = np.arange(1_000_000, dtype=np.float64)
def double(x):
    return 2 * x
class Box:
    def __init__(self, v):
        self.v = v
box = Box(41)
handle = open({path!r}, "w")
print(os.getpid())
"""


class Recording(KernelChannels):
    """Kernel channels that keep every message they read."""

    def __init__(self, kc: KernelChannels) -> None:
        super().__init__(kc.ws)
        self.seen: list[dict[str, Any]] = []

    async def _next(self, timeout: float) -> dict[str, Any]:
        message = await super()._next(timeout)
        self.seen.append(message)
        return message


def provisioner_of(serverapp: Any, kernel_id: str) -> RemoteHWProvisioner:
    provisioner = serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert isinstance(provisioner, RemoteHWProvisioner)
    return provisioner


def store() -> HibernationStore:
    return MachineManager.instance().hibernation_store


def stored(kernel_id: str) -> bool:
    return any(e.entry_id == kernel_id for e in store().entries())


def saved_file(kernel_id: str, name: str) -> Path:
    """A file of a hibernated kernel's saved state, wherever it is kept: on its host's
    disk (this machine's, for the test hosts) or in the store."""
    far = store().entry(kernel_id).far
    return Path(far["path"]) / name if far else store().entry_path(kernel_id) / name


async def hibernate(jp_fetch: Fetch, kernel_id: str, policy: str | None = None) -> Any:
    body = json.dumps({"policy": policy} if policy else {})
    answer = await jp_fetch(*API, "hibernate", kernel_id, method="POST", body=body)
    return json.loads(answer.body)


async def wake(jp_fetch: Fetch, kernel_id: str, target: str | None = None) -> Any:
    body = json.dumps({"target": target} if target else {})
    answer = await jp_fetch(*API, "wake", kernel_id, method="POST", body=body)
    return json.loads(answer.body)


async def gone(pid: int, timeout: float = 15.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while Path(f"/proc/{pid}").exists():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def kernel_row(jp_fetch: Fetch, kernel_id: str) -> dict[str, Any]:
    machines = json.loads((await jp_fetch(*API, "machines")).body)["machines"]
    rows = [k for m in machines for k in m["kernels"] if k["id"] == kernel_id]
    assert len(rows) == 1, machines
    return dict(rows[0])


async def test_a_hibernated_kernel_keeps_its_id_and_wakes_on_the_next_cell(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
    short_tmp: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    setup = await kc.execute(SETUP.format(path=str(short_tmp / "open.txt")))
    assert setup.status == "ok", setup
    pid = int(setup.stdout)
    ports = jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info()

    summary = await hibernate(jp_fetch, kernel_id)
    assert summary["hibernated"] is True
    assert [e["name"] for e in summary["left_out"]] == ["handle"]
    assert "TextIOWrapper" in summary["left_out"][0]["type"]
    assert {"arr", "box", "double"} <= {v["name"] for v in summary["saved"]}
    assert {"name": "np", "module": "numpy"} in summary["modules"]
    assert summary["bytes"] >= 8_000_000

    # The kernel's process is gone from the host, and so is its machine here ...
    assert await gone(pid)
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert provisioner.hibernation.hibernated and provisioner.run.machine is None
    assert MachineManager.instance().cached(SSH_TARGET) is None
    # ... but Jupyter still lists it, alive, under its id; the machines listing says so.
    listed = json.loads((await jp_fetch("api", "kernels")).body)
    assert kernel_id in [k["id"] for k in listed]
    assert await provisioner.poll() is None
    row = await kernel_row(jp_fetch, kernel_id)
    assert row["state"] == "hibernated"
    assert row["hibernated"]["bytes"] == summary["bytes"]
    assert row["hibernated"]["left_out"][0]["name"] == "handle"
    assert stored(kernel_id)
    # Its hardware use is not read from a machine it no longer has.
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(*API, "usage", kernel_id)
    assert refused.value.code == 409
    assert refused.value.response is not None
    assert b"hibernates: its hardware was released" in refused.value.response.body

    # A client connecting now is answered (kernel info) without waking the kernel.
    events: list[dict[str, Any]] = []
    manager = MachineManager.instance()
    manager.launch_listeners.append(events.append)
    try:
        fresh = Recording(await channels(kernel_id))
        msg_id = await fresh.send("kernel_info_request", {})
        info = await fresh.collect(msg_id, timeout=10)
        assert info.status == "ok"
        reply = next(m for m in info.messages if m["header"]["msg_type"] == "kernel_info_reply")
        assert reply["content"]["implementation"] == "ipython"  # the kernel's own answer
        await asyncio.sleep(0.5)
        assert events == [] and provisioner.hibernation.hibernated

        # The next cell wakes it: same id, same ports, the variables back.
        ran = await fresh.execute(
            "print(double(arr.sum()), box.v + 1, type(box).__name__, os.getpid())", timeout=120
        )
    finally:
        manager.launch_listeners.remove(events.append)
    assert ran.status == "ok", ran
    total, box_v, box_type, new_pid = ran.stdout.split()
    assert float(total) == 2 * sum(range(1_000_000))
    assert (box_v, box_type) == ("42", "Box")
    assert int(new_pid) != pid
    done = [e["step"] for e in events if e["state"] == "done"]
    assert "start kernel" in done and done[-1] == "restore state", events
    assert all(e["kernel_id"] == kernel_id for e in events)
    # The restore's progress says its bytes and their rate.
    notes = [e["detail"] for e in events if e["step"] == "restore state" and e["detail"]]
    assert any(re.search(r" of [\d.]+ [KMG]?i?B · [\d.]+ [KMG]?i?B/s$", n) for n in notes), notes
    states = [
        m["content"]["execution_state"] for m in fresh.seen if m["header"]["msg_type"] == "status"
    ]
    assert "dead" not in states
    assert not provisioner.hibernation.hibernated
    assert not stored(kernel_id)
    assert jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info() == ports
    assert (await kernel_row(jp_fetch, kernel_id))["hibernated"] is None
    # The client connected before it hibernated goes on as before; the open file did
    # not come back.
    assert (await kc.execute("box.v")).result == "41"
    assert (await kc.execute("handle")).ename == "NameError"


async def test_a_kernel_whose_variables_were_read_here_still_hibernates(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    # The server's own clients of a kernel (a switch's variables listing, a save, a
    # restore) share one identity on its shell channel: reading the variables once
    # must not make the next save's requests look like a cell from a held client.
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41")).status == "ok"
    for woken_times in range(2):
        listing = await kernel_namespace(jp_serverapp.kernel_manager, kernel_id)
        assert "x" in [v["name"] for v in listing["variables"]]
        summary = await hibernate(jp_fetch, kernel_id)
        assert summary["hibernated"] is True, summary
        woken = await kc.execute("x += 1\nprint(x)", timeout=120)
        assert woken.status == "ok" and woken.stdout.strip() == str(42 + woken_times), woken


async def test_a_running_cell_keeps_its_kernel_awake_and_one_ending_at_once_does_not(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch
) -> None:
    """A cell that runs on refuses a hibernation (409, saying why) and finishes; one that
    ends within a moment (as a request of the server's own does) lets it hibernate."""
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("import time\nx = 1")).status == "ok"
    long = await kc.start("time.sleep(5)\nx = 2")
    await asyncio.sleep(0.5)
    with pytest.raises(HTTPClientError) as refused:
        await hibernate(jp_fetch, kernel_id)
    error = json.loads(refused.value.response.body)
    assert refused.value.code == 409, error
    # It names the kernel by its machine, as the notebook's toolbar does, not by its id.
    assert error["message"] == (
        "the kernel on Test GPU 24 GiB · testhost is running a cell: it can hibernate once "
        "the cell ends"
    ), error
    assert (await kc.collect(long, timeout=30)).status == "ok"

    short = await kc.start("time.sleep(0.8)\nx = 3")
    await asyncio.sleep(0.2)
    assert (await hibernate(jp_fetch, kernel_id))["hibernated"] is True
    assert (await kc.collect(short, timeout=30)).status == "ok"
    assert (await kc.execute("x", timeout=120)).result == "3"


async def test_a_failed_wake_keeps_the_state_and_the_next_cell_retries(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
    short_tmp: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 6 * 7")).status == "ok"
    await hibernate(jp_fetch, kernel_id)
    part = saved_file(kernel_id, "var-0000.bin")
    away = short_tmp / "away.bin"
    shutil.move(part, away)

    failed = await kc.execute("x", timeout=120)
    assert failed.status == "error" and failed.ename == "KernelWakeError", failed
    error = next(m for m in failed.messages if m["header"]["msg_type"] == "error")
    text = error["content"]["evalue"]
    assert "restore state" in text or "saved state" in text, text
    assert "run the cell again" in text
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert provisioner.hibernation.hibernated and provisioner.run.host_connection is None
    assert kernel_id in jp_serverapp.kernel_manager
    assert stored(kernel_id)
    row = await kernel_row(jp_fetch, kernel_id)
    assert row["state"] == "hibernated" and row["hibernated"]["wake_error"]

    shutil.move(away, part)  # the state is whole again: the next cell wakes the kernel
    again = await kc.execute("x", timeout=120)
    assert again.status == "ok" and again.result == "42", again
    assert not stored(kernel_id)


async def test_shutting_down_a_hibernated_kernel_deletes_its_state(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("y = 1")).status == "ok"
    await hibernate(jp_fetch, kernel_id)
    assert stored(kernel_id)
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert kernel_id not in jp_serverapp.kernel_manager
    assert not stored(kernel_id)
    assert MachineManager.instance().ledger.get_kernel(kernel_id) is None


async def test_what_cannot_hibernate_keeps_running(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
    short_tmp: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute(f"z = 5; f = open({str(short_tmp / 'f')!r}, 'w')")).status == "ok"
    with pytest.raises(HTTPClientError) as refused:
        await hibernate(jp_fetch, kernel_id, "refuse")
    assert refused.value.code == 409
    assert "'f'" in json.loads(refused.value.response.body)["message"]
    assert not provisioner_of(jp_serverapp, kernel_id).hibernation.hibernated
    assert (await kc.execute("z + f.closed")).result == "5"
    assert not stored(kernel_id)

    with pytest.raises(HTTPClientError) as unknown:
        await hibernate(jp_fetch, "no-such-kernel")
    assert unknown.value.code == 404
    woke = json.loads((await jp_fetch(*API, "wake", kernel_id, method="POST", body="")).body)
    assert woke == {"kernel_id": kernel_id, "woken": False, "target": SSH_TARGET}


async def ours(server: Server, method: str, path: str, body: Any = None) -> Any:
    """Call a route of the extension's REST API on a server process; its JSON answer."""
    request = HTTPRequest(
        f"{server.url}/jupyter-remote-hw/api/{path}",
        method=method,
        headers={"Authorization": f"token {server.token}"},
        body=json.dumps(body) if body is not None else None,
        request_timeout=120,
    )
    return json.loads((await AsyncHTTPClient().fetch(request)).body)


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["crash", "clean stop"])
async def test_a_restarted_server_takes_a_hibernated_kernel_over_and_wakes_it(
    start_server: Any, http_client: None, stop: signal.Signals
) -> None:
    first: Server = start_server()
    await first.ready()
    kernel_id = (await first.api("kernels", method="POST", body={"name": SSH_KERNEL}))["id"]
    kc = await first.channels(kernel_id)
    assert (await kc.execute("x = 42")).status == "ok"
    await kc.close()
    # Its notebook's hibernate time goes with it to the next server (in the ledger).
    after = await ours(first, "PUT", f"hibernate-after/{kernel_id}", {"seconds": 900})
    assert after["hibernate_after"] == {"seconds": 900.0, "source": "notebook"}
    request = HTTPRequest(
        f"{first.url}/jupyter-remote-hw/api/hibernate/{kernel_id}",
        method="POST",
        headers={"Authorization": f"token {first.token}"},
        body=b"{}",
        request_timeout=120,
    )
    assert json.loads((await AsyncHTTPClient().fetch(request)).body)["hibernated"]
    # A crash, or a clean stop (which shuts the other kernels down): the saved state
    # stays for the next server either way.
    first.process.send_signal(stop)
    first.process.wait(60)
    if stop == signal.SIGTERM:
        assert "left hibernated for the next server" in first.log.read_text()

    second: Server = start_server()
    await second.ready()
    for _ in range(100):
        listed = [k["id"] for k in await second.api("kernels")]
        if kernel_id in listed:
            break
        await asyncio.sleep(0.2)
    assert listed == [kernel_id], second.log.read_text()[-4000:]
    # Taken over asleep, it reads as the idle kernel it was, not as one starting (no
    # client has connected yet, so nothing else would say so).
    for _ in range(50):
        state = (await second.api(f"kernels/{kernel_id}"))["execution_state"]
        if state == "idle":
            break
        await asyncio.sleep(0.2)
    assert state == "idle", second.log.read_text()[-4000:]
    kc = await second.channels(kernel_id)  # answered while it still hibernates
    ran = await kc.execute("x + 1", timeout=120)
    assert ran.result == "43", (ran, second.log.read_text()[-4000:])
    machines = (await ours(second, "GET", "machines"))["machines"]
    [row] = [k for m in machines for k in m["kernels"] if k["id"] == kernel_id]
    assert row["hibernate_after"] == {"seconds": 900.0, "source": "notebook"}
    await kc.close()
