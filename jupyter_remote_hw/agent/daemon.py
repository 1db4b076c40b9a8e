"""``serve``: claim the state directory, run the server, detach when asked, say when ready.

One agent serves a state directory at a time: it holds an exclusive ``flock``
on ``agent.lock`` for its whole life. Whoever gets the lock starts an agent;
whoever does not waits for the holder to answer ``hello`` on the socket and
reports that agent instead.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import select
import signal
import sys
import time
from typing import Any, Callable, Dict

from .client import AgentUnavailable, request_sync
from .paths import StatePaths, prepare_state_dir
from .processes import log_tail
from .protocol import AgentError
from .server import AgentServer

log = logging.getLogger(__name__)

CLAIM_TIMEOUT = 30.0
"""Seconds to wait for another agent that holds the lock to answer."""
READY_TIMEOUT = 60.0
"""Seconds the launcher waits for the detached agent to say it listens."""

ReadyCallback = Callable[[Dict[str, Any]], None]


def configure_logging(level: str) -> None:
    """Log to stderr (the agent log when detached) with timestamps and pid.

    Args:
        level: A logging level name such as ``INFO``.
    """
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _emit(line: dict[str, Any]) -> None:
    """Print the one readiness (or error) line of ``serve`` on stdout."""
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def _try_lock(path: str) -> int | None:
    """Take the agent lock without waiting; return its fd, or None when held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def running_agent(paths: StatePaths, timeout: float = 3.0) -> dict[str, Any] | None:
    """The readiness line of an agent that answers hello on the socket, if any.

    Args:
        paths: The state directory.
        timeout: Seconds to wait for the answer.

    Returns:
        ``{"socket", "pid", "version"}``, or None when no agent answers.
    """
    if not os.path.exists(paths.socket):
        return None
    try:
        hello = request_sync(paths.socket, "hello", timeout=timeout)
    except (AgentUnavailable, AgentError):
        return None
    return {"socket": paths.socket, "pid": hello.get("pid"), "version": hello.get("version")}


def claim(
    paths: StatePaths, timeout: float = CLAIM_TIMEOUT
) -> tuple[int | None, dict[str, Any] | None]:
    """Either take the agent lock or find the agent that holds it.

    Args:
        paths: The state directory.
        timeout: Seconds to wait for a lock holder to answer (it may be
            starting up or shutting down).

    Returns:
        ``(lock_fd, None)`` when this process should start the agent, or
        ``(None, line)`` with the running agent's readiness line.

    Raises:
        AgentError: The lock stays held but nothing answers.
    """
    deadline = time.monotonic() + timeout
    while True:
        fd = _try_lock(paths.lock)
        if fd is not None:
            return fd, None
        line = running_agent(paths)
        if line is not None:
            return None, line
        if time.monotonic() >= deadline:
            raise AgentError(
                "agent_stuck",
                f"another process holds {paths.lock} but no agent answers on {paths.socket} "
                f"after {timeout:.0f} s: see {paths.log}, and stop the process holding the "
                f"lock (`fuser {paths.lock}`)",
            )
        time.sleep(0.1)


async def _serve(paths: StatePaths, on_ready: ReadyCallback, idle_exit: float = 0.0) -> None:
    """Run the server until it is asked to stop; call ``on_ready`` once it listens."""
    server = AgentServer(paths, idle_exit=idle_exit)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop, False)
    await server.start()
    on_ready(server.ready_line())
    await server.wait_stopped()


def serve(state_dir: str, daemon: bool, log_level: str = "INFO", idle_exit: float = 0.0) -> int:
    """The ``serve`` command.

    Prints exactly one JSON line on stdout: ``{"socket", "pid", "version"}`` once
    an agent listens (an already running one, with ``daemon``), or
    ``{"error"}``. Without ``daemon`` the agent then keeps serving in this
    process until SIGTERM, SIGINT or ``shutdown_agent``.

    Args:
        state_dir: The agent's state directory.
        daemon: Detach from the calling session and return once ready.
        log_level: Logging level name.
        idle_exit: Stop after this many seconds without kernels or clients
            (0: never).

    Returns:
        The process exit status.
    """
    try:
        paths = prepare_state_dir(state_dir)
        lock_fd, existing = claim(paths)
    except (AgentError, OSError) as exc:
        _emit({"error": str(exc)})
        return 1
    if existing is not None:
        if daemon:
            _emit(existing)
            return 0
        _emit(
            {
                "error": f"an agent (pid {existing['pid']}) already serves {paths.socket}: "
                "use it, or stop it with the shutdown_agent op first"
            }
        )
        return 1
    assert lock_fd is not None
    if daemon:
        return _launch_daemon(paths, lock_fd, log_level, idle_exit)
    configure_logging(log_level)
    try:
        asyncio.run(_serve(paths, _emit, idle_exit))
    except Exception as exc:
        log.exception("agent failed")
        _emit({"error": f"agent failed: {type(exc).__name__}: {exc}"})
        return 1
    return 0


def _launch_daemon(paths: StatePaths, lock_fd: int, log_level: str, idle_exit: float) -> int:
    """Double-fork a detached agent and relay its readiness line.

    The detached agent inherits ``lock_fd`` (the same open file, so the lock
    stays held once this process exits) and writes its readiness line into a
    pipe that this process reads and prints.
    """
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # first child: new session, then fork again and exit
        code = 1
        try:
            os.close(read_fd)
            os.setsid()
            if os.fork() == 0:
                code = _daemon_main(paths, write_fd, log_level, idle_exit)
            else:
                code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    os.close(lock_fd)
    os.waitpid(child, 0)
    data = _read_line(read_fd, READY_TIMEOUT)
    os.close(read_fd)
    try:
        line = json.loads(data) if data else None
    except ValueError:
        line = None
    if not isinstance(line, dict):
        tail = log_tail(paths.log, max_lines=10)
        _emit(
            {
                "error": f"the agent did not report ready within {READY_TIMEOUT:.0f} s; "
                f"{paths.log} ends with:\n{tail}"
            }
        )
        return 1
    _emit(line)
    return 1 if "error" in line else 0


def _read_line(fd: int, timeout: float) -> bytes:
    """Read from ``fd`` until a newline, end of file, or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def _daemon_main(paths: StatePaths, ready_fd: int, log_level: str, idle_exit: float) -> int:
    """Body of the detached agent: redirect stdio, serve, report readiness on ``ready_fd``."""
    os.chdir("/")
    devnull = os.open(os.devnull, os.O_RDWR)
    log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(devnull)
    os.close(log_fd)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    configure_logging(log_level)
    pending = [ready_fd]

    def report(line: dict[str, Any]) -> None:
        if pending:
            fd = pending.pop()
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            except OSError:
                log.warning("the launcher went away before the agent was ready")
            os.close(fd)

    code = 0
    try:
        asyncio.run(_serve(paths, report, idle_exit))
    except BaseException as exc:
        log.exception("agent failed")
        report({"error": f"agent failed: {type(exc).__name__}: {exc}; see {paths.log}"})
        code = 1
    report({"error": "agent stopped before it was ready"})
    logging.shutdown()
    return code
