"""Shared fixtures: real OpenSSH test hosts and transport settings that reach them."""

from __future__ import annotations

import gc
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_remote_hw.transport import TransportSettings

from .processes import kill_processes_mentioning
from .testhosts import NetnsTestHost, SSHTestHost, is_root, loopback_host, netns_host

pytest_plugins = ["pytest_jupyter.jupyter_server"]

#: Tests that share one resource, by the start of their node ids: parallel test workers
#: (tests/run.sh) run each group on one worker, one test after another. The SLURM tests
#: share one cluster and fill its nodes on purpose.
SERIAL_GROUPS = {"tests/providers/slurm/": "slurm"}


def _group(nodeid: str) -> str | None:
    return next((name for start, name in SERIAL_GROUPS.items() if nodeid.startswith(start)), None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The grouped tests first, so that the longest unit of work starts while the other
    tests spread over the other workers."""
    items.sort(key=lambda item: _group(item.nodeid) is None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist load``: each test goes to the next free worker, but each group of
    :data:`SERIAL_GROUPS` goes to one worker as a whole."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid) or nodeid

    return GroupedScheduling(config, log)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_leaks_left_to_later() -> Iterator[None]:
    """Collect garbage after each test, so that a socket or file the test left open
    fails that test (ResourceWarning is an error) instead of whichever test the
    garbage collector happens to run in."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def no_asyncio_errors() -> Iterator[None]:
    """Fail a test during which asyncio reported an error nobody handled.

    That is "Task exception was never retrieved", "Task was destroyed but it
    is pending", "Exception in callback": each hides a bug.
    """
    handler = _Collect()
    asyncio_log = logging.getLogger("asyncio")
    asyncio_log.addHandler(handler)
    try:
        yield
    finally:
        asyncio_log.removeHandler(handler)
    if handler.records:
        pytest.fail(
            "asyncio reported errors nobody handled:\n"
            + "\n".join(logging.Formatter().format(record) for record in handler.records)
        )


@pytest.fixture(scope="session")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHTestHost]:
    """A real sshd on 127.0.0.1 for the whole test session."""
    with loopback_host(tmp_path_factory.mktemp("sshd") / "host") as host:
        yield host


@pytest.fixture(scope="session")
def ns_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsTestHost]:
    """A real sshd in its own network namespace, whose link can be cut (root only)."""
    if not is_root():
        pytest.skip("network namespaces need root; run the tests as root to cut links")
    with netns_host(tmp_path_factory.mktemp("nssshd") / "host") as host:
        yield host


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory short enough for UNIX socket paths below it."""
    path = Path(tempfile.mkdtemp(prefix="jrhw-", dir="/tmp"))
    try:
        yield path
    finally:
        kill_processes_mentioning(str(path))
        shutil.rmtree(path, ignore_errors=True)


#: Transport settings with short timeouts, for tests (TransportManager trait names).
TEST_TRANSPORT: dict[str, float] = {
    "connect_timeout": 5.0,
    "keepalive_interval": 1.0,
    "keepalive_count_max": 2,
    "reconnect_initial_delay": 0.2,
    "reconnect_max_delay": 1.0,
    "command_timeout": 30.0,
    "forward_wait_timeout": 20.0,
}


def settings_for(config: Path, **overrides: float) -> TransportSettings:
    """Transport settings reading ``config``, with short timeouts for tests."""
    values = {**TEST_TRANSPORT, **overrides}
    return TransportSettings(ssh_config_files=(str(config),), **values)  # type: ignore[arg-type]


@pytest.fixture
def ssh_settings(ssh_host: SSHTestHost) -> TransportSettings:
    """Settings that reach :func:`ssh_host` by its alias."""
    return settings_for(ssh_host.ssh_config)
