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

pytest_plugins = ["pytest_jupyter.jupyter_server", "tests.watchdog"]

#: Tests that share one resource, by the start of their node ids: parallel test workers
#: (tests/run.sh) run each group on one worker, one test after another. The SLURM tests
#: share one cluster and fill its nodes on purpose.
SERIAL_GROUPS = {"tests/providers/slurm/": "slurm"}


def _group(nodeid: str) -> str | None:
    return next((name for start, name in SERIAL_GROUPS.items() if nodeid.startswith(start)), None)


#: Fixtures that start something real (an sshd host, a Jupyter server, kernels, a
#: cluster, moto's server): a test that uses none of them, directly or through another
#: fixture, is marked ``fast`` (``pytest -m fast``: docs/development.md).
SLOW_FIXTURES = frozenset(
    {
        "ssh_host",
        "ns_host",
        "jp_serverapp",
        "kernels",
        "slurm_cluster",
        "moto_endpoint",
        "lifecycle_host",
        "hardened_host",
    }
)

#: Modules whose tests start processes themselves (agents, kernels, servers, children
#: that load pickles; no fixture says so), or read the whole tree (the shape and the
#: docs' references, which the checks before a commit run).
SLOW_MODULES = (
    "tests/lifecycle/",
    "tests/benchmarks/",
    "tests/agent/",
    "tests/agent_client/test_relay.py",
    "tests/agent_client/test_sleeping.py",
    "tests/cli/test_commands.py",
    "tests/cli/test_no_aws.py",
    "tests/provisioner/test_kernel_conformance.py",
    "tests/providers/ssh/test_provider.py",
    "tests/server/test_handlers.py",
    "tests/test_config_check.py",
    "tests/test_docs_references.py",
    "tests/test_layering.py",
    "tests/transfer/kernel_side/test_bulk.py",
    "tests/transfer/test_client.py",
    "tests/transfer/kernel_side/test_restricted_gadgets.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the fast tests; run the grouped tests first, so that the longest unit of work
    starts while the other tests spread over the other workers."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if not fixtures & SLOW_FIXTURES and not item.nodeid.startswith(SLOW_MODULES):
            item.add_marker(pytest.mark.fast)
    items.sort(key=lambda item: _group(item.nodeid) is None)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    """End with one short line per failure (its id and the first lines of what failed),
    after the long reports and their logs: what a reader of the run's last lines needs."""
    failed = terminalreporter.stats.get("failed", []) + terminalreporter.stats.get("error", [])
    if not failed:
        return
    terminalreporter.section("failures in short", sep="-")
    for report in failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
        lines = [line for line in message.splitlines() if line.strip()][:3]
        terminalreporter.write_line(f"{report.nodeid} ({report.when}): " + " | ".join(lines)[:400])


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

        def remove_node(self, node: Any) -> str | None:
            # A worker that ended during a test (tests/watchdog.py): that test is
            # reported failed, and the rest of its work goes to the next worker; without
            # this, xdist hands the very test that ended it to the next worker again.
            workload = self.assigned_work.get(node, {})
            crashed = next(
                (nodeid for unit in workload.values() for nodeid, done in unit.items() if not done),
                None,
            )
            if crashed is None:
                return super().remove_node(node)  # type: ignore[no-any-return]
            for unit in workload.values():
                if crashed in unit:
                    unit[crashed] = True
            for scope in [scope for scope, unit in workload.items() if all(unit.values())]:
                del workload[scope]
            super().remove_node(node)
            return crashed

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
    garbage collector happens to run in.

    What outlives the test is then frozen (:func:`gc.freeze`): later collections skip it,
    so each costs what one test made rather than all a worker holds (Jupyter, torch,
    every module imported so far). Without it, these collections took over half of a
    worker's CPU time.
    """
    yield
    gc.collect()
    gc.freeze()


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
