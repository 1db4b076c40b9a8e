"""A host entry of ``c.SSHProvider.hosts`` sets its own hibernate time: on the SSH test
host, through the real jupyter_server, a kernel idle past its host's time hibernates
by itself, while the same host under another entry, with only the provider's time
(never), keeps its kernel awake."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_remote_hw.providers.ssh.provider import SSHProvider

from ..provisioner.conftest import (  # noqa: F401 (fixtures)
    SSH_KERNEL,
    Fetch,
    OpenChannels,
    StartKernel,
    channels,
    hosts,
    remote_root,
    start_kernel,
    write_config,
)
from ..testhosts import SSHTestHost
from .test_hibernation_timer import hibernated, listed_after, timers_running, until_hibernated

#: The kernelspec of the same host under a second entry, without a time of its own.
NEVER_KERNEL = "remote-hw-ssh-never"


@pytest.fixture
def jp_server_config(
    ssh_host: SSHTestHost, short_tmp: Path, remote_root: Path, hosts: list[dict[str, Any]]
) -> dict[str, Any]:
    entries = [{**hosts[0], "hibernate_after": 1.5}, {**hosts[0], "name": "never"}]
    return write_config(
        short_tmp / "config.json",
        ssh_host.ssh_config,
        remote_root,
        short_tmp / "l",
        entries,
        SSHProvider={"hibernate_after": 0},
        RemoteHWExtension={"hibernate_check_interval": 0.3},
    )


@pytest.fixture(autouse=True)
async def timer(jp_serverapp: Any) -> AsyncIterator[None]:
    """The extension's timers running for the whole test."""
    async with timers_running(jp_serverapp):
        yield


async def test_a_host_entry_sets_its_own_hibernate_time(
    start_kernel: StartKernel, channels: OpenChannels, jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    timed, never = await start_kernel(SSH_KERNEL), await start_kernel(NEVER_KERNEL)
    for kernel_id in (timed, never):
        assert (await (await channels(kernel_id)).execute("x = 7")).status == "ok"
    assert await listed_after(jp_fetch, timed) == {"seconds": 1.5, "source": "target"}
    assert await listed_after(jp_fetch, never) == {"seconds": 0.0, "source": "target"}
    await until_hibernated(jp_serverapp, timed, "the kernel of the timed host did not hibernate")
    await asyncio.sleep(1.0)  # past the time, several checks
    assert not hibernated(jp_serverapp, never)


@pytest.mark.parametrize("after", [-1, "30m", True, float("inf")])
def test_a_host_entry_with_a_time_that_is_not_seconds_is_refused(after: Any) -> None:
    with pytest.raises(TraitError) as refused:
        SSHProvider(hosts=[{"host": "box", "hibernate_after": after}])
    assert "'box' has 'hibernate_after'" in str(refused.value)
    assert "give seconds, 0 or more" in str(refused.value)
