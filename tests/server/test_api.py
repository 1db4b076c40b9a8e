"""The hardware REST API on a real jupyter_server, with real kernels on this machine
and on the loopback sshd test host."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError
from tornado.websocket import websocket_connect

from jupyter_remote_hw.machines.manager import MachineManager

from ..provisioner.conftest import LOCAL_KERNEL, SHOWN, SSH_TARGET, OpenChannels
from ..testhosts import SSHTestHost
from .apiclient import API, Events, Fetch, failure, get, post


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "hardware"),
        ("GET", "machines"),
        ("POST", "launch"),
        ("POST", "machines/local/terminate"),
        ("GET", "variables/x"),
        ("POST", "switch/x"),
        ("GET", "shares"),
        ("POST", "shares"),
        ("DELETE", "shares/x"),
        ("POST", "join"),
    ],
)
async def test_every_route_needs_authentication(
    jp_fetch: Fetch, jp_http_port: int, jp_base_url: str, method: str, path: str
) -> None:
    # jp_fetch (unused) makes the server listen; this request carries no token.
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}jupyter-remote-hw/api/{path}"
    with pytest.raises(HTTPClientError) as caught:
        await AsyncHTTPClient().fetch(url, method=method, body="{}" if method == "POST" else None)
    assert caught.value.code == 401
    assert json.loads(caught.value.response.body)["message"].startswith("not authenticated")


async def test_event_socket_needs_authentication(
    jp_fetch: Fetch, jp_http_port: int, jp_base_url: str
) -> None:
    url = f"ws://127.0.0.1:{jp_http_port}{jp_base_url}jupyter-remote-hw/api/events"
    with pytest.raises(HTTPClientError) as caught:
        await websocket_connect(url)
    assert caught.value.code == 401


async def test_hardware_lists_local_and_the_ssh_host(
    jp_fetch: Fetch, ssh_host: SSHTestHost
) -> None:
    listing = await get(jp_fetch, "hardware")
    hardware = listing["hardware"]
    by_name = {h["name"]: h for h in hardware}
    providers = {p["name"]: p for p in listing["providers"]}
    assert providers["local"] == {
        "name": "local",
        "title": "This machine",
        "usable": True,
        "reason": None,
        "hint": None,
        "commands": [],
    }
    assert providers["ssh"]["usable"] is True and providers["ssh"]["title"] == "SSH"
    assert hardware[0]["name"] == "local"  # the default first
    local = by_name["local"]
    assert local["kernel_name"] == LOCAL_KERNEL and local["provider"] == "local"
    assert local["vcpus"] == len(os.sched_getaffinity(0))
    assert local["memory_gib"] > 0 and local["price_per_hour"] == 0.0
    assert local["usable"] is True and local["why_not"] is None
    if local["gpu_count"] == 0:
        assert local["label"] == "CPU · local"
    ssh = by_name[SSH_TARGET]
    assert ssh["label"] == f"{SHOWN} · {ssh_host.alias}"
    assert (ssh["gpu"], ssh["gpu_count"], ssh["gpu_memory_gib"]) == ("Test GPU", 1, 24.0)
    assert ssh["where"] == ssh_host.alias and ssh["usable"] is True
    assert ssh["machine_state"] is None  # nothing connected yet
    assert (ssh["vcpus"], ssh["memory_gib"]) == (None, None)  # so nothing measured yet


@pytest.mark.parametrize(
    ("path", "body", "status", "field", "words"),
    [
        ("launch", {}, 400, "hardware", "hardware is missing"),
        ("launch", {"hardware": 3}, 400, "hardware", "hardware must be a string"),
        ("launch", {"hardware": "gpu-nowhere"}, 404, "hardware", "unknown hardware 'gpu-nowhere'"),
        ("launch", {"hardware": "local", "path": ["x"]}, 400, "path", "path must be a string"),
        (
            "switch/no-such-session",
            {"hardware": "local"},
            404,
            "session_id",
            "no session 'no-such-session'",
        ),
        (
            "switch/s",
            {"hardware": "local", "carry": "x,y"},
            400,
            "carry",
            "carry must be a JSON array or 'all'",
        ),
        (
            "switch/s",
            {"hardware": "local", "carry": ["ok", "not ok"]},
            400,
            "carry.1",
            "carry.1 'not ok' is not valid: a Python name",
        ),
        (
            "switch/s",
            {"hardware": "local", "keep_old": "yes"},
            400,
            "keep_old",
            "keep_old must be true or false",
        ),
        (
            "switch/s",
            {"hardware": "local", "colour": "red"},
            400,
            "colour",
            "colour is not a field here (the fields are: carry, device, hardware, keep_old)",
        ),
        ("switch/s", {}, 400, "hardware", "hardware is missing"),
        ("machines/gpu-nowhere/start", {}, 404, "name", "unknown hardware 'gpu-nowhere'"),
    ],
)
async def test_bad_requests_name_the_field(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    path: str,
    body: dict[str, Any],
    status: int,
    field: str,
    words: str,
) -> None:
    code, error = await failure(jp_fetch, *path.split("/"), body=body)
    assert code == status
    assert error["field"] == field
    assert words in error["message"]
    assert jp_serverapp.kernel_manager.list_kernel_ids() == []


async def test_a_body_that_is_not_a_json_object_is_400(jp_fetch: Fetch) -> None:
    code, error = await failure(jp_fetch, "launch", raw="{nope")
    assert code == 400 and "not JSON" in error["message"]
    code, error = await failure(jp_fetch, "launch", raw="[1]")
    assert code == 400 and "must be a JSON object" in error["message"]


async def test_start_a_kernel_on_local_hardware_with_progress_events(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    events: Events,
    channels: OpenChannels,
) -> None:
    response = await jp_fetch(
        "jupyter-remote-hw", "api", "launch", method="POST", body=json.dumps({"hardware": "local"})
    )
    assert response.code == 201
    kernel = json.loads(response.body)
    assert kernel["name"] == LOCAL_KERNEL
    assert response.headers["Location"].endswith(f"/api/kernels/{kernel['id']}")
    # Each launch step was pushed as it started and ended, then the machine's state.
    started = await events.until(lambda e: e["type"] == "launch" and e["state"] == "started")
    done = await events.until(
        lambda e: e["type"] == "launch" and e["step"] == "start kernel" and e["state"] == "done"
    )
    assert started["kernel_id"] == done["kernel_id"] == kernel["id"]
    assert done["seconds"] > 0
    machine = await events.until(lambda e: e["type"] == "machine")
    assert machine["machine"]["name"] == "local" and machine["machine"]["state"] == "running"
    # The kernel is a real separate process.
    ran = await (await channels(kernel["id"])).execute("import os; print(os.getpid())")
    assert int(ran.stdout) != os.getpid()
    machines = (await get(jp_fetch, "machines"))["machines"]
    assert [m["name"] for m in machines] == ["local"]
    assert [k["id"] for k in machines[0]["kernels"]] == [kernel["id"]]
    assert machines[0]["actions"] == ["start", "stop"]
    # A kernel on this machine hibernates by itself only when given a time.
    assert machines[0]["kernels"][0]["hibernate_after"] == {"seconds": 0.0, "source": "target"}
    answer = await jp_fetch(
        *API, "hibernate-after", kernel["id"], method="PUT", body=json.dumps({"seconds": 60})
    )
    after = json.loads(answer.body)
    assert after["hibernate_after"] == {"seconds": 60.0, "source": "notebook"}, after
    await jp_fetch("api", "kernels", kernel["id"], method="DELETE")


async def test_switch_to_the_ssh_host_carrying_what_can_be_carried_then_terminate(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    sessions: Any,
    channels: OpenChannels,
    events: Events,
    ssh_host: SSHTestHost,
) -> None:
    session = await sessions(LOCAL_KERNEL)
    old_id = session["kernel"]["id"]
    local = await channels(old_id)
    ran = await local.execute(
        "import threading, os\nrows = list(range(1000))\n"
        "label = 'from local'\nlock = threading.Lock()\n"
        "local_pid = os.getpid()"
    )
    assert ran.status == "ok", ran
    variables = (await get(jp_fetch, "variables", session["id"]))["variables"]
    by_name = {v["name"]: v for v in variables}
    assert by_name["rows"]["type"] == "list" and by_name["rows"]["nbytes"] > 0
    assert {"label", "lock", "local_pid"} <= set(by_name)

    report = await post(
        jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"}
    )
    assert report["previous_kernel_id"] == old_id and report["hardware"] == SSH_TARGET
    new_id = report["kernel_id"]
    assert sorted(c["name"] for c in report["carried"]) == ["label", "local_pid", "rows"]
    assert [n["name"] for n in report["not_carried"]] == ["lock"]
    assert "_thread.lock" in report["not_carried"][0]["reason"]
    # The session uses the new kernel; the old one was shut down.
    model = json.loads((await jp_fetch("api", "sessions", session["id"])).body)
    assert model["kernel"]["id"] == new_id
    assert old_id not in jp_serverapp.kernel_manager
    # The new kernel runs on the SSH host, with the variables.
    remote = await channels(new_id)
    ran = await remote.execute(
        "import os, getpass\nprint(len(rows), label, os.getpid() != local_pid, getpass.getuser())"
    )
    assert ran.status == "ok", ran
    assert ran.stdout.split() == ["1000", "from", "local", "True", ssh_host.user]
    done = await events.until(lambda e: e["type"] == "switch" and e["state"] == "done")
    assert done["kernel_id"] == new_id and done["carried"] == [c["name"] for c in report["carried"]]
    assert any(e["type"] == "launch" and e["step"] == "connect" for e in events.received)
    machines = {m["name"]: m for m in (await get(jp_fetch, "machines"))["machines"]}
    assert machines[SSH_TARGET]["state"] == "running"
    # Once reached, the host's CPUs and memory as its agent measured them fill the columns
    # its label leaves blank (the test host is this machine, seen through sshd).
    row: dict[str, Any] = {}
    for _ in range(100):
        row = {h["name"]: h for h in (await get(jp_fetch, "hardware"))["hardware"]}[SSH_TARGET]
        if row["vcpus"] is not None:
            break
        await asyncio.sleep(0.1)
    local = {h["name"]: h for h in (await get(jp_fetch, "hardware"))["hardware"]}["local"]
    assert row["vcpus"] == len(os.sched_getaffinity(0)), row
    assert row["memory_gib"] == pytest.approx(local["memory_gib"], abs=0.2), row
    assert row["gpu_memory_gib"] == 24.0  # the label's own, kept
    assert [k["id"] for k in machines[SSH_TARGET]["kernels"]] == [new_id]
    assert machines[SSH_TARGET]["idle_stop_in"] is None  # no idle stop on an SSH host
    # With an idle-stop policy (as cloud machines get), the countdown is listed.
    machine = MachineManager.instance().cached(SSH_TARGET)
    assert machine is not None
    agent = await machine.agent()
    await agent.call("set_lifetime", idle_stop=600, deadman=0, stop_command=["true"])
    machines = {m["name"]: m for m in (await get(jp_fetch, "machines"))["machines"]}
    assert 590 < machines[SSH_TARGET]["idle_stop_in"] <= 600

    ended = (await post(jp_fetch, "machines", SSH_TARGET, "terminate"))["machine"]
    assert ended["kernels_shut_down"] == [new_id]
    assert ended["agent_stopped"] is True and ended["state"] == "terminated"
    assert new_id not in jp_serverapp.kernel_manager
    assert SSH_TARGET not in {m["name"] for m in (await get(jp_fetch, "machines"))["machines"]}


async def test_switch_carries_named_variables_and_reports_missing_ones(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    sessions: Any,
    channels: OpenChannels,
) -> None:
    session = await sessions(LOCAL_KERNEL)
    kc = await channels(session["kernel"]["id"])
    assert (await kc.execute("a = 1\nb = 2")).status == "ok"
    report = await post(
        jp_fetch,
        "switch",
        session["id"],
        body={"hardware": "local", "carry": ["a", "ghost"], "keep_old": True},
    )
    assert [c["name"] for c in report["carried"]] == ["a"]
    assert report["not_carried"][0]["name"] == "ghost"
    assert "no variable named 'ghost'" in report["not_carried"][0]["reason"]
    assert report["previous_kernel_id"] in jp_serverapp.kernel_manager  # kept
    new = await channels(report["kernel_id"])
    ran = await new.execute("print(a, 'b' in globals())")
    assert ran.stdout.split() == ["1", "False"]


async def test_cloud_machines_show_their_ledger_state_price_and_cost(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    # A cloud machine as the aws provider records it (no AWS call is made by listing).
    ledger = MachineManager.instance().ledger
    began = time.time() - 3600
    ledger.add_machine(
        "m-test-1",
        "aws-g5-xlarge",
        "aws",
        owner="tester",
        instance_type="g5.xlarge",
        region="us-east-1",
        price_per_hour=1.2,
        state="pending",
    )
    ledger.set_machine_state("m-test-1", "running", at=began)
    machines = {m["name"]: m for m in (await get(jp_fetch, "machines"))["machines"]}
    cloud = machines["aws-g5-xlarge"]
    assert (cloud["provider"], cloud["state"], cloud["price_per_hour"]) == ("aws", "running", 1.2)
    assert 1.19 < cloud["cost_so_far"] < 1.25  # an hour at $1.2/h
    assert cloud["actions"] == ["stop", "terminate"]
    assert "g5.xlarge" in cloud["where"]
    picker = {h["name"]: h for h in (await get(jp_fetch, "hardware"))["hardware"]}
    assert picker["aws-g5-xlarge"]["machine_state"] == "running"  # the panel's word
    ledger.set_machine_state("m-test-1", "stopped")
    stopped = {m["name"]: m for m in (await get(jp_fetch, "machines"))["machines"]}
    assert stopped["aws-g5-xlarge"]["state"] == "stopped"
    picker = {h["name"]: h for h in (await get(jp_fetch, "hardware"))["hardware"]}
    assert picker["aws-g5-xlarge"]["machine_state"] == "stopped"
    assert stopped["aws-g5-xlarge"]["actions"] == ["start", "terminate"]
    ledger.set_machine_state("m-test-1", "terminated")
    ended = {m["name"] for m in (await get(jp_fetch, "machines"))["machines"]}
    assert "aws-g5-xlarge" not in ended
