"""Kernels on hardware targets through the real jupyter_server's REST API and websocket."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import signal
from pathlib import Path
from typing import Any

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.provisioner import RemoteHWProvisioner

from ..testhosts import SSHTestHost
from .conftest import (
    LOCAL_KERNEL,
    SHOWN,
    SSH_KERNEL,
    Fetch,
    OpenChannels,
    StartKernel,
    processes_under,
)

PORTS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def provisioner_of(serverapp: Any, kernel_id: str) -> RemoteHWProvisioner:
    provisioner = serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert isinstance(provisioner, RemoteHWProvisioner)
    return provisioner


async def test_targets_are_kernelspecs(jp_fetch: Fetch, ssh_host: SSHTestHost) -> None:
    specs = json.loads((await jp_fetch("api", "kernelspecs")).body)["kernelspecs"]
    ssh = specs[SSH_KERNEL]["spec"]
    assert ssh["display_name"] == f"Python 3 · {SHOWN} · {ssh_host.alias}"
    assert ssh["metadata"]["kernel_provisioner"] == {
        "provisioner_name": "remote-hw",
        "config": {"target": "ssh-testhost"},
    }
    local = specs[LOCAL_KERNEL]["spec"]
    assert local["display_name"].startswith("Python 3 · ")
    assert local["display_name"].endswith(" · this machine")
    # The installed kernels are still there.
    assert "python3" in specs


async def test_kernel_runs_on_the_ssh_host(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_serverapp: Any,
    ssh_host: SSHTestHost,
    remote_root: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute("import os, getpass; print(os.getpid(), getpass.getuser())")
    assert ran.status == "ok", ran
    pid, user = ran.stdout.split()
    assert int(pid) != os.getpid()
    assert user == ssh_host.user == getpass.getuser()
    # The process is the one the test host's agent started from its own state directory.
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert str(remote_root) in cmdline and "ipykernel" in cmdline
    # Jupyter reaches it through local forwards on 127.0.0.1, not the host's own ports.
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    info = jp_serverapp.kernel_manager.get_kernel(kernel_id).get_connection_info()
    assert info["ip"] == "127.0.0.1"
    assert provisioner.run.host_connection is not None
    assert [info[p] for p in PORTS] != [provisioner.run.host_connection[p] for p in PORTS]
    # On the host, its channels and its transfers' bulk streams are UNIX sockets in the
    # agent's owner-only state directory.
    assert info["transport"] == "tcp" and provisioner.run.host_connection["transport"] == "ipc"
    state_dir = os.path.dirname(provisioner.run.host_connection["ip"])
    assert str(remote_root) in state_dir
    where = await kc.execute(
        "from jupyter_remote_hw.transfer.kernel_side.kernel_handler import "
        "socket_directory\nprint(socket_directory())"
    )
    assert where.stdout.strip() == state_dir, where


async def test_interrupt_keeps_state_and_restart_keeps_machine_and_ports(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("x = 41; import os; pid = os.getpid()")).status == "ok"
    first_pid = (await kc.execute("pid")).result
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    ports = [km.get_connection_info()[p] for p in PORTS]
    machine = provisioner_of(jp_serverapp, kernel_id).run.machine

    sleeping = await kc.start("import time; print('sleeping', flush=True); time.sleep(60)")
    await kc.wait_printed(sleeping, "sleeping")  # the cell's own code runs
    began = asyncio.get_running_loop().time()
    await jp_fetch("api", "kernels", kernel_id, "interrupt", method="POST", body="")
    interrupted = await kc.collect(sleeping, timeout=20)
    assert interrupted.ename == "KeyboardInterrupt"
    assert asyncio.get_running_loop().time() - began < 15
    assert (await kc.execute("x + 1")).result == "42"

    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="")
    await kc.wait_ready()
    after = await kc.execute("x")
    assert after.ename == "NameError"
    assert (await kc.execute("import os; os.getpid()")).result != first_pid
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    assert [km.get_connection_info()[p] for p in PORTS] == ports
    assert provisioner_of(jp_serverapp, kernel_id).run.machine is machine


async def test_local_target_is_a_separate_process_under_the_local_agent(
    start_kernel: StartKernel,
    channels: OpenChannels,
    short_tmp: Path,
) -> None:
    kernel_id = await start_kernel(LOCAL_KERNEL)
    kc = await channels(kernel_id)
    ran = await kc.execute("import os; print(os.getpid(), os.getppid())")
    pid, parent = map(int, ran.stdout.split())
    assert pid != os.getpid()
    parent_cmdline = Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "jupyter_remote_hw.agent" in parent_cmdline
    assert str(short_tmp / "l") in parent_cmdline


async def test_launch_steps_are_timed_and_reported(
    start_kernel: StartKernel, jp_serverapp: Any
) -> None:
    events: list[dict[str, Any]] = []
    manager = MachineManager.instance()
    manager.launch_listeners = [events.append]
    kernel_id = await start_kernel(SSH_KERNEL)
    done = [e["step"] for e in events if e["state"] == "done"]
    assert done == [
        "resolve hardware",
        "connect",
        "prepare host",
        "start kernel",
        "connect channels",
    ]
    assert all(e["kernel_id"] == kernel_id for e in events)
    assert any(e["state"] == "progress" and "agent" in e["detail"] for e in events)
    steps = provisioner_of(jp_serverapp, kernel_id).run.steps
    assert steps is not None
    assert [r.name for r in steps.records] == done
    assert all(r.ok and r.seconds >= 0 for r in steps.records)


async def test_shutdown_stops_the_kernel_and_a_stopping_server_the_idle_agent(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
    remote_root: Path,
) -> None:
    kernel_id = await start_kernel(SSH_KERNEL)
    await channels(kernel_id)
    assert any("ipykernel" in p for p in processes_under(str(remote_root)))
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    for _ in range(100):
        if not any("ipykernel" in p for p in processes_under(str(remote_root))):
            break
        await asyncio.sleep(0.1)
    # The kernel is gone; the agent stays, ready for this server's next kernel.
    left = processes_under(str(remote_root))
    assert len(left) == 1 and "serve" in left[0] and "--idle-exit" in left[0]
    assert MachineManager.instance().ledger.get_kernel(kernel_id) is None
    # When the server stops, the agent without kernels stops too.
    await jp_serverapp.extension_manager.stop_all_extensions()
    for _ in range(100):
        if not processes_under(str(remote_root)):
            break
        await asyncio.sleep(0.1)
    assert processes_under(str(remote_root)) == []


async def test_a_restart_after_the_host_refused_the_relay_attaches_it_again(
    start_kernel: StartKernel,
    channels: OpenChannels,
    jp_fetch: Fetch,
    jp_serverapp: Any,
) -> None:
    # The kernel ends on its host and the relay's next stream is refused there ("no
    # kernel"), as when a restart waits for another operation: the restart that follows
    # must relay to the new kernel, not leave every client unanswered, and must not
    # hand it what was queued for the old one (the restart's own shutdown_request).
    kernel_id = await start_kernel(SSH_KERNEL)
    kc = await channels(kernel_id)
    assert (await kc.execute("1 + 1")).result == "2"
    jp_serverapp.kernel_manager.get_kernel(kernel_id).stop_restarter()
    machine = provisioner_of(jp_serverapp, kernel_id).run.machine
    assert machine is not None
    relay = machine.relay(kernel_id)
    assert relay is not None and relay.attached
    sleeping = await kc.start("import time; time.sleep(60)")
    agent = await machine.agent()
    await agent.call("shutdown_kernel", kernel_id=kernel_id, now=True)
    for _ in range(100):
        if not relay.attached:
            break
        await asyncio.sleep(0.1)
    assert not relay.attached, "the host did not refuse the relay"

    await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="")
    assert machine.relay(kernel_id) is relay and relay.attached
    # The cell the old kernel never answered is answered, and says why.
    unanswered = await kc.collect(sleeping, timeout=10)
    assert unanswered.ename == "KernelRestarted", unanswered
    await kc.wait_ready(timeout=20)
    assert (await kc.execute("2 + 2")).result == "4"


async def test_a_kernel_killed_now_and_then_is_restarted_each_time(
    start_kernel: StartKernel, channels: OpenChannels, jp_serverapp: Any
) -> None:
    """Found by the lifecycle soak: the restarter counted every death within the launch
    timeout (180 s) of the last as one more failed restart, so a kernel killed six times
    in three minutes (an out-of-memory loop a user fixes cell by cell) was given up and
    dropped with its session. A restart now counts as done once the kernel has lived
    jupyter_client's stable time plus what its launch took."""
    kernel_id = await start_kernel(LOCAL_KERNEL)
    kc = await channels(kernel_id)
    km = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    km._restarter.restart_limit = 1  # jupyter_client's; one failed restart in a row ends it
    stable = provisioner_of(jp_serverapp, kernel_id).get_stable_start_time()
    assert stable < 20, stable
    loop = asyncio.get_running_loop()
    for kill in range(2):
        pid = int((await kc.execute("import os; os.getpid()")).result or 0)
        killed_at = loop.time()
        os.kill(pid, signal.SIGKILL)
        # Restarted: a new process answers (as with any kernel, a request sent to the
        # dead one is not answered, so only kernel_info is asked until then).
        await until_restarted(km, pid, kill)
        await kc.wait_ready(timeout=30)
        ran = await kc.execute("import os; os.getpid()")
        assert ran.status == "ok" and int(ran.result or 0) != pid, ran
        # The restarter polls every 3 s: it found the death up to 3 s after the kill,
        # and sees the stable time pass up to 3 s after it has.
        await asyncio.sleep(max(0.0, stable + 7 - (loop.time() - killed_at)))
    assert kernel_id in jp_serverapp.kernel_manager


async def until_restarted(km: Any, pid: int, kill: int) -> None:
    """Wait until the kernel manager's kernel is alive again after ``pid`` was killed."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    await asyncio.sleep(1.0)  # the restarter's poll finds it dead
    while not (km.ready.done() and await km.is_alive()):
        assert loop.time() < deadline, f"kill {kill + 1} of pid {pid}: not restarted"
        await asyncio.sleep(0.5)
