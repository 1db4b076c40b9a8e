"""Server tests run the pytest-jupyter server on the test's own loop; the REST API tests
reuse the provisioner tests' server config, kernel starter and kernel channels."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ..kernelws import KernelChannels
from ..provisioner.conftest import (  # noqa: F401 (fixtures)
    HARDWARE,
    channels,
    hosts,
    jp_server_config,
    remote_root,
    start_kernel,
)
from ..serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
from ..testhosts import SSHTestHost
from .apiclient import Events, Fetch


@pytest.fixture
async def events(jp_ws_fetch: Fetch) -> Any:
    """The event socket, open for the whole test."""
    ws = await jp_ws_fetch("jupyter-remote-hw", "api", "events")
    yield Events(ws)
    await KernelChannels(ws).close()  # and wait until the server closed it too


def sharing_host(ssh_host: SSHTestHost, remote_root: Path) -> dict[str, Any]:
    """The test host as the server offers it, its share key lines going to the file its
    sshd reads (a ``hosts`` entry of the sharing tests)."""
    return {
        "host": ssh_host.alias,
        "python": sys.executable,
        "hardware": HARDWARE,
        "root": str(remote_root),
        "authorized_keys": str(ssh_host.authorized_keys),
    }


async def new_session(
    jp_fetch: Fetch, kernel_name: str, path: str = "work.ipynb"
) -> dict[str, Any]:
    """A notebook session with a kernel, as JupyterLab opens one."""
    response = await jp_fetch(
        "api",
        "sessions",
        method="POST",
        body=json.dumps(
            {
                "path": path,
                "name": path,
                "type": "notebook",
                "kernel": {"name": kernel_name},
            }
        ),
    )
    return dict(json.loads(response.body))


@pytest.fixture
async def sessions(jp_fetch: Fetch, jp_serverapp: Any) -> Any:
    """Start sessions; every kernel is shut down afterwards."""

    async def start(kernel_name: str) -> dict[str, Any]:
        return await new_session(jp_fetch, kernel_name)

    yield start
    km = jp_serverapp.kernel_manager
    await asyncio.gather(
        *(km.shutdown_kernel(k) for k in km.list_kernel_ids()), return_exceptions=True
    )
