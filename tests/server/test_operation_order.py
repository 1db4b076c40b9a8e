"""Operations on one kernel are ordered (issue 30, points 15, 16, 19, 20): a hibernation,
a wake or a switch asked for while another runs is refused with a 409 naming the one
under way; a restart or a shutdown ends a save or a wake under way and then runs, and
leaves neither a process on the host nor saved state behind. Each test reaches the
middle of an operation with a real server, kernel and host, by watching the kernel's
provisioner or its launch steps."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.provisioner import RemoteHWProvisioner
from jupyter_remote_hw.provisioner.operations import HIBERNATION, SWITCH

from ..processes import processes_under
from ..provisioner.conftest import SSH_KERNEL, SSH_TARGET, OpenChannels
from .apiclient import Fetch, failure, post

#: A state that takes a moment to save and to restore (160 MB).
BIG = "import numpy as np\nbig = np.ones(20_000_000)\nx = 42"


def provisioner_of(serverapp: Any, kernel_id: str) -> RemoteHWProvisioner:
    provisioner = serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    assert isinstance(provisioner, RemoteHWProvisioner)
    return provisioner


def stored(kernel_id: str) -> bool:
    return any(
        e.entry_id == kernel_id for e in MachineManager.instance().hibernation_store.entries()
    )


async def until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait until ``predicate()`` holds (checked every 5 ms)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "never happened"
        await asyncio.sleep(0.005)


async def left_on_host(kernel_id: str, timeout: float = 15.0) -> list[str]:
    """The processes of the kernel still running after ``timeout`` seconds at most."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (found := processes_under(kernel_id)) and loop.time() < deadline:
        await asyncio.sleep(0.1)
    return found


async def kernel_with(
    sessions: Any, channels: OpenChannels, code: str
) -> tuple[dict[str, Any], str, Any]:
    """A notebook session on the SSH target whose kernel ran ``code``: the session, its
    kernel's id and channels."""
    session = await sessions(SSH_KERNEL)
    kernel_id = session["kernel"]["id"]
    kc = await channels(kernel_id)
    assert (await kc.execute(code)).status == "ok"
    return session, kernel_id, kc


async def hibernated_kernel(
    jp_fetch: Fetch, sessions: Any, channels: OpenChannels, code: str
) -> tuple[str, Any]:
    """A kernel on the SSH target that ran ``code``, then hibernated: its id and
    channels."""
    _, kernel_id, kc = await kernel_with(sessions, channels, code)
    assert (await post(jp_fetch, "hibernate", kernel_id))["hibernated"] is True
    return kernel_id, kc


async def a_save_under_way(
    jp_fetch: Fetch,
    jp_serverapp: Any,
    sessions: Any,
    channels: OpenChannels,
    save: Callable[[str], Awaitable[Any]],
) -> tuple[dict[str, Any], str, Any, asyncio.Future[Any]]:
    """A kernel on the SSH target that ran :data:`BIG`, whose hibernation ``save(kernel
    id)`` asked for is saving now: its session, id and channels, and the save."""
    session, kernel_id, kc = await kernel_with(sessions, channels, BIG)
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    save_call = asyncio.ensure_future(save(kernel_id))
    await until(lambda: provisioner.operations.running == HIBERNATION)
    return session, kernel_id, kc, save_call


