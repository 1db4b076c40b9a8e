"""Kernels run by the agent: real ipykernel processes, driven by jupyter_client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.agent_client import AgentError

from .agentclient import Agent, AgentClient, eventually, running, wait_until
from .kernelclient import (
    evaluate,
    execute,
    kernel_client,
    shell_reply,
    value_of,
    wait_for_stream,
)


async def start(agent: Agent, client: AgentClient, **args: Any) -> dict[str, Any]:
    started = await client.call("start_kernel", **args)
    agent.kernel_pids.add(started["pid"])
    return started


async def state_of(client: AgentClient, kernel_id: str) -> dict[str, Any]:
    return await client.call("kernel_status", kernel_id=kernel_id)


def processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes() and running(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def tcp_listeners(pid: int) -> list[int]:
    """The TCP ports a process listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


async def test_start_kernel_connection_file_and_ports(agent: Agent, client: AgentClient) -> None:
    started = await start(agent, client, kernel_id="k-1")
    assert started["kernel_id"] == "k-1"
    info = started["connection"]
    # An ipykernel listens on UNIX sockets in the owner-only state directory, not on TCP.
    assert info["transport"] == "ipc"
    assert os.path.dirname(info["ip"]) == str(agent.state_dir)
    assert stat.S_IMODE(agent.state_dir.stat().st_mode) == 0o700
    assert info["signature_scheme"] == "hmac-sha256"
    assert info["kernel_name"] == ""
    assert len(info["key"]) == 64
    assert [info[name] for name in CHANNELS] == [1, 2, 3, 4, 5]
    for name in CHANNELS:
        path = f"{info['ip']}-{info[name]}"
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
    # ipykernel's own pipe for the output of forked subprocesses is the one TCP
    # listener left: it only receives, and drops what lacks its random secret.
    assert len(tcp_listeners(started["pid"])) <= 1

    path = agent.kernels_dir / "k-1.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    on_disk = json.loads(path.read_text())
    assert {key: on_disk[key] for key in info} == info
    assert int((agent.kernels_dir / "k-1.pid").read_text()) == started["pid"]

    status = await state_of(client, "k-1")
    assert status["alive"] is True
    assert status["pid"] == started["pid"]
    assert status["exit_code"] is None
    assert status["connection"] == info
    assert status["execution_state"] == "idle"
    assert (await client.call("list_kernels"))["kernels"] == [status]

    # The kernel is a session of its own: it outlives the agent's session and signals.
    assert os.getsid(started["pid"]) == started["pid"]
    assert info["key"] not in (agent.state_dir / "agent.log").read_text()

    # Shutting down removes the sockets with the connection file.
    await client.call("shutdown_kernel", kernel_id="k-1", now=True)
    assert not [
        p for p in os.listdir(agent.state_dir) if p.startswith(os.path.basename(info["ip"]))
    ]


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another user needs root")
async def test_another_user_of_the_host_cannot_reach_a_kernel(
    agent: Agent, client: AgentClient
) -> None:
    started = await start(agent, client)
    info = started["connection"]
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "else:\n"
        "    print('connected')\n"
    )
    for name in ("iopub_port", "shell_port"):
        path = f"{info['ip']}-{info[name]}"
        done = await asyncio.to_thread(
            subprocess.run,
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                probe,
                path,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        out = done.stdout.strip()
        assert out == "PermissionError", (name, out)
        # The owner still can.
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)


async def test_generated_id_and_code_runs_in_the_kernel(agent: Agent, client: AgentClient) -> None:
    started = await start(agent, client)
    assert uuid.UUID(started["kernel_id"]).version == 4
    with kernel_client(started["connection"]) as kc:
        assert execute(kc, "answer = 6 * 7")["status"] == "ok"
        assert value_of(kc, "answer") == "42"
        assert value_of(kc, "__import__('os').getpid()") == str(started["pid"])


async def test_env_and_cwd_reach_the_kernel(
    agent: Agent, client: AgentClient, workdir: Path
) -> None:
    started = await start(agent, client, env={"RHW_TEST_VALUE": "hello"}, cwd=str(workdir))
    with kernel_client(started["connection"]) as kc:
        assert value_of(kc, "__import__('os').environ['RHW_TEST_VALUE']") == "'hello'"
        assert value_of(kc, "__import__('os').getcwd()") == repr(str(workdir))
        assert value_of(kc, "'JPY_PARENT_PID' in __import__('os').environ") == "False"


