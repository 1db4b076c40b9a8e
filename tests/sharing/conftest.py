"""A kernel on the loopback sshd test host, its owner's client, and a teammate's key."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.asynchronous.client import AsyncKernelClient
from traitlets.config import Config

from jupyter_remote_hw.agent_client import AgentClient
from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.providers.ssh.provider import SSHMachine
from jupyter_remote_hw.sharing.owner import ShareOwner

from ..conftest import TEST_TRANSPORT
from ..testhosts import SSHTestHost, free_port, keygen


@dataclass
class OwnedKernel:
    """The owner's kernel on the test host and what reaches it."""

    manager: MachineManager
    machine: SSHMachine
    agent: AgentClient
    kernel_id: str
    connection: dict[str, Any]
    client: AsyncKernelClient
    sharer: ShareOwner

    async def share(self, teammate_key: Path, role: str, expires_in: float) -> Any:
        """Share this kernel with the holder of ``teammate_key`` (its ``.pub`` beside it)."""
        return await self.sharer.share(
            self.machine,
            self.kernel_id,
            teammate_key.with_suffix(".pub").read_text(),
            role,
            expires_in=expires_in,
        )


async def started_client(info: dict[str, Any]) -> AsyncKernelClient:
    """A started, ready kernel client on ``info``."""
    kc = AsyncKernelClient()
    kc.load_connection_info(info)  # type: ignore[arg-type]
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    return kc


def stop_client(kc: AsyncKernelClient) -> None:
    """Stop a client's channels and its context."""
    kc.stop_channels()
    kc.context.destroy(linger=0)


async def run(kc: AsyncKernelClient, code: str, timeout: float = 30) -> dict[str, Any]:
    """Execute ``code``; return the reply's content."""
    reply = await kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: None)
    content: dict[str, Any] = reply["content"]
    return content


@contextlib.asynccontextmanager
async def own_kernel(host: SSHTestHost, state: Path) -> AsyncIterator[OwnedKernel]:
    """A kernel the owner starts on ``host``; every share is dropped and all stopped after."""
    config = Config(
        {
            "MachineManager": {"ledger_path": str(state / "ledger.sqlite3")},
            "TransportManager": {"ssh_config_files": [str(host.ssh_config)], **TEST_TRANSPORT},
            "SSHProvider": {
                "hosts": [{"host": host.alias, "python": sys.executable, "root": str(state / "r")}],
                "include_ssh_config": False,
            },
        }
    )
    manager = MachineManager(config=config)
    target = "ssh-" + host.alias
    machine = await manager.machine(manager.target(target), manager.steps(target, "share"))
    assert isinstance(machine, SSHMachine)
    agent = await machine.agent()
    started = await agent.call("start_kernel", wait=90, timeout=60)
    kernel_id, connection = str(started["kernel_id"]), dict(started["connection"])
    local = await machine.expose(kernel_id, connection)
    client = await started_client({**local, "key": connection["key"]})
    sharer = ShareOwner(manager.ledger, authorized_keys=str(host.authorized_keys))
    try:
        yield OwnedKernel(manager, machine, agent, kernel_id, connection, client, sharer)
    finally:
        stop_client(client)
        agent = await machine.agent()  # the agent may have been restarted meanwhile
        for share in (await agent.call("list_shares"))["shares"]:
            await agent.call("drop_share", share_id=share["share_id"])
        await agent.call("shutdown_agent", kill_kernels=True)
        await asyncio.sleep(0.5)
        await manager.close()


@pytest.fixture
async def owned(ssh_host: SSHTestHost, short_tmp: Path) -> AsyncIterator[OwnedKernel]:
    """A kernel the owner started on the test host; every share is revoked afterwards."""
    async with own_kernel(ssh_host, short_tmp) as kernel:
        yield kernel


@pytest.fixture(scope="module")
def hardened_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHTestHost]:
    """A test host whose sshd allows UNIX-socket forwards one way only, as docs/sharing.md
    recommends for shared hosts (``AllowStreamLocalForwarding local``)."""
    host = SSHTestHost(
        alias="hardened",
        address="127.0.0.1",
        port=free_port(),
        user=getpass.getuser(),
        root=tmp_path_factory.mktemp("hardened") / "h",
    )
    host.prepare()
    config = host.root / "sshd_config"
    config.write_text(config.read_text() + "AllowStreamLocalForwarding local\n")
    host.start()
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def teammate_key(tmp_path: Path) -> Path:
    """The teammate's own private key (its .pub is what the owner shares with)."""
    return keygen(tmp_path / "teammate", comment="ada@laptop")


ShareFactory = Callable[..., Awaitable[Any]]
