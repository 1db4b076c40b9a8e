"""Waking a hibernated kernel on another target, through the REST API of a real
jupyter_server: the kernel keeps its id, ports and variables, and its target (its
kernelspec, its machine in the machines listing) becomes the new one. A target it
cannot wake on, or a wake there that fails, leaves it hibernated where it was."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.machines.manager import MachineManager

from ..testhosts import SSHTestHost
from .conftest import (
    HARDWARE,
    SSH_KERNEL,
    SSH_TARGET,
    Fetch,
    OpenChannels,
    StartKernel,
    bare_python,
)
from .test_hibernate import API, hibernate, provisioner_of, stored

#: The second target: the same SSH test host under another name, with its own agent.
OTHER = "ssh-other"
#: A third: the same host with a Python that has no ipykernel (no kernel starts there).
BARE = "ssh-bare"


@pytest.fixture
def hosts(ssh_host: SSHTestHost, remote_root: Path, short_tmp: Path) -> list[dict[str, Any]]:
    """The loopback test host offered three times: as ``ssh-testhost``, as
    ``ssh-other``, and as ``ssh-bare`` without ipykernel."""
    return [
        {
            "host": ssh_host.alias,
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root),
        },
        {
            "host": ssh_host.alias,
            "name": "other",
            "python": sys.executable,
            "hardware": HARDWARE,
            "root": str(remote_root.with_name("r2")),
        },
        {
            "host": ssh_host.alias,
            "name": "bare",
            "python": bare_python(short_tmp),
            "root": str(remote_root.with_name("r3")),
        },
    ]


async def listed_on(jp_fetch: Fetch, kernel_id: str) -> tuple[str, str]:
    """The machine the machines listing shows the kernel under, and its state there."""
    machines = json.loads((await jp_fetch(*API, "machines")).body)["machines"]
    rows = [(m["name"], k["state"]) for m in machines for k in m["kernels"] if k["id"] == kernel_id]
    assert len(rows) == 1, machines
    return rows[0]


async def wake(jp_fetch: Fetch, kernel_id: str, target: str | None) -> Any:
    body = json.dumps({"target": target} if target is not None else {})
    return json.loads((await jp_fetch(*API, "wake", kernel_id, method="POST", body=body)).body)


async def refused(jp_fetch: Fetch, kernel_id: str, target: str) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as caught:
        await wake(jp_fetch, kernel_id, target)
    assert caught.value.response is not None
    return caught.value.code, json.loads(caught.value.response.body)["message"]


@pytest.mark.timeout(240)
async def test_a_hibernated_kernel_wakes_on_another_target(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("import numpy as np; x = np.arange(10) * 2")).status == "ok"
    ports = jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info()

    # Running: it cannot wake elsewhere (that is a hardware switch).
    code, message = await refused(jp_fetch, kernel_id, OTHER)
    assert code == 409 and "switch its hardware" in message, message

    await hibernate(jp_fetch, kernel_id)
    assert await listed_on(jp_fetch, kernel_id) == (SSH_TARGET, "hibernated")

    # A hardware switch of its notebook would read it on its old host, waking it there:
    # refused at once, saying to wake it on the new hardware instead.
    session = json.loads(
        (
            await jp_fetch(
                "api",
                "sessions",
                method="POST",
                body=json.dumps(
                    {"path": "moving.ipynb", "type": "notebook", "kernel": {"id": kernel_id}}
                ),
            )
        ).body
    )
    for method, path, body in [
        ("GET", ("variables", session["id"]), None),
        ("POST", ("switch", session["id"]), json.dumps({"hardware": OTHER})),
    ]:
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch(*API, *path, method=method, body=body)
        assert caught.value.code == 409 and caught.value.response is not None
        message = json.loads(caught.value.response.body)["message"]
        assert "hibernates: wake it on the hardware you want" in message, message
    assert provisioner_of(jp_serverapp, kernel_id).hibernation.hibernated

    # An unknown target: nothing changes.
    code, message = await refused(jp_fetch, kernel_id, "nowhere")
    assert code == 404 and "nowhere" in message, message
    # A wake there that fails: it still hibernates where it was, its state intact.
    code, message = await refused(jp_fetch, kernel_id, BARE)
    assert code == 502 and "still hibernates" in message, message
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert provisioner.target == SSH_TARGET and provisioner.hibernation.hibernated
    assert stored(kernel_id)
    assert await listed_on(jp_fetch, kernel_id) == (SSH_TARGET, "hibernated")
    kernels = json.loads((await jp_fetch("api", "kernels")).body)
    assert [k["name"] for k in kernels] == [SSH_KERNEL]
    assert MachineManager.instance().placements[kernel_id] == SSH_TARGET

    woke = await wake(jp_fetch, kernel_id, OTHER)
    assert woke["woken"] is True and woke["target"] == OTHER, woke
    assert woke["assigned"] == ["x"] and woke["imported"] == ["numpy"], woke
    assert not stored(kernel_id)
    # Same id and ports, the variables back; its target is the new one everywhere.
    assert (await kc.execute("print(int(x.sum()), np.__name__)")).stdout == "90 numpy\n"
    assert jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info() == ports
    assert await listed_on(jp_fetch, kernel_id) == (OTHER, "idle")
    kernels = json.loads((await jp_fetch("api", "kernels")).body)
    assert [(k["id"], k["name"]) for k in kernels] == [(kernel_id, "remote-hw-" + OTHER)]
    assert provisioner.target == MachineManager.instance().placements[kernel_id] == OTHER
    record = MachineManager.instance().ledger.get_kernel(kernel_id)
    assert record is not None and record.target == OTHER
    # Its kernel runs under the other target's agent (its own root on the host).
    assert MachineManager.instance().cached(OTHER) is not None
    assert MachineManager.instance().cached(SSH_TARGET) is None