async def test_interrupt_keeps_state(agent: Agent, client: AgentClient) -> None:
    started = await start(agent, client)
    kid = started["kernel_id"]
    with kernel_client(started["connection"]) as kc:
        execute(kc, "x = 'still here'")
        msg_id = kc.execute("import time; print('sleeping', flush=True); time.sleep(60)")

        async def busy() -> bool:
            return bool((await state_of(client, kid))["execution_state"] == "busy")

        assert await eventually(busy, 20)
        # Interrupt once the cell's own code runs: a signal that lands while the
        # kernel is still setting the cell up is not this test's subject.
        await asyncio.to_thread(wait_for_stream, kc, msg_id, "sleeping", 30)
        assert await client.call("interrupt_kernel", kernel_id=kid) == {}
        reply = shell_reply(kc, msg_id, timeout=20)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert value_of(kc, "x") == "'still here'"
    status = await state_of(client, kid)
    assert status["alive"] is True
    assert status["pid"] == started["pid"]


async def test_signal_term_ends_the_process_but_keeps_the_kernel_restartable(
    agent: Agent, client: AgentClient
) -> None:
    started = await start(agent, client)
    kid = started["kernel_id"]
    assert await client.call("signal_kernel", kernel_id=kid, signal="SIGTERM") == {}

    async def dead() -> bool:
        return (await state_of(client, kid))["alive"] is False

    assert await eventually(dead, 20)
    restarted = await start_again(agent, client, kid)
    assert restarted["connection"] == started["connection"]
    with pytest.raises(AgentError) as err:
        await client.call("signal_kernel", kernel_id=kid, signal="SIGNOPE")
    assert err.value.kind == "bad_request" and "SIGNOPE" in str(err.value)


async def start_again(agent: Agent, client: AgentClient, kernel_id: str) -> dict[str, Any]:
    restarted = await client.call("restart_kernel", kernel_id=kernel_id)
    agent.kernel_pids.add(restarted["pid"])
    return restarted


async def test_restart_keeps_ports_and_key_and_drops_state(
    agent: Agent, client: AgentClient
) -> None:
    started = await start(agent, client)
    kid = started["kernel_id"]
    path = agent.kernels_dir / f"{kid}.json"
    with kernel_client(started["connection"]) as kc:
        execute(kc, "x = 1")
        restarted = await client.call("restart_kernel", kernel_id=kid)
        agent.kernel_pids.add(restarted["pid"])
        assert restarted["kernel_id"] == kid
        assert restarted["connection"] == started["connection"]
        assert restarted["pid"] != started["pid"]
        assert wait_until(lambda: not running(started["pid"]), 10)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        # The same client, on the same ports, reaches the new kernel process.
        kc.wait_for_ready(timeout=60)
        assert evaluate(kc, "x")["ename"] == "NameError"
        assert value_of(kc, "__import__('os').getpid()") == str(restarted["pid"])
    status = await state_of(client, kid)
    assert (status["pid"], status["alive"], status["connection"]) == (
        restarted["pid"],
        True,
        started["connection"],
    )


async def test_execution_state_follows_iopub(
    agent: Agent, client: AgentClient, tmp_path: Path
) -> None:
    started = await start(agent, client)
    kid = started["kernel_id"]
    with kernel_client(started["connection"]) as kc:
        execute(kc, "import time")

        async def idle() -> dict[str, Any] | None:
            status = await state_of(client, kid)
            return status if status["execution_state"] == "idle" else None

        # The agent reads the idle status on its own IOPub socket: under load it may
        # come a moment after the client's.
        before = await eventually(idle, 20)
        assert before is not None

        # The cell stays busy until the test releases it, however slow the machine.
        release = tmp_path / "release"
        msg_id = kc.execute(
            f"while not __import__('os').path.exists({str(release)!r}): time.sleep(0.02)"
        )

        async def busy() -> dict[str, Any] | None:
            status = await state_of(client, kid)
            return status if status["execution_state"] == "busy" else None

        during = await eventually(busy, 20)
        assert during is not None
        assert during["last_activity"] > before["last_activity"]

        # A control-channel request answered meanwhile does not make the kernel look idle.
        control = kc.session.msg("kernel_info_request")
        kc.control_channel.send(control)
        while (
            kc.get_control_msg(timeout=20)["parent_header"].get("msg_id")
            != control["header"]["msg_id"]
        ):
            pass
        await asyncio.sleep(0.3)
        assert (await state_of(client, kid))["execution_state"] == "busy"

        await asyncio.sleep(2.1)
        release.touch()
        shell_reply(kc, msg_id)
        after = await eventually(idle, 20)
        assert after is not None
        assert after["last_activity"] - during["last_activity"] > 2.0


