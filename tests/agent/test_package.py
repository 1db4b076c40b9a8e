"""The agent ships alone to hosts: stdlib (plus optional pyzmq) only, old-python syntax."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import zipapp
from collections.abc import Callable
from pathlib import Path

import jupyter_remote_hw.agent as agent_package

from .agentclient import Agent, AgentClient, running, wait_until
from .kernelclient import kernel_client, value_of
from .test_kernels import make_bare_venv

AGENT_DIR = Path(agent_package.__file__).parent
MODULES = sorted(AGENT_DIR.glob("*.py"))
BOOT = AGENT_DIR / "boot.py"
ALLOWED_THIRD_PARTY = {"zmq"}


def test_agent_imports_only_stdlib_zmq_and_itself() -> None:
    assert len(MODULES) > 5
    for module in MODULES:
        tree = ast.parse(module.read_text(), str(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY, (
                    f"{module.name} imports {name}: the agent may use only the standard "
                    "library, pyzmq, and relative imports of its own modules"
                )


def test_agent_modules_parse_as_python_3_8() -> None:
    for module in MODULES:
        if module.name == BOOT.name:
            continue
        source = module.read_text()
        ast.parse(source, str(module), feature_version=(3, 8))
        assert "from __future__ import annotations" in source, module.name


def test_the_boot_script_parses_on_older_pythons_to_refuse_them_clearly(tmp_path: Path) -> None:
    """It checks the version itself, so it must not fail to parse first."""
    source = BOOT.read_text()
    ast.parse(source, str(BOOT), feature_version=(3, 7))
    assert "from __future__" not in source and 'f"' not in source and "f'" not in source
    old = subprocess.run(
        [
            sys.executable,
            "-c",
            source.replace("(3, 8)", "(99, 0)"),
            str(tmp_path),
            "x.pyz",
            "0" * 64,
            "1",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert old.returncode == 1
    assert "older than 3.8; install a newer Python there" in json.loads(old.stdout)["error"]


def test_zipapp_of_the_agent_alone_serves(workdir: Path) -> None:
    # Build an archive holding only the agent package (under another name), and run
    # it isolated (-I: no PYTHONPATH, no cwd on sys.path) from /, as a host would.
    source = workdir / "app"
    shutil.copytree(AGENT_DIR, source / "rhw_agent", ignore=shutil.ignore_patterns("__pycache__"))
    archive = workdir / "agent.pyz"
    zipapp.create_archive(source, archive, main="rhw_agent.__main__:main")
    state = workdir / "zstate"
    proc = subprocess.run(
        [sys.executable, "-I", str(archive), "serve", "--state-dir", str(state), "--daemon"],
        capture_output=True,
        cwd="/",
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    line = json.loads(proc.stdout)
    try:
        from jupyter_remote_hw.agent.client import request_sync

        hello = request_sync(line["socket"], "hello")
        assert hello["version"] == agent_package.AGENT_VERSION
        request_sync(line["socket"], "shutdown_agent")
        assert wait_until(lambda: not running(line["pid"]), 20)
    finally:
        if running(line["pid"]):
            import os
            import signal

            os.kill(line["pid"], signal.SIGKILL)


async def test_agent_without_pyzmq_or_ipykernel(
    workdir: Path, start_agent: Callable[..., Agent]
) -> None:
    # The agent itself runs on a bare python (no pyzmq, no ipykernel)...
    python = make_bare_venv(workdir)
    agent = start_agent(python=str(python))
    conn = await AgentClient.connect(agent.socket)
    try:
        hello = await conn.call("hello")
        assert hello["python"] == str(python)
        # ...so its default kernel cannot start, and says why,
        response = await conn.response("start_kernel")
        assert response["kind"] == "no_ipykernel"
        assert f"`{python} -m pip install ipykernel`" in response["error"]
        # but it runs a kernel under a python that has ipykernel, ready once its ports
        # accept connections, with an execution state it cannot know.
        started = await conn.call(
            "start_kernel",
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        )
        agent.kernel_pids.add(started["pid"])
        with kernel_client(started["connection"]) as kc:
            assert value_of(kc, "1 + 1") == "2"
        status = await conn.call("kernel_status", kernel_id=started["kernel_id"])
        assert status["alive"] is True
        assert status["execution_state"] == "unknown"
        await conn.call("shutdown_kernel", kernel_id=started["kernel_id"])
        assert not running(started["pid"])
    finally:
        await conn.close()
