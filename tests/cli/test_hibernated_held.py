"""``jupyter remote-hw hibernated --delete`` of a kernel a running Jupyter server still has
(its own process, with a kernel on the loopback SSH host): the command says so, and the
kernel's next cells are told at once that its state was deleted and what to do, instead
of a wake that fails and asks to retry forever (issue 30, point 11)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ..provisioner.conftest import SSH_KERNEL
from ..serverprocess import Server, ssh_host_server
from ..testhosts import SSHTestHost
from .conftest import no_credentials  # noqa: F401 (fixture)
from .test_hibernate_wake import cli, kernel_row


@pytest.fixture
async def server(
    ssh_host: SSHTestHost, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Server]:
    """A Jupyter server offering the SSH test host, whose Jupyter paths the CLI shares."""
    monkeypatch.delenv("JUPYTER_TOKEN", raising=False)
    async with ssh_host_server(ssh_host, short_tmp, monkeypatch) as server:
        yield server


@pytest.mark.timeout(240)
async def test_deleting_the_state_of_a_kernel_a_server_has(server: Server) -> None:
    kernel_id = (await server.api("kernels", method="POST", body={"name": SSH_KERNEL}))["id"]
    kc = await server.channels(kernel_id)
    assert (await kc.execute("x = 42")).status == "ok"
    code, out, err = await cli("hibernate", kernel_id[:8])
    assert code == 0, (out, err)

    code, out, err = await cli("hibernated", "--delete", kernel_id[:8], "--yes")
    assert code == 0, (out, err)
    assert f"deleted the saved state of kernel {kernel_id}" in out, out
    assert f"the Jupyter server at {server.url}/ still has kernel {kernel_id}" in out, out
    assert "restart the kernel there" in out, out

    for _ in range(2):
        failed = await kc.execute("x", timeout=30)
        assert failed.ename == "KernelWakeError", failed
        error = next(m for m in failed.messages if m["header"]["msg_type"] == "error")
        text = error["content"]["evalue"]
        assert "saved state was deleted" in text and "run the cell again" not in text, text
    _, row = await kernel_row(server, kernel_id)
    assert "saved state was deleted" in row["hibernated"]["wake_error"], row
    await kc.close()
