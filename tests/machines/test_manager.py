"""MachineManager lists every provider's targets, the default first, and names unknown ones."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_remote_hw.machines.manager import MachineManager
from jupyter_remote_hw.providers import UnknownHardwareError

ManagerFactory = Callable[..., MachineManager]


@pytest.fixture
async def make_manager(tmp_path: Path) -> AsyncIterator[ManagerFactory]:
    """Builds managers from config sections; closes every one at the end."""
    made: list[MachineManager] = []
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("Host alias-z\nHost alias-a\nHost github.com\n")

    def make(**sections: dict[str, Any]) -> MachineManager:
        config = Config(
            {
                "MachineManager": {"ledger_path": str(tmp_path / "state" / "ledger.sqlite3")},
                "LocalProvider": {"hardware": "Test CPU"},
                "TransportManager": {"ssh_config_files": [str(ssh_config)]},
                "SSHProvider": {
                    "hosts": [
                        {"host": "gpu-b", "hardware": "A10G 24GB"},
                        {"host": "gpu-a", "hardware": "H100 80GB"},
                    ]
                },
            }
        )
        for section, values in sections.items():
            config[section].update(values)
        manager = MachineManager(config=config)
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.close()


async def test_default_target_local_first_then_providers_in_order(
    make_manager: ManagerFactory,
) -> None:
    manager = make_manager()
    targets = manager.targets()
    assert [t.name for t in targets] == [
        "local",
        "ssh-gpu-b",
        "ssh-gpu-a",
        "ssh-alias-z",
        "ssh-alias-a",
    ]
    assert targets[0].hardware == "Test CPU"
    assert targets[1].hardware == "A10G 24 GiB"
    assert targets[3].hardware == "SSH host"


async def test_another_default_target_moves_to_the_front(make_manager: ManagerFactory) -> None:
    manager = make_manager(MachineManager={"default_target": "ssh-alias-z"})
    assert [t.name for t in manager.targets()] == [
        "ssh-alias-z",
        "local",
        "ssh-gpu-b",
        "ssh-gpu-a",
        "ssh-alias-a",
    ]


async def test_config_reaches_the_transport_and_providers(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = make_manager(
        SSHProvider={"exclude_hosts": ["alias-a"]}, LocalProvider={"enabled": False}
    )
    assert manager.transport.ssh_config_files == [str(tmp_path / "ssh_config")]
    # Replacing exclude_hosts drops the default exclusions: github.com is offered now.
    assert [t.name for t in manager.targets()] == [
        "ssh-gpu-b",
        "ssh-gpu-a",
        "ssh-alias-z",
        "ssh-github.com",
    ]


async def test_target_by_name(make_manager: ManagerFactory) -> None:
    manager = make_manager()
    assert manager.target("ssh-gpu-a").host == "gpu-a"
    assert manager.target("local").where == "this machine"


async def test_unknown_target_names_it_and_lists_the_configured_ones(
    make_manager: ManagerFactory,
) -> None:
    manager = make_manager()
    with pytest.raises(UnknownHardwareError) as err:
        manager.target("ssh-nowhere")
    message = str(err.value)
    assert "'ssh-nowhere'" in message
    assert "local, ssh-alias-a, ssh-alias-z, ssh-gpu-a, ssh-gpu-b" in message
    assert err.value.name == "ssh-nowhere"
    assert sorted(err.value.known) == [
        "local",
        "ssh-alias-a",
        "ssh-alias-z",
        "ssh-gpu-a",
        "ssh-gpu-b",
    ]
    assert isinstance(err.value, LookupError)


async def test_unknown_target_with_nothing_configured(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = make_manager(
        LocalProvider={"enabled": False},
        SSHProvider={"hosts": []},
        TransportManager={"ssh_config_files": [str(tmp_path / "missing")]},
    )
    assert manager.targets() == []
    with pytest.raises(UnknownHardwareError, match="the configured targets are none"):
        manager.target("local")


async def test_ledger_lives_at_the_configured_path(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    manager = make_manager()
    path = tmp_path / "state" / "ledger.sqlite3"
    assert manager.ledger.path == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    manager.ledger.put_kernel("k1", "remote-hw-local", "local", {})
    assert [r.kernel_id for r in manager.ledger.kernels()] == ["k1"]


async def test_direct_construction_is_not_the_singleton(make_manager: ManagerFactory) -> None:
    was_initialized = MachineManager.initialized()
    first = make_manager()
    second = make_manager()
    assert first is not second
    assert first.ledger is not second.ledger
    assert MachineManager.initialized() == was_initialized


async def test_steps_report_to_the_launch_listeners(make_manager: ManagerFactory) -> None:
    manager = make_manager()
    events: list[dict[str, Any]] = []
    manager.launch_listeners = [events.append]
    steps = manager.steps("ssh-gpu-a", "kernel-1")
    with steps.step("connect"):
        pass
    assert [(e["step"], e["state"], e["target"], e["kernel_id"]) for e in events] == [
        ("connect", "started", "ssh-gpu-a", "kernel-1"),
        ("connect", "done", "ssh-gpu-a", "kernel-1"),
    ]


async def test_no_machine_cached_before_a_launch(make_manager: ManagerFactory) -> None:
    manager = make_manager()
    assert manager.cached("local") is None
    assert await manager.release_if_idle("local") is False
