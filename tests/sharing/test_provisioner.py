"""A teammate's Jupyter kernel attached to the shared kernel: never launches, never stops it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.factory import KernelProvisionerFactory

from jupyter_remote_hw.sharing import COLLABORATOR, VIEWER
from jupyter_remote_hw.sharing.provisioner import (
    PROVISIONER_NAME,
    SharedKernelProvisioner,
    write_kernelspec,
)

from ..testhosts import NetnsTestHost
from .conftest import OwnedKernel, own_kernel, run


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    """The provisioner's entry point, as an install of the package registers it."""
    factory = KernelProvisionerFactory.instance()
    before = factory.provisioners.get(PROVISIONER_NAME)
    factory.provisioners[PROVISIONER_NAME] = EntryPoint(
        name=PROVISIONER_NAME,
        group="jupyter_client.kernel_provisioners",
        value="jupyter_remote_hw.sharing.provisioner:SharedKernelProvisioner",
    )
    yield
    if before is None:  # not installed: leave the factory as it was
        factory.provisioners.pop(PROVISIONER_NAME, None)
    else:
        factory.provisioners[PROVISIONER_NAME] = before


async def attached_manager(
    owned: OwnedKernel, teammate_key: Path, tmp_path: Path, role: str
) -> AsyncKernelManager:
    granted = await owned.share(teammate_key, role, expires_in=3600)
    path = granted.share_file.write(tmp_path / "share.json")
    spec_dir = write_kernelspec(path, str(teammate_key), tmp_path / "kernels")
    manager = AsyncKernelManager(
        kernel_name=spec_dir.name,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]),
        connection_file=str(tmp_path / "kernel-attached.json"),
    )
    await manager.start_kernel()
    assert isinstance(manager.provisioner, SharedKernelProvisioner)
    return manager


async def client_run(
    manager: AsyncKernelManager, code: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    kc = manager.client()
    kc.start_channels()
    outputs: list[dict[str, Any]] = []
    try:
        await kc.wait_for_ready(timeout=30)
        reply = await kc.execute_interactive(code, timeout=30, output_hook=outputs.append)
    finally:
        kc.stop_channels()
    return reply["content"], outputs


async def test_collaborator_kernel_attaches_and_detaching_keeps_the_owners_kernel(
    owned: OwnedKernel,
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    before = sorted(k["kernel_id"] for k in (await owned.agent.call("list_kernels"))["kernels"])
    manager = await attached_manager(owned, teammate_key, tmp_path, COLLABORATOR)
    try:
        content, _ = await client_run(manager, "from_teammates_jupyter = 'yes'")
        assert content["status"] == "ok"
        assert (await run(owned.client, "assert from_teammates_jupyter == 'yes'"))["status"] == "ok"
        # Attaching started nothing on the host.
        after = (await owned.agent.call("list_kernels"))["kernels"]
        assert sorted(k["kernel_id"] for k in after) == before == [owned.kernel_id]
        await manager.shutdown_kernel()
    finally:
        if manager.has_kernel:
            await manager.shutdown_kernel(now=True)
    status = await owned.agent.call("kernel_status", kernel_id=owned.kernel_id)
    assert status["alive"]
    assert (await run(owned.client, "assert from_teammates_jupyter == 'yes'"))["status"] == "ok"


async def test_viewer_kernel_refuses_to_run_code_with_a_clear_message(
    owned: OwnedKernel,
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    manager = await attached_manager(owned, teammate_key, tmp_path, VIEWER)
    try:
        content, outputs = await client_run(manager, "x = 1")
        assert content["status"] == "error"
        errors = [m["content"]["evalue"] for m in outputs if m["msg_type"] == "error"]
        assert errors and errors[0].startswith("read-only share:")
        await manager.shutdown_kernel()
    finally:
        if manager.has_kernel:
            await manager.shutdown_kernel(now=True)
    assert (await owned.agent.call("kernel_status", kernel_id=owned.kernel_id))["alive"]


async def test_a_revoked_share_reads_as_ended_with_the_reason(
    owned: OwnedKernel,
    teammate_key: Path,
    tmp_path: Path,
) -> None:
    manager = await attached_manager(owned, teammate_key, tmp_path, COLLABORATOR)
    try:
        assert await manager.is_alive()
        provisioner = manager.provisioner
        assert isinstance(provisioner, SharedKernelProvisioner)
        share_id = provisioner.attachment.share.share_id if provisioner.attachment else ""
        await owned.sharer.revoke(owned.machine, share_id)
        deadline = asyncio.get_running_loop().time() + 10
        while await manager.is_alive():
            assert asyncio.get_running_loop().time() < deadline, "still alive after revoke"
            await asyncio.sleep(0.2)
        assert "the share was revoked or has expired" in provisioner.ended_reason
    finally:
        await manager.shutdown_kernel(now=True)


async def test_a_collaborator_kernel_survives_a_cut_link(
    ns_host: NetnsTestHost, teammate_key: Path, tmp_path: Path, short_tmp: Path
) -> None:
    """A cut of the link between the teammate and the owner's host drops the teammate's
    SSH connection; the share is still good, so the kernel here attaches again once the
    link is back, on the same ports, with the owner's variables (before, it read as ended
    and the teammate's server dropped it)."""
    async with own_kernel(ns_host, short_tmp) as owned:
        assert (await run(owned.client, "from_owner = 41"))["status"] == "ok"
        manager = await attached_manager(owned, teammate_key, tmp_path, COLLABORATOR)
        try:
            provisioner = manager.provisioner
            assert isinstance(provisioner, SharedKernelProvisioner)
            assert provisioner.attachment is not None and provisioner.attachment.conn is not None
            ports = dict(provisioner.attachment.local_ports)
            ns_host.link.cut()
            try:
                provisioner.attachment.conn.close()  # what the cut does, once noticed
                for _ in range(3):
                    assert await manager.is_alive()  # the link is down, the share is good
                    await asyncio.sleep(0.5)
            finally:
                ns_host.link.restore()
            deadline = asyncio.get_running_loop().time() + 30
            while provisioner.attachment.conn is None or provisioner.attachment.conn.is_closed():
                assert asyncio.get_running_loop().time() < deadline, "never attached again"
                assert await manager.is_alive()
                await asyncio.sleep(0.2)
            assert provisioner.attachment.local_ports == ports
            reply, outputs = await client_run(manager, "print(from_owner + 1)")
            assert reply["status"] == "ok", reply
            assert "42" in "".join(o["content"].get("text", "") for o in outputs)
        finally:
            await manager.shutdown_kernel(now=True)