async def test_kernel_outlives_client_connection(agent: Agent) -> None:
    """A started kernel keeps running, and keeps its state, after its client hangs up.

    (A start whose client hangs up before the answer is ended instead: see
    tests/agent/test_stale_starts.py.)
    """
    first = await agent.client()
    started = await start(agent, first, kernel_id="lasting")
    with kernel_client(started["connection"]) as kc:
        execute(kc, "x = 'kept'")
    await first.close()

    second = await agent.client()
    try:
        assert running(started["pid"])
        status = await state_of(second, "lasting")
        assert status["alive"] is True
        with kernel_client(started["connection"]) as kc:
            assert value_of(kc, "x") == "'kept'"
    finally:
        await second.close()


async def test_shutdown_kernel_leaves_nothing_behind(agent: Agent, client: AgentClient) -> None:
    started = await start(agent, client, kernel_id="doomed")
    with kernel_client(started["connection"]) as kc:
        execute(kc, "import subprocess; child = subprocess.Popen(['sleep', '300'])")
        child_pid = int(value_of(kc, "child.pid"))
    agent.extra_pids.add(child_pid)
    assert running(child_pid)
    result = await client.call("shutdown_kernel", kernel_id="doomed")
    assert result["exit_code"] is not None
    assert not running(started["pid"])
    assert wait_until(lambda: not running(child_pid), 10)
    assert sorted(p.name for p in agent.kernels_dir.iterdir()) == []
    with pytest.raises(AgentError) as err:
        await state_of(client, "doomed")
    assert err.value.kind == "unknown_kernel"
    assert (await client.call("list_kernels"))["kernels"] == []


async def test_shutdown_now_kills_at_once(agent: Agent, client: AgentClient) -> None:
    started = await start(agent, client)
    result = await client.call("shutdown_kernel", kernel_id=started["kernel_id"], now=True)
    assert result["exit_code"] == -9
    assert not running(started["pid"])


async def test_unknown_kernel(client: AgentClient) -> None:
    for op in ("kernel_status", "interrupt_kernel", "restart_kernel", "shutdown_kernel"):
        response = await client.response(op, kernel_id="no-such-kernel")
        assert response["ok"] is False
        assert response["kind"] == "unknown_kernel"
        assert "no-such-kernel" in response["error"]


async def test_duplicate_and_unsafe_kernel_ids(agent: Agent, client: AgentClient) -> None:
    await start(agent, client, kernel_id="twice")
    with pytest.raises(AgentError) as err:
        await client.call("start_kernel", kernel_id="twice")
    assert err.value.kind == "kernel_exists"
    with pytest.raises(AgentError) as err:
        await client.call("start_kernel", kernel_id="../escape")
    assert err.value.kind == "bad_request"


def make_bare_venv(workdir: Path) -> Path:
    venv = workdir / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-c", "import ipykernel"], capture_output=True, check=False
    )
    assert probe.returncode != 0, "the bare venv unexpectedly has ipykernel"
    return python


