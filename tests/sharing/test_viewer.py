"""A viewer sees the owner's outputs as they happen and cannot run code."""

from __future__ import annotations

import asyncio
from pathlib import Path
from queue import Empty
from typing import Any

import asyncssh
import pytest

from jupyter_remote_hw.sharing import VIEWER
from jupyter_remote_hw.sharing.join import Attachment

from ..testhosts import SSHTestHost
from .conftest import OwnedKernel, run, started_client, stop_client


async def test_viewer_sees_outputs_and_gets_read_only_message(
    owned: OwnedKernel,
    teammate_key: Path,
    ssh_host: SSHTestHost,
) -> None:
    granted = await owned.share(teammate_key, VIEWER, expires_in=3600)
    line = next(
        ln
        for ln in ssh_host.authorized_keys.read_text().splitlines()
        if ln.endswith(granted.record.share_id)
    )
    assert line.count("permitopen=") == 1
    async with Attachment(granted.share_file, teammate_key) as attachment:
        info = attachment.connection_info()
        assert info["key"] == ""
        viewer = await started_client(info)
        try:
            # The owner's outputs arrive on the viewer's IOPub as they happen
            # (the first prints may go out before the subscription reaches the kernel).
            seen: list[str] = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not any("owner-output-" in text for text in seen):
                assert loop.time() < deadline, "the viewer never saw the owner's output"
                await run(owned.client, "print('owner-output-' + str(6 * 7))")
                try:
                    while True:
                        msg = await viewer.get_iopub_msg(timeout=0.5)
                        if msg["msg_type"] == "stream":
                            seen.append(msg["content"]["text"])
                except Empty:
                    pass
            assert any("owner-output-42" in text for text in seen)

            # Running code is refused with a clear message, in the reply and the cell's output.
            outputs: list[dict[str, Any]] = []
            reply = await viewer.execute_interactive(
                "hijacked = 1", timeout=15, output_hook=outputs.append
            )
            assert reply["content"]["status"] == "error"
            assert reply["content"]["evalue"].startswith("read-only share:")
            errors = [m for m in outputs if m["msg_type"] == "error"]
            assert errors and "read-only share" in errors[0]["content"]["evalue"]
        finally:
            stop_client(viewer)

        # Through SSH, the viewer's key reaches the output stream only: sshd refuses
        # the kernel's shell port and the collaborator channels alike.
        conn = attachment.conn
        assert conn is not None
        for port in (owned.connection["shell_port"], owned.connection["control_port"]):
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.open_connection("127.0.0.1", port)
        assert (
            f"port {owned.connection['shell_port']}, but the request was denied"
            in ssh_host.log.read_text()
        )

    # Nothing the viewer did reached the kernel; it still runs.
    check = await run(owned.client, "assert 'hijacked' not in globals()")
    assert check["status"] == "ok", check
    status = await owned.agent.call("kernel_status", kernel_id=owned.kernel_id)
    assert status["alive"]
