"""Starting (or finding) the agent on a host, and opening a client to it.

Over SSH: one command checks python3, receives the agent zipapp when the
host lacks this build, and starts it detached; then we talk to its UNIX socket
through the host's SSH connection. Locally: the same agent as a detached subprocess of this machine.
Each step is reported to ``progress``; a failure names the step and what to try.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..agent import AGENT_VERSION, boot
from ..transport import SSHConnection, TransportError
from .bundle import agent_zipapp
from .client import AgentClient
from .errors import AgentUnavailableError

Progress = Callable[[str], None]

#: Where, relative to the host user's home, the zipapp and the agent's state live.
REMOTE_CACHE = boot.CACHE
REMOTE_STATE = boot.STATE

#: The source of :mod:`..agent.boot`, run on hosts with ``python -c``.
_BOOT_SCRIPT = Path(boot.__file__).read_text()

#: Seconds an agent with no kernel and no client waits before it exits.
DEFAULT_IDLE_EXIT = 600.0

_log = logging.getLogger(__name__)


def _parse_ready_line(output: str, where: str) -> dict[str, Any]:
    """Read the agent's one-line JSON answer to ``serve --daemon``."""
    for line in reversed(output.strip().splitlines()):
        try:
            ready = json.loads(line)
        except ValueError:
            continue
        if isinstance(ready, dict):
            if "error" in ready:
                raise AgentUnavailableError(f"start agent on {where}: {ready['error']}")
            return ready
    raise AgentUnavailableError(f"start agent on {where}: no answer from the agent: {output!r}")


async def _serve_and_connect(
    serve: Callable[[], Awaitable[str]],
    connect: Callable[[str], Awaitable[AgentClient]],
    where: str,
    say: Progress,
) -> AgentClient:
    """Run ``serve --daemon`` and connect to the agent it reports.

    An agent of another version is asked to stop while leaving its kernels
    running, and this build's agent is started in its place; it re-adopts
    those kernels from the state directory.
    """
    for _attempt in range(2):
        ready = _parse_ready_line(await serve(), where)
        say("prepare host: connecting to the agent")
        client = await connect(str(ready["socket"]))
        if ready.get("version") == AGENT_VERSION:
            return client
        _log.info(
            "agent on %s: replacing version %s with %s; its kernels keep running",
            where,
            ready.get("version"),
            AGENT_VERSION,
        )
        try:
            await client.call("shutdown_agent", kill_kernels=False)
        finally:
            await client.close()
        await asyncio.sleep(0.2)
    raise AgentUnavailableError(f"start agent on {where}: the old agent did not stop")


async def _boot(
    conn: SSHConnection, python: str, home: str, idle_exit: float, say: Progress
) -> str:
    """Run :mod:`..agent.boot` on the host: one command checks the Python, sends the
    agent bundle only if the host lacks it, and starts the agent.

    Returns:
        Everything the command printed (its last JSON line is the agent's ready line).
    """
    name, data = agent_zipapp()
    digest = hashlib.sha256(data).hexdigest()
    command = shlex.join(
        [python, "-c", _BOOT_SCRIPT, home, name, digest, str(len(data)), f"{idle_exit:g}"]
    )
    where = conn.destination
    output: list[bytes] = []
    async with asyncio.timeout(conn.settings.command_timeout):
        async with conn.open_process(command) as process:
            first = await process.stdout.readline()
            output.append(first)
            try:
                asked = json.loads(first)
            except ValueError:
                asked = None
            if isinstance(asked, dict) and "need" in asked:
                say(f"prepare host: uploading the agent ({len(data) // 1024} KiB)")
                process.stdin.write(data)
            process.stdin.write_eof()
            if isinstance(asked, dict) and ("need" in asked or "have" in asked):
                say("prepare host: starting the agent")
            output.append(await process.stdout.read())
            errors = await process.stderr.read()
            await process.wait()
    text = b"".join(output).decode(errors="replace")
    if not any(line.startswith("{") for line in text.splitlines()):
        detail = errors.decode(errors="replace").strip() or text.strip() or "no output"
        raise AgentUnavailableError(
            f"prepare host {where}: `{python}` did not run ({detail[:500]}). "
            "Install Python 3.8 or newer there, or set the host's python."
        )
    return text + errors.decode(errors="replace")


async def start_ssh_agent(
    conn: SSHConnection,
    *,
    python: str = "python3",
    root: str | None = None,
    progress: Progress | None = None,
    log: logging.Logger | None = None,
    idle_exit: float = DEFAULT_IDLE_EXIT,
) -> AgentClient:
    """Make sure this build's agent runs on ``conn``'s host; return a client to it.

    One remote command does the preparation (see :mod:`..agent.boot`): on a
    new host it costs the bundle's bytes and two round trips more than on a
    prepared one, where it costs the command's own.

    Args:
        conn: The host's SSH connection.
        python: The host's Python, which runs the agent and, by default, kernels.
        root: Directory on the host under which the agent's cache and state
            live; default the login user's home.
        progress: Called with a line per step.
        log: Where to log.
        idle_exit: Seconds the agent lingers with no kernel and no client (0: for ever).

    Raises:
        AgentUnavailableError: A step failed; the message names it and what to try.
    """
    say = progress or (lambda _step: None)
    where = conn.destination
    log = log or _log

    async def serve() -> str:
        say(f"prepare host: checking {python}")
        return await _boot(conn, python, root or "", idle_exit, say)

    async def connect(socket: str) -> AgentClient:
        reader, writer = await conn.open_unix_connection(socket)
        return AgentClient(reader, writer, where=where, log=log, socket=socket)

    try:
        return await _serve_and_connect(serve, connect, where, say)
    except TimeoutError:
        raise AgentUnavailableError(
            f"prepare host {where}: the agent did not start within "
            f"{conn.settings.command_timeout:g} s"
        ) from None
    except TransportError as exc:
        raise AgentUnavailableError(f"prepare host {where}: {exc}") from exc


async def start_local_agent(
    state_dir: Path,
    *,
    progress: Progress | None = None,
    log: logging.Logger | None = None,
    idle_exit: float = DEFAULT_IDLE_EXIT,
) -> AgentClient:
    """Make sure an agent runs on this machine for ``state_dir``; return a client to it.

    Raises:
        AgentUnavailableError: The agent could not be started or reached.
    """

    async def serve() -> str:
        say("prepare host: starting the agent")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "jupyter_remote_hw.agent",
            "serve",
            "--state-dir",
            str(state_dir),
            "--daemon",
            "--idle-exit",
            f"{idle_exit:g}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        out, err = await proc.communicate()
        return out.decode() + err.decode()

    async def connect(socket: str) -> AgentClient:
        return await AgentClient.connect_unix(socket, log=log)

    say = progress or (lambda _step: None)
    return await _serve_and_connect(serve, connect, "localhost", say)
