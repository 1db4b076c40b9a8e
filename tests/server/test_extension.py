"""The server extension loads into a real jupyter_server and takes its config from it."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_remote_hw import __version__
from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.provisioner.kernelspecs import RemoteHWKernelSpecManager
from jupyter_remote_hw.server.extension import MACHINES_SETTING


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
        "TransportManager": {"keepalive_interval": 7.5},
        "RemoteHWExtension": {"cloud_upkeep_interval": 123.0, "orphan_reap_interval": 45.0},
        "SSHProvider": {"hosts": [{"host": "gpu-box", "hardware": "A10G 24GB"}]},
    }


async def test_extension_is_loaded_and_configured(jp_serverapp: Any) -> None:
    settings = jp_serverapp.web_app.settings
    assert settings["jupyter_remote_hw_version"] == __version__
    pkg = jp_serverapp.extension_manager.extensions["jupyter_remote_hw"]
    assert pkg.enabled and pkg.version == __version__
    machines = settings[MACHINES_SETTING]
    assert machines is MachineManager.instance()
    assert machines.transport.keepalive_interval == 7.5
    assert [t.display_name for t in machines.targets() if t.provider == "ssh"] == [
        "Python 3 · A10G 24 GiB · gpu-box"
    ]
    # Nothing set ServerApp.kernel_spec_manager_class: the extension put ours in.
    assert isinstance(jp_serverapp.kernel_spec_manager, RemoteHWKernelSpecManager)
    assert "remote-hw-ssh-gpu-box" in jp_serverapp.kernel_spec_manager.find_kernel_specs()


async def test_the_server_runs_the_cloud_upkeep_and_the_orphan_reaper(jp_serverapp: Any) -> None:
    pkg = jp_serverapp.extension_manager.extensions["jupyter_remote_hw"]
    app = pkg.extension_points["jupyter_remote_hw"].app
    await app._start_jupyter_server_extension(jp_serverapp)  # what the server does on start
    assert app.upkeep.interval == 123.0
    assert app.upkeep._task is not None and not app.upkeep._task.done()
    # Kernels left by %%remote in killed local kernels are looked for every 45 s.
    assert app.orphan_reaper.is_running() and app.orphan_reaper.callback_time == 45000
    assert await app.reap_orphans() == []
    await app.stop_extension()
    assert app.upkeep._task is None
    assert not app.orphan_reaper.is_running()
