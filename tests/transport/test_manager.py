"""The configurable TransportManager: traits from config, one connection per host."""

from __future__ import annotations

from traitlets.config import Config

from jupyter_remote_hw.transport import ConnectionState, TransportManager

from ..testhosts import SSHTestHost


def test_traits_are_read_from_config() -> None:
    config = Config()
    config.TransportManager.keepalive_interval = 2.5
    config.TransportManager.reconnect_give_up_after = 0.0
    config.TransportManager.ssh_config_files = ["/etc/team/ssh_config"]
    settings = TransportManager(config=config).settings
    assert settings.keepalive_interval == 2.5
    assert settings.reconnect_give_up_after == 0.0
    assert settings.ssh_config_files == ("/etc/team/ssh_config",)
    assert settings.connect_timeout == TransportManager.connect_timeout.default_value


async def test_one_shared_connection_per_destination(ssh_host: SSHTestHost) -> None:
    config = Config()
    config.TransportManager.ssh_config_files = [str(ssh_host.ssh_config)]
    manager = TransportManager(config=config)
    first = await manager.connect(ssh_host.alias)
    second = await manager.connect(ssh_host.alias)
    assert first is second and manager.get(ssh_host.alias) is first
    await manager.close_all()
    assert first.state == ConnectionState.CLOSED
    # A closed connection is replaced on the next request.
    third = await manager.connect(ssh_host.alias)
    assert third is not first and third.state == ConnectionState.CONNECTED
    await manager.close_all()
