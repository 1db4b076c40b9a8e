"""Starting (or finding) the agent on a host, and opening a client to it.

Over SSH: check python3, upload the agent zipapp when the host lacks this
build, start it detached, then talk to its UNIX socket through the host's SSH
connection. Locally: the same agent as a detached subprocess of this machine.
Each step is reported to ``progress``; a failure names the step and what to try.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..agent import AGENT_VERSION
from ..transport import SSHConnection, TransportError
from .bundle import agent_zipapp, write_agent_zipapp
from .client import AgentClient
from .errors import AgentUnavailableError

Progress = Callable[[str], None]

#: Where, relative to the host user's home, the zipapp and the agent's state live.
REMOTE_CACHE = ".cache/jupyter-remote-hw"
REMOTE_STATE = ".local/state/jupyter-remote-hw/agent"

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
        say("prepare host: starting the agent")
        ready = _parse_ready_line(await serve(), where)
        say("prepare host: connecting to the agent")
        client = await connect(str(ready["socket"]))
        if ready.get("version") == AGENT_VERSION:
            return client
        _log.info("agent on %s: replacing version %s with %s; its kernels keep running",
                  where, ready.get("version"), AGENT_VERSION)
        try:
            await client.call("shutdown_agent", kill_kernels=False)
        finally:
            await client.close()
        await asyncio.sleep(0.2)
    raise AgentUnavailableError(f"start agent on {where}: the old agent did not stop")


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
    try:
        say(f"prepare host: checking {python}")
        name, data = agent_zipapp()
        # One round trip: the Python's version, the home directory, and
        # whether this build's zipapp is already there.
        cache = shlex.quote(f"{root}/{REMOTE_CACHE}") if root else f'"$HOME"/{REMOTE_CACHE}'
        probe = await conn.run(
            f"{shlex.quote(python)} -c 'import sys; print(sys.version_info >= (3, 8))'"
            f' && echo "$HOME" && if test -f {cache}/{shlex.quote(name)}; '
            "then echo have; else echo missing; fi"
        )
        lines = probe.stdout.split("\n")
        if not probe.ok or len(lines) < 3:
            raise AgentUnavailableError(
                f"prepare host {where}: `{python}` did not run ({probe.stderr.strip() or 'no output'}"
                f"). Install Python 3.8 or newer there, or set the host's python."
            )
        if lines[0] != "True":
            raise AgentUnavailableError(
                f"prepare host {where}: {python} is older than 3.8; install a newer Python there."
            )
        home = root or lines[1]
        remote = f"{home}/{REMOTE_CACHE}/{name}"
        state = f"{home}/{REMOTE_STATE}"
        if lines[2] != "have":
            say(f"prepare host: uploading the agent ({len(data) // 1024} KiB)")
            await conn.run(f"mkdir -p -m 700 {shlex.quote(f'{home}/{REMOTE_CACHE}')}")
            with tempfile.TemporaryDirectory() as tmp:
                await conn.upload(write_agent_zipapp(Path(tmp)), remote)

        async def serve() -> str:
            started = await conn.run(
                f"{shlex.quote(python)} {shlex.quote(remote)} serve "
                f"--state-dir {shlex.quote(state)} --daemon --idle-exit {idle_exit:g}"
            )
            return started.stdout + started.stderr

        async def connect(socket: str) -> AgentClient:
            reader, writer = await conn.open_unix_connection(socket)
            return AgentClient(reader, writer, where=where, log=log, socket=socket)

        return await _serve_and_connect(serve, connect, where, say)
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
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jupyter_remote_hw.agent", "serve",
            "--state-dir", str(state_dir), "--daemon", "--idle-exit", f"{idle_exit:g}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
        )
        out, err = await proc.communicate()
        return out.decode() + err.decode()

    async def connect(socket: str) -> AgentClient:
        return await AgentClient.connect_unix(socket, log=log)

    return await _serve_and_connect(serve, connect, "localhost", progress or (lambda _step: None))
