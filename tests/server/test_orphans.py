"""A %%remote kernel outlives a local kernel that was SIGKILLed; the reaper shuts it down
on its host, and leaves alone the kernels of live local kernels and of other machines."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from jupyter_client.manager import KernelManager
from traitlets.config import Config

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.processes import process_alive
from jupyter_remote_hw.server.orphans import orphaned_kernels, reap_orphans

from ..agent.kernelclient import shell_reply
from ..notebook.test_magics import TARGET, env  # noqa: F401 (env: a fixture)
from ..notebooks import local_kernel


def dead_pid() -> int:
    """The pid of a process that has ended."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


async def test_the_kernels_of_a_killed_local_kernel_are_reaped(
    env: dict[str, str], short_tmp: Path
) -> None:
    with local_kernel(env, short_tmp, "%load_ext jupyter_remote_hw") as (local, kc):
        cell = kc.execute(f"%%remote {TARGET}\nimport os\nprint('remote pid', os.getpid())")
        remote_pid = 0
        deadline = time.monotonic() + 90
        while not remote_pid and time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=90)
            text = msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""
            if msg["parent_header"].get("msg_id") == cell and "remote pid" in text:
                remote_pid = int(text.split()[-1])
        assert shell_reply(kc, cell, 90)["content"]["status"] == "ok"
        await reap_orphans_of_killed(local, remote_pid, env)


async def reap_orphans_of_killed(
    local: KernelManager, remote_pid: int, kernel_env: dict[str, str]
) -> None:
    """Check the ledger while ``local`` runs, SIGKILL it, then reap what it left."""
    config = json.loads(
        (Path(kernel_env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").read_text()
    )
    manager = MachineManager(config=Config(config))
    try:
        (record,) = manager.ledger.kernels()
        assert record.owner.startswith("magic:") and record.target == TARGET
        assert orphaned_kernels(manager) == []  # its local kernel still runs

        # SIGKILL: the local kernel gets no chance to shut its remote kernel down.
        os.kill(local.provisioner.process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        local.shutdown_kernel(now=True)
        assert process_alive(remote_pid)
        manager.ledger.put_kernel(
            "k-elsewhere",
            "remote-hw-" + TARGET,
            TARGET,
            {},
            owner=f"magic:another-machine:{dead_pid()}",
        )
        assert [r.kernel_id for r in orphaned_kernels(manager)] == [record.kernel_id]

        assert await reap_orphans(manager) == [record.kernel_id]
        deadline = time.monotonic() + 15
        while process_alive(remote_pid):
            assert time.monotonic() < deadline, "the orphaned kernel still runs"
            await asyncio.sleep(0.2)
        assert [r.kernel_id for r in manager.ledger.kernels()] == ["k-elsewhere"]
        assert await reap_orphans(manager) == []
    finally:
        await manager.close()


async def test_a_kernel_its_host_no_longer_has_is_forgotten(
    env: dict[str, str], short_tmp: Path
) -> None:
    config = json.loads(
        (Path(env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json").read_text()
    )
    manager = MachineManager(config=Config(config))
    try:
        owner = f"magic:{os.uname().nodename}:{dead_pid()}"
        manager.ledger.put_kernel("k-gone", "remote-hw-" + TARGET, TARGET, {}, owner=owner)
        manager.ledger.put_kernel(
            "k-nowhere", "remote-hw-ssh-removed", "ssh-removed", {}, owner=owner
        )
        assert await reap_orphans(manager) == ["k-gone"]
        # A target no longer configured cannot be reached from here: its row stays.
        assert [r.kernel_id for r in manager.ledger.kernels()] == ["k-nowhere"]
    finally:
        await manager.close()