async def test_python_without_ipykernel_is_a_clear_error(
    agent: Agent, client: AgentClient, workdir: Path
) -> None:
    python = make_bare_venv(workdir)
    response = await client.response(
        "start_kernel", argv=[str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    )
    assert response["ok"] is False
    assert response["kind"] == "no_ipykernel"
    message = response["error"]
    assert f"ipykernel is not installed for {python} on {os.uname().nodename}" in message
    assert f"`{python} -m pip install ipykernel`" in message
    assert list(agent.kernels_dir.iterdir()) == []
    assert processes_with(str(python)) == []


async def test_kernel_that_dies_reports_its_log(agent: Agent, client: AgentClient) -> None:
    marker = f"rhw-{uuid.uuid4().hex}"
    code = f"import sys; print('{marker} going down'); sys.exit(3)"
    response = await client.response(
        "start_kernel", argv=[sys.executable, "-c", code, "{connection_file}"]
    )
    assert response["kind"] == "kernel_died"
    assert "exited with code 3" in response["error"]
    assert f"{marker} going down" in response["error"]
    assert list(agent.kernels_dir.iterdir()) == []


async def test_kernel_that_never_answers_times_out(agent: Agent, client: AgentClient) -> None:
    marker = f"rhw-{uuid.uuid4().hex}"
    code = f"import time; time.sleep(120)  # {marker}"
    response = await client.response(
        "start_kernel", argv=[sys.executable, "-c", code, "{connection_file}"], timeout=1.5
    )
    assert response["kind"] == "kernel_timeout"
    assert "did not answer within 2 s" in response["error"]
    assert wait_until(lambda: processes_with(marker) == [], 10)
    assert list(agent.kernels_dir.iterdir()) == []


async def test_missing_cwd_is_a_bad_request(client: AgentClient, workdir: Path) -> None:
    response = await client.response("start_kernel", cwd=str(workdir / "nowhere"))
    assert response["kind"] == "bad_request"
    assert "nowhere" in response["error"]


async def test_agent_restart_readopts_running_kernels(
    agent: Agent, client: AgentClient, start_agent: Callable[..., Agent]
) -> None:
    kept = await start(agent, client, kernel_id="kept")
    lost = await start(agent, client, kernel_id="lost")
    with kernel_client(kept["connection"]) as kc:
        execute(kc, "x = 'survived'")
    await client.call("shutdown_agent", kill_kernels=False)
    assert wait_until(lambda: not running(agent.pid), 20)
    assert running(kept["pid"]) and running(lost["pid"])
    os.killpg(lost["pid"], 9)  # dies while no agent watches
    assert wait_until(lambda: not running(lost["pid"]), 10)

    second = start_agent()
    assert second.pid != agent.pid
    conn = await second.client()
    try:
        kernels = (await conn.call("list_kernels"))["kernels"]
        assert [k["kernel_id"] for k in kernels] == ["kept"]
        assert kernels[0]["pid"] == kept["pid"]
        assert kernels[0]["alive"] is True
        assert kernels[0]["connection"] == kept["connection"]
        assert (
            sorted(p.name for p in second.kernels_dir.iterdir() if p.name.startswith("lost")) == []
        )

        async def idle() -> bool:
            return bool((await state_of(conn, "kept"))["execution_state"] == "idle")

        assert await eventually(idle, 20)
        with kernel_client(kept["connection"]) as kc:
            assert value_of(kc, "x") == "'survived'"
            msg_id = kc.execute("import time; time.sleep(2)")

            async def busy() -> bool:
                return bool((await state_of(conn, "kept"))["execution_state"] == "busy")

            assert await eventually(busy, 20)
            shell_reply(kc, msg_id)
        assert await eventually(idle, 20)

        assert await conn.call("interrupt_kernel", kernel_id="kept") == {}
        result = await conn.call("shutdown_kernel", kernel_id="kept")
        assert result["exit_code"] is None  # not the new agent's child
        assert not running(kept["pid"])
        assert list(second.kernels_dir.iterdir()) == []
    finally:
        await conn.close()


async def test_kernels_survive_an_agent_crash_and_are_readopted(
    agent: Agent, client: AgentClient, start_agent: Callable[..., Agent]
) -> None:
    started = await start(agent, client, kernel_id="survivor")
    with kernel_client(started["connection"]) as kc:
        execute(kc, "x = 'after the crash'")
    os.kill(agent.pid, 9)  # no clean-up at all: stale socket, pid file and lock holder gone
    assert wait_until(lambda: not running(agent.pid), 10)
    assert running(started["pid"])

    second = start_agent()
    assert second.pid != agent.pid
    conn = await second.client()
    try:
        status = await state_of(conn, "survivor")
        assert (status["pid"], status["alive"]) == (started["pid"], True)
        with kernel_client(started["connection"]) as kc:
            assert value_of(kc, "x") == "'after the crash'"
        restarted = await conn.call("restart_kernel", kernel_id="survivor")
        second.kernel_pids.add(restarted["pid"])
        assert restarted["connection"] == started["connection"]
        assert not running(started["pid"])
    finally:
        await conn.close()