async def test_a_switch_and_a_second_hibernation_during_a_save_are_refused(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    session, kernel_id, kc, saving = await a_save_under_way(
        jp_fetch, jp_serverapp, sessions, channels, lambda k: post(jp_fetch, "hibernate", k)
    )
    code, error = await failure(
        jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"}
    )
    assert code == 409 and "a hibernation is under way" in error["message"], error
    code, error = await failure(jp_fetch, "hibernate", kernel_id)
    assert code == 409 and "a hibernation is under way" in error["message"], error

    assert (await saving)["hibernated"] is True
    assert stored(kernel_id)  # nothing deleted it: the switch never ran
    woken = await kc.execute("print(x, big.sum())", timeout=120)
    assert woken.status == "ok" and woken.stdout.split() == ["42", "20000000.0"], woken


async def test_a_hibernation_during_a_switch_is_refused(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    session, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    provisioner = provisioner_of(jp_serverapp, kernel_id)

    switching = asyncio.ensure_future(
        post(jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"})
    )
    await until(lambda: provisioner.operations.running == SWITCH)
    code, error = await failure(jp_fetch, "hibernate", kernel_id)
    assert code == 409 and "a hardware switch is under way" in error["message"], error
    switched = await switching
    assert [c["name"] for c in switched["carried"]] == ["x"], switched
    assert not stored(kernel_id)


async def test_a_restart_during_a_switch_is_refused_and_the_switch_carries_everything(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """A restart of the old kernel asked for while a switch copies its variables: a 409
    naming the switch (before, the restart stopped the kernel under the copy, and the
    switch's own shutdown of it then failed with a 500, leaving it running)."""
    session, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    provisioner = provisioner_of(jp_serverapp, kernel_id)

    switching = asyncio.ensure_future(
        post(jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"})
    )
    await until(lambda: provisioner.operations.running == SWITCH)
    refused = await jp_fetch(
        "api", "kernels", kernel_id, "restart", method="POST", body="", raise_error=False
    )
    assert refused.code == 409, refused.body
    assert "a hardware switch is under way" in json.loads(refused.body)["message"]
    switched = await switching
    assert [c["name"] for c in switched["carried"]] == ["x"], switched
    assert kernel_id not in jp_serverapp.kernel_manager
    assert await left_on_host(kernel_id) == []
    kc = await channels(switched["kernel_id"])
    assert (await kc.execute("print(x)")).stdout.strip() == "42"


async def test_a_notebook_closed_during_a_switch_leaves_no_kernel(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """The notebook's session is deleted while a switch copies its variables: the switch
    gives up with a 409 that says so, and neither kernel is left (before, the old kernel
    was told to stop under the copy: the switch answered 200 carrying nothing)."""
    session, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    provisioner = provisioner_of(jp_serverapp, kernel_id)

    switching = asyncio.ensure_future(
        failure(jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"})
    )
    await until(lambda: provisioner.operations.running == SWITCH)
    deleted = await jp_fetch("api", "sessions", session["id"], method="DELETE", raise_error=False)
    assert deleted.code == 204, deleted.body
    code, error = await switching
    assert code == 409, error
    assert error["message"] == (
        f"the kernel of {session['path']} was not switched: it was shut down while it "
        f"switched to {MachineManager.instance().target(SSH_TARGET).label}"
    )
    assert jp_serverapp.kernel_manager.list_kernel_ids() == []
    assert await left_on_host(kernel_id) == []


async def test_a_restart_during_a_shutdown_is_refused_and_nothing_is_left(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """A restart that comes while the kernel is being shut down: a 409 (before,
    jupyter_client ran both, restarted the kernel it was removing, logged a traceback
    and left the kernel running and listed); an interrupt then, a 409 too (before, a
    500 "Kernel is in a pending state")."""
    _, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    deleting = asyncio.ensure_future(
        jp_fetch("api", "kernels", kernel_id, method="DELETE", raise_error=False)
    )
    await until(lambda: not kernel.ready.done())
    refused = await jp_fetch(
        "api", "kernels", kernel_id, "restart", method="POST", body="", raise_error=False
    )
    assert refused.code == 409, refused.body
    assert "is being started, restarted or shut down" in json.loads(refused.body)["message"]
    interrupted = await jp_fetch(
        "api", "kernels", kernel_id, "interrupt", method="POST", body="", raise_error=False
    )
    assert interrupted.code in (404, 409), interrupted.body  # never jupyter_client's 500
    assert (await deleting).code == 204
    await until(lambda: kernel_id not in jp_serverapp.kernel_manager, timeout=30)
    assert await left_on_host(kernel_id) == []


async def test_a_shutdown_during_a_restart_waits_for_it(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """A DELETE of a kernel being restarted: 204 once the restart has ended, nothing left
    (before, jupyter_client read the restart's pending ``ready`` future: a 500)."""
    _, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    restarting = asyncio.ensure_future(
        jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="", raise_error=False)
    )
    await until(lambda: not kernel.ready.done())
    deleted = await jp_fetch("api", "kernels", kernel_id, method="DELETE", raise_error=False)
    assert deleted.code == 204, deleted.body
    assert (await restarting).code == 200
    assert kernel_id not in jp_serverapp.kernel_manager
    assert await left_on_host(kernel_id) == []


async def test_a_shutdown_during_a_save_ends_the_save_and_the_kernel(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    # The save must fail: the kernel is shut down.
    _, kernel_id, _, saving = await a_save_under_way(
        jp_fetch, jp_serverapp, sessions, channels, lambda k: failure(jp_fetch, "hibernate", k)
    )
    deleted = await jp_fetch("api", "kernels", kernel_id, method="DELETE")
    assert deleted.code == 204
    code, error = await saving
    assert code == 409, error
    assert (
        "was not hibernated: it was shut down while its state was being saved" in (error["message"])
    )
    assert "keeps running" not in error["message"]
    assert kernel_id not in jp_serverapp.kernel_manager
    assert not stored(kernel_id)
    assert await left_on_host(kernel_id) == []


async def test_a_restart_during_a_save_ends_the_save_and_restarts_afresh(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    _, kernel_id, kc, saving = await a_save_under_way(
        jp_fetch, jp_serverapp, sessions, channels, lambda k: failure(jp_fetch, "hibernate", k)
    )
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    restarted = await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="")
    assert restarted.code == 200
    code, error = await saving
    assert code == 409, error
    assert (
        "was not hibernated: it was restarted while its state was being saved" in (error["message"])
    )
    assert "keeps running" not in error["message"]
    # Restarted as asked: a fresh kernel, awake, with nothing saved left behind.
    assert not provisioner.hibernation.hibernated and not stored(kernel_id)
    fresh = await kc.execute("print('x' in dir())", timeout=120)
    assert fresh.status == "ok" and fresh.stdout.strip() == "False", fresh
    assert (await jp_fetch("api", "kernels", kernel_id, method="DELETE")).code == 204
    assert await left_on_host(kernel_id) == []


async def hibernated_with_a_waking_cell(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels, step: str
) -> tuple[str, Any, asyncio.Future[Any]]:
    """A kernel that hibernated with :data:`BIG`, and a cell waking it that has reached
    launch step ``step``; its id, channels and the cell's future."""
    kernel_id, kc = await hibernated_kernel(jp_fetch, sessions, channels, BIG)
    events: list[dict[str, Any]] = []
    manager = MachineManager.instance()
    manager.launch_listeners.append(events.append)
    try:
        cell = asyncio.ensure_future(kc.execute("x", timeout=120))
        await until(
            lambda: any(
                e["kernel_id"] == kernel_id and e["step"] == step and e["state"] == "started"
                for e in events
            )
        )
    finally:
        manager.launch_listeners.remove(events.append)
    return kernel_id, kc, cell


async def restart_then_shut_down(
    jp_fetch: Fetch, jp_serverapp: Any, kernel_id: str, kc: Any, cell: asyncio.Future[Any]
) -> None:
    """Restart the kernel (now), check it restarted afresh with nothing left of its
    hibernation, shut it down, and check nothing is left on the host."""
    restarted = await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="")
    assert restarted.code == 200
    answered = await cell  # the waking cell is answered, not left waiting
    assert answered.status == "error", answered
    provisioner = provisioner_of(jp_serverapp, kernel_id)
    assert not provisioner.hibernation.hibernated
    assert not stored(kernel_id)
    fresh = await kc.execute("print('x' in dir())", timeout=120)
    assert fresh.status == "ok" and fresh.stdout.strip() == "False", fresh

    assert (await jp_fetch("api", "kernels", kernel_id, method="DELETE")).code == 204
    assert await left_on_host(kernel_id) == []
    assert MachineManager.instance().ledger.get_kernel(kernel_id) is None


async def test_a_restart_during_a_wakes_restore_restarts_afresh(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    kernel_id, kc, cell = await hibernated_with_a_waking_cell(
        jp_fetch, jp_serverapp, sessions, channels, "restore state"
    )
    await restart_then_shut_down(jp_fetch, jp_serverapp, kernel_id, kc, cell)
    error = json.dumps((await cell).messages)
    assert "restarted while it was being woken" in error, error


async def test_a_restart_during_a_wakes_start_leaves_nothing_behind(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    kernel_id, kc, cell = await hibernated_with_a_waking_cell(
        jp_fetch, jp_serverapp, sessions, channels, "start kernel"
    )
    await restart_then_shut_down(jp_fetch, jp_serverapp, kernel_id, kc, cell)


async def test_a_failed_wake_says_why_in_plain_sentences(
    jp_fetch: Fetch, sessions: Any, channels: OpenChannels, tmp_path: Any
) -> None:
    kernel_id, _ = await hibernated_kernel(jp_fetch, sessions, channels, "x = 42")
    store = MachineManager.instance().hibernation_store
    far = store.entry(kernel_id).far  # on the host's disk (this machine's, for the tests)
    entry = Path(far["path"]) if far else store.entry_path(kernel_id)
    part = next(entry.glob("var-*.bin"))
    part.rename(tmp_path / part.name)  # the state is broken: the wake fails

    code, error = await failure(jp_fetch, "wake", kernel_id)
    message = error["message"]
    assert code == 502 and "could not be woken" in message, error
    assert ".." not in message, message
    # The kernel is named by its machine, not by its id.
    assert message.startswith("the kernel on Test GPU 24 GiB · testhost could not"), message
    assert kernel_id not in message, message
    (tmp_path / part.name).rename(part)


async def test_a_kernel_left_on_the_host_by_a_cut_off_wake_does_not_block_the_next(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    # A wake cut off (its server killed, its link cut) leaves a kernel under the
    # hibernated kernel's id on the host's agent; the next wake replaces it instead of
    # failing with "already exists" forever, and the shutdown leaves nothing behind.
    kernel_id, kc = await hibernated_kernel(jp_fetch, sessions, channels, "x = 42")
    manager = MachineManager.instance()

    async def leave_a_kernel() -> int:
        target = manager.target(SSH_TARGET)
        machine = await manager.machine(target, manager.steps(SSH_TARGET, kernel_id))
        agent = await machine.agent()
        started = await agent.call("start_kernel", 60, kernel_id=kernel_id, timeout=60)
        return int(started["pid"])

    left = await manager.on_home(leave_a_kernel())
    woken = await kc.execute("print(x)", timeout=120)
    assert woken.status == "ok" and woken.stdout.strip() == "42", woken
    assert not Path(f"/proc/{left}").exists() or await left_gone(left)
    assert (await jp_fetch("api", "kernels", kernel_id, method="DELETE")).code == 204
    assert await left_on_host(kernel_id) == []


async def left_gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while Path(f"/proc/{pid}").exists():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def test_a_kernel_that_dies_while_it_is_woken_keeps_its_saved_state(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    # jupyter_client's restarter must not take the half-woken kernel's death for a
    # kernel to restart afresh (which drops the saved state): the wake fails, the kernel
    # still hibernates, and the next cell wakes it with its variables.
    kernel_id, kc, cell = await hibernated_with_a_waking_cell(
        jp_fetch, jp_serverapp, sessions, channels, "restore state"
    )
    for line in processes_under(kernel_id):
        os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    failed = await cell
    assert failed.status == "error", failed
    await asyncio.sleep(3)  # the restarter polls every second
    assert provisioner_of(jp_serverapp, kernel_id).hibernation.hibernated
    assert stored(kernel_id)
    again = await kc.execute("print(x)", timeout=120)
    assert again.status == "ok" and again.stdout.strip() == "42", again


async def test_a_restart_of_the_kernel_a_switch_replaced_is_a_404_naming_why(
    jp_fetch: Fetch, jp_serverapp: Any, sessions: Any, channels: OpenChannels
) -> None:
    """Found by the lifecycle soak: a restart of the old kernel arriving just after a switch
    shut it down answered jupyter_server's bare 500 ("Exception restarting kernel")."""
    session, kernel_id, _ = await kernel_with(sessions, channels, "x = 42")
    switched = await post(
        jp_fetch, "switch", session["id"], body={"hardware": SSH_TARGET, "carry": "all"}
    )
    assert kernel_id not in jp_serverapp.kernel_manager
    for action in ("restart", "interrupt"):
        gone = await jp_fetch(
            "api", "kernels", kernel_id, action, method="POST", body="", raise_error=False
        )
        assert gone.code == 404, gone.body
        message = json.loads(gone.body)["message"]
        assert message.startswith(f"no kernel {kernel_id}: it was shut down"), message
    await jp_fetch("api", "kernels", switched["kernel_id"], method="DELETE")
