"""A real SLURM cluster (``../shared/slurm/up.sh`` beside the checkout) behind a loopback
login node: an sshd test host on this machine, where SLURM's commands work."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_remote_hw.ledger import Ledger
from jupyter_remote_hw.machines import MachineManager
from jupyter_remote_hw.providers.launch_steps import LaunchSteps
from jupyter_remote_hw.providers.slurm import SLURMMachine, SLURMProvider
from jupyter_remote_hw.transport import TransportManager

from ...conftest import TEST_TRANSPORT
from ...kernelws import KernelChannels
from ...serverloop import jp_asyncio_loop  # noqa: F401 (fixture)
from ...serverprocess import Server
from ...testhosts import SSHTestHost, free_port, is_root, loopback_host

#: The dev cluster's scripts, beside the checkout.
SLURM_DEV = Path(__file__).resolve().parents[3].parent / "shared" / "slurm"
STATE = Path(os.environ.get("SLURM_DEV_DIR", "/tmp/slurm-dev"))
SLURM_CONF = str(STATE / "etc" / "slurm.conf")
CLUSTER = "dev"
#: The dev cluster's A100 target, and the kernelspec that launches a kernel on it.
A100_NAME = "slurm-dev-gpu-a100"
A100 = f"remote-hw-{A100_NAME}"
#: Name of the jobs this session submits itself (to fill a node).
FILLER = f"jrhw-test-filler-{secrets.token_hex(4)}"
#: The cluster roots this session configured: the provider's jobs work below them.
ROOTS: set[str] = set()


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The dev cluster, up (once per session); its SLURM_CONF."""
    script = SLURM_DEV / "up.sh"
    if not script.exists():
        pytest.skip(f"SLURM cannot be installed here: {script} is missing")
    if not is_root():
        pytest.skip("SLURM cannot be installed here: ../shared/slurm/up.sh needs root")
    done = subprocess.run([str(script)], check=False, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or shutil.which("sbatch") is None:
        pytest.skip(f"SLURM cannot be installed here: up.sh failed: {done.stderr[-500:]}")
    return SLURM_CONF


def slurm(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run a SLURM command here (the login node is this machine)."""
    return subprocess.run(
        list(argv),
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": SLURM_CONF},
    )


def our_jobs() -> list[str]:
    """Ids of the live jobs this test session submitted, itself or through the provider.

    Other sessions may share the cluster (the same tests, run elsewhere at the same
    time); their jobs are left alone: a filler job carries this session's name, and
    the provider's jobs work in a directory under a root this session configured.
    """
    out = slurm("squeue", "-h", "-o", "%i|%j|%Z").stdout
    found = []
    for line in out.splitlines():
        job_id, name, workdir = (line.split("|") + ["", ""])[:3]
        if name == FILLER or any(f"{workdir}/".startswith(root) for root in ROOTS):
            found.append(job_id)
    return found


def cancel_ours() -> None:
    """Cancel every job :func:`our_jobs` lists."""
    jobs = our_jobs()
    if jobs:
        slurm("scancel", *jobs)


@pytest.fixture
def clean_queue(slurm_cluster: str) -> Iterator[None]:
    """No job of ours before or after the test."""
    cancel_ours()
    yield
    cancel_ours()


@pytest.fixture(scope="session")
def login_host(
    tmp_path_factory: pytest.TempPathFactory, slurm_cluster: str
) -> Iterator[SSHTestHost]:
    """The cluster's login node: a loopback sshd."""
    with loopback_host(tmp_path_factory.mktemp("login") / "host", alias="slurm-login") as host:
        yield host


def cluster_entry(login: str, root: Path, **extra: Any) -> dict[str, Any]:
    """One cluster's entry for ``c.SLURMProvider.clusters``."""
    ROOTS.add(str(root) + "/")
    return {
        "login": login,
        "env": {"SLURM_CONF": SLURM_CONF},
        "python": sys.executable,
        "root": str(root),
        "time": "10",
        **extra,
    }


def server_config(
    ssh_config: Path, state: Path, clusters: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """A Jupyter server's config offering ``clusters``."""
    config: dict[str, Any] = {
        "ServerApp": {"jpserver_extensions": {"jupyter_remote_hw": True}},
        "TransportManager": {"ssh_config_files": [str(ssh_config)], **TEST_TRANSPORT},
        "SSHProvider": {"include_ssh_config": False},
        "LocalProvider": {"state_dir": str(state / "local")},
        "SLURMProvider": {"clusters": clusters, "queue_poll": 0.5, "watch_interval": 1.0},
        "RemoteHWProvisioner": {"launch_timeout": 90.0, "poll_timeout": 3.0},
    }
    for section, values in extra.items():
        config.setdefault(section, {}).update(values)
    return config


def dev_config(login_host: SSHTestHost, state: Path, **extra: Any) -> dict[str, Any]:
    """A Jupyter server's config offering the dev cluster alone, with its root under
    ``state``."""
    return server_config(
        login_host.ssh_config,
        state,
        {CLUSTER: cluster_entry(login_host.alias, state / "c")},
        **extra,
    )


@pytest.fixture
async def manager(jp_serverapp: Any) -> MachineManager:
    """The server's machine manager, with the cluster's partitions read."""
    machines: MachineManager = MachineManager.instance()
    provider = machines.providers["slurm"]
    assert isinstance(provider, SLURMProvider)
    await provider.refresh()
    return machines


@pytest.fixture
async def kernels(jp_fetch: Any, jp_ws_fetch: Any, manager: MachineManager) -> AsyncIterator[Any]:
    """Start kernels through the API; each is shut down afterwards."""
    started: list[str] = []
    opened: list[KernelChannels] = []

    class Kernels:
        async def start(self, name: str) -> str:
            response = await jp_fetch(
                "api", "kernels", method="POST", body=json.dumps({"name": name})
            )
            kernel_id = str(json.loads(response.body)["id"])
            started.append(kernel_id)
            return kernel_id

        async def channels(self, kernel_id: str) -> KernelChannels:
            kc = KernelChannels(await jp_ws_fetch("api", "kernels", kernel_id, "channels"))
            opened.append(kc)
            await kc.wait_ready()
            return kc

        async def model(self, kernel_id: str) -> dict[str, Any]:
            return dict(json.loads((await jp_fetch("api", "kernels", kernel_id)).body))

        async def stop(self, kernel_id: str) -> None:
            await jp_fetch("api", "kernels", kernel_id, method="DELETE")

        async def interrupt(self, kernel_id: str) -> None:
            """Interrupt the kernel as JupyterLab's button does."""
            await jp_fetch("api", "kernels", kernel_id, "interrupt", method="POST", body="")

    yield Kernels()
    for kc in opened:
        await kc.close()
    for kernel_id in started:
        try:
            await jp_fetch("api", "kernels", kernel_id, method="DELETE")
        except HTTPClientError:
            pass


@pytest.fixture
async def make(login_host: SSHTestHost, short_tmp: Path, clean_queue: None) -> AsyncIterator[Any]:
    """Providers of one cluster 'dev' with the entry's keys given; all closed afterwards."""
    made: list[SLURMProvider] = []
    config = short_tmp / "ssh_config"
    config.write_text(
        login_host.ssh_config.read_text() + login_host.config_block("dead-login", Port=free_port())
    )

    def provider(**entry: Any) -> SLURMProvider:
        login = str(entry.pop("login", login_host.alias))
        transport = TransportManager(ssh_config_files=[str(config)], **TEST_TRANSPORT)
        made.append(
            SLURMProvider(
                transport=transport,
                ledger=Ledger(short_tmp / "ledger.sqlite3"),
                queue_poll=0.5,
                clusters={"dev": cluster_entry(login, short_tmp / "c", **entry)},
            )
        )
        return made[-1]

    yield provider
    for provider in made:
        assert provider.transport is not None and provider.ledger is not None
        await provider.transport.close_all()
        provider.ledger.close()


async def open_target(provider: SLURMProvider, name: str = A100_NAME) -> SLURMMachine:
    """A machine of target ``name`` from ``provider``, its partitions read first: its job
    submitted and running, with no agent yet."""
    await provider.refresh()
    target = next(t for t in provider.targets() if t.name == name)
    machine = await provider.open_machine(target, LaunchSteps(target.name, "k", provider.log))
    assert isinstance(machine, SLURMMachine)
    return machine


async def run_on_a100(server: Server, code: str) -> tuple[str, str]:
    """Start a kernel on the A100 target through ``server``'s API and run ``code`` in it:
    the kernel's id and what the cell printed."""
    kernel_id = str((await server.api("kernels", method="POST", body={"name": A100}))["id"])
    kc = await server.channels(kernel_id)
    ran = await kc.execute(code)
    await kc.close()
    return kernel_id, str(ran.stdout)


async def queued_launch(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The launch event that says a job waits in the queue for resources, once one of
    ``events`` does (within 30 s)."""
    pending = None
    for _ in range(150):
        pending = next((e for e in events if "(Resources)" in (e["detail"] or "")), None)
        if pending is not None:
            break
        await asyncio.sleep(0.2)
    assert pending is not None, [e["detail"] for e in events]
    return pending


async def fill_t4() -> str:
    """Take the cluster's one T4 with a job of this session's; its id once it runs."""
    filled = slurm(
        "sbatch", "--parsable", "-J", FILLER, "-p", "gpu", "--gres=gpu:t4:1", "-t", "5",
        "-o", "/dev/null", "--wrap", "sleep 300",
    )  # fmt: skip
    assert filled.returncode == 0, filled.stderr
    job_id = filled.stdout.strip()
    for _ in range(100):  # the scheduler starts it within a few seconds
        if job_state(job_id) == "RUNNING":
            break
        await asyncio.sleep(0.1)
    return job_id


async def dead_answers(
    kc: KernelChannels, msg_ids: list[str], timeout: float
) -> tuple[bool, dict[str, dict[str, Any]], list[str]]:
    """Read the websocket until a ``dead`` status came and every one of ``msg_ids`` has its
    execute_reply: whether it came, the replies' contents, and every status seen."""
    replies: dict[str, dict[str, Any]] = {}
    statuses: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while "dead" not in statuses or len(replies) < len(msg_ids):
        async with asyncio.timeout(max(0.1, deadline - loop.time())):
            raw = await kc.ws.read_message()
        assert raw is not None, "the kernel websocket closed"
        message = json.loads(raw)
        kind = message["header"]["msg_type"]
        if kind == "status":
            statuses.append(message["content"]["execution_state"])
        parent = message.get("parent_header", {}).get("msg_id")
        if kind == "execute_reply" and parent in msg_ids:
            replies[parent] = message["content"]
    return "dead" in statuses, replies, statuses


def job_state(job_id: str) -> str:
    """The job's SLURM state (empty once SLURM forgot it)."""
    return slurm("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").stdout.strip()


__all__ = [
    "A100",
    "A100_NAME",
    "CLUSTER",
    "FILLER",
    "cluster_entry",
    "dead_answers",
    "dev_config",
    "fill_t4",
    "json",
    "open_target",
    "our_jobs",
    "queued_launch",
    "run_on_a100",
    "server_config",
    "slurm",
]
