"""The kernels one agent runs: start, restart, interrupt, shut down, report, re-adopt."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import importlib
import importlib.util
import logging
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import activity
from .activity import ActivityTracker
from .connection import (
    StateFileError,
    new_connection_info,
    ports_of,
    read_connection_file,
    remove_ipc_sockets,
    write_private_json,
)
from .holds import Hold, Owner
from .launch import LaunchSpec, LoadedLaunch, default_argv
from .paths import StatePaths
from .processes import (
    log_tail,
    pid_alive,
    process_start_time,
    python_imports,
    signal_group,
    wait_gone,
    write_pid_file,
)
from .protocol import (
    BAD_REQUEST,
    KERNEL_DIED,
    KERNEL_EXISTS,
    KERNEL_TIMEOUT,
    NO_IPYKERNEL,
    START_FAILED,
    UNKNOWN_KERNEL,
    AgentError,
)
from .readiness import DIED, READY, TIMEOUT, wait_until_ready

if TYPE_CHECKING:
    import zmq.asyncio

log = logging.getLogger(__name__)

KERNEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DEFAULT_START_TIMEOUT = 60.0
STOP_GRACE_SECONDS = 5.0
_REAP_INTERVAL = 0.5
_PORT_RETRIES = 3
FORGET_DEAD_AFTER = 10.0
"""Seconds a kernel whose process ended on its own stays listed (dead, restartable),
so that its client can see its exit code and restart it on the same ports."""
PROBE_BUSY_AFTER = 2.0
"""Seconds a re-adopted kernel's shell has to answer kernel_info before it counts as busy."""
STATE_WAIT = 3.0
"""Seconds a status request waits for a re-adopted kernel's state to be known."""

ForgetCallback = Callable[[str], Awaitable[None]]


class Kernel:
    """One kernel process and what the agent knows about it.

    Args:
        kernel_id: The kernel's id (also the stem of its files).
        connection: Its connection dict.
        launch: How it was launched.
        tracker: Follows its execution state.
    """

    def __init__(
        self,
        kernel_id: str,
        connection: dict[str, Any],
        launch: LaunchSpec,
        tracker: ActivityTracker,
    ) -> None:
        self.kernel_id = kernel_id
        self.connection = connection
        self.launch = launch
        self.tracker = tracker
        self.process: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.start_time: int | None = None
        self.exit_code: int | None = None
        self.exited = False
        self.died_at: float | None = None
        self.retiring = False
        self.lock = asyncio.Lock()
        self.hold = Hold(launch.orphan_grace, Owner.from_dict(launch.owner), time.time())
        self.state_known = asyncio.Event()
        """Set once the execution state is known (at once, but for re-adopted kernels)."""

    def attach(self, process: subprocess.Popen[bytes]) -> None:
        """Make ``process`` (our child) this kernel's process."""
        self.process = process
        self.pid = process.pid
        self.start_time = process_start_time(process.pid)
        self.exit_code = None
        self.exited = False
        self.died_at = None

    def adopt(self, pid: int, start_time: int | None) -> None:
        """Make a running process that is not our child this kernel's process."""
        self.process = None
        self.pid = pid
        self.start_time = start_time
        self.exit_code = None
        self.exited = False
        self.died_at = None

    def poll(self) -> bool:
        """Check whether the process is alive, reaping it and recording its exit code.

        Returns:
            True while the kernel process runs.
        """
        if self.exited:
            return False
        if self.process is not None:
            code = self.process.poll()
            if code is None:
                return True
            self.exit_code = code
        elif pid_alive(self.pid, self.start_time):
            return True
        self.exited = True
        self.died_at = time.monotonic()
        self.tracker.reset(activity.DEAD)
        return False

    def status(self) -> dict[str, Any]:
        """The kernel_status result for this kernel."""
        alive = self.poll()
        return {
            "kernel_id": self.kernel_id,
            "pid": self.pid,
            "alive": alive,
            "exit_code": self.exit_code,
            "execution_state": self.tracker.execution_state if alive else activity.DEAD,
            "last_activity": self.tracker.last_activity,
            "connection": dict(self.connection),
            "cwd": self.launch.cwd,
            "orphan_grace": self.hold.grace,
            "held": self.hold.held(),
            "orphan_in": self.hold.orphan_in(time.time()) if alive else None,
        }

    def start_result(self) -> dict[str, Any]:
        """The start_kernel / restart_kernel result for this kernel."""
        return {"kernel_id": self.kernel_id, "pid": self.pid, "connection": dict(self.connection),
                "cwd": self.launch.cwd}

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit.

        Returns:
            True when it has exited.
        """
        deadline = time.monotonic() + timeout
        while self.poll():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True


class KernelManager:
    """All kernels of one agent, with their files under ``<state>/kernels``.

    Args:
        paths: The agent's state directory layout.
        context: A zmq asyncio context, or None when pyzmq is unavailable.
        on_forget: Awaited with a kernel's id after the agent ended or forgot it
            on its own (an orphan, or a process that died), not on request.
    """

    def __init__(self, paths: StatePaths, context: zmq.asyncio.Context | None,
                 on_forget: ForgetCallback | None = None) -> None:
        self.paths = paths
        self.context = context
        self.on_forget = on_forget
        self.hostname = socket.gethostname()
        self.kernels: dict[str, Kernel] = {}
        self._reserved: set[str] = set()
        self._pythons_with_ipykernel: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Re-adopt kernels left running by a previous agent and start reaping."""
        self.adopt_existing()
        self._reaper = asyncio.ensure_future(self._reap_forever())

    async def close(self, kill_kernels: bool) -> None:
        """Stop tracking kernels, and stop the kernels themselves when asked.

        Args:
            kill_kernels: Shut every kernel down; otherwise leave them running,
                with their files, for the next agent to re-adopt.
        """
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if kill_kernels:
            await asyncio.gather(
                *(self.shutdown(kernel_id, now=False) for kernel_id in list(self.kernels)),
                return_exceptions=True,
            )
        for kernel in list(self.kernels.values()):
            await kernel.tracker.close()

    def _spawn_background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reap_forever(self) -> None:
        """Notice (and reap) kernels that exited on their own, forget them after a while,
        and shut down orphans."""
        while True:
            await asyncio.sleep(_REAP_INTERVAL)
            for kernel in list(self.kernels.values()):
                if kernel.lock.locked() or kernel.retiring:
                    continue  # being started, restarted or shut down
                if not kernel.exited and not kernel.poll():
                    log.warning(
                        "kernel %s (pid %d) exited on its own with code %s",
                        kernel.kernel_id,
                        kernel.pid,
                        kernel.exit_code,
                    )
                if kernel.exited:
                    assert kernel.died_at is not None
                    if time.monotonic() - kernel.died_at >= FORGET_DEAD_AFTER:
                        log.info("kernel %s: forgotten, %.0f s after its process ended and "
                                 "no client restarted it", kernel.kernel_id, FORGET_DEAD_AFTER)
                        self._retire(kernel)
                    continue
                unheld = kernel.hold.orphaned_for(time.time())
                if unheld is not None and unheld >= kernel.hold.grace:
                    owner = kernel.hold.owner
                    log.warning(
                        "kernel %s (pid %d): shutting it down, no client has held it for "
                        "%.0f s (its orphan grace); it was started by %s",
                        kernel.kernel_id, kernel.pid, unheld,
                        owner.describe() if owner is not None else "an unnamed client",
                    )
                    self._retire(kernel)

    def _retire(self, kernel: Kernel) -> None:
        """Stop (if it runs) and forget a kernel in the background, then tell ``on_forget``."""
        kernel.retiring = True

        async def retire() -> None:
            async with kernel.lock:
                if self.kernels.get(kernel.kernel_id) is not kernel:
                    return
                await self._stop_process(kernel, now=False)
                await self._forget(kernel)
            if self.on_forget is not None:
                await self.on_forget(kernel.kernel_id)

        self._spawn_background(retire())

    # ------------------------------------------------------------------ holds

    def hold(self, kernel_id: str, connection: int) -> None:
        """Record that a client connection holds a kernel (it started or named it)."""
        kernel = self.kernels.get(kernel_id)
        if kernel is not None:
            kernel.hold.add(connection)

    def release(self, connection: int) -> None:
        """A client connection closed: it holds no kernel any more."""
        now = time.time()
        for kernel in list(self.kernels.values()):
            kernel.hold.drop(connection, now)

    # ------------------------------------------------------------------ lookups

    def get(self, kernel_id: str | None) -> Kernel:
        """The kernel with this id.

        Raises:
            AgentError: ``unknown_kernel`` when there is none.
        """
        if kernel_id is None:
            raise AgentError(BAD_REQUEST, "this op needs the string argument 'kernel_id'")
        kernel = self.kernels.get(kernel_id)
        if kernel is None:
            raise AgentError(
                UNKNOWN_KERNEL,
                f"no kernel {kernel_id} on {self.hostname}: it was shut down or never "
                "started here; list_kernels shows the kernels this agent runs",
            )
        return kernel

    def busy(self) -> bool:
        """Whether any kernel is tracked or being started."""
        return bool(self.kernels or self._reserved)

    def list_status(self) -> list[dict[str, Any]]:
        """kernel_status of every kernel."""
        return [kernel.status() for kernel in list(self.kernels.values())]

    def _ports_in_use(self) -> set[int]:
        ports: set[int] = set()
        for kernel in self.kernels.values():
            ports.update(ports_of(kernel.connection))
        return ports

    # ------------------------------------------------------------------ start

    async def start(
        self,
        kernel_id: str | None,
        argv: list[str] | None,
        env: dict[str, str] | None,
        cwd: str | None,
        timeout: float,
        *,
        cwd_fallback: str | None = None,
        inherit_env: bool = True,
        owner: dict[str, Any] | None = None,
        orphan_grace: float = 0.0,
    ) -> dict[str, Any]:
        """Start a new kernel and wait until it answers.

        Args:
            kernel_id: Id to use, or None for a new uuid4.
            argv: Command line with ``{connection_file}``, or None for ipykernel
                under the agent's python.
            env: Variables set over the agent's environment (see
                :func:`.launch.base_environment`), or the whole environment.
            cwd: Working directory, or None.
            timeout: Seconds to wait for the kernel to answer.
            cwd_fallback: Working directory when ``cwd`` does not exist here
                (or is None); ``~`` is expanded.
            inherit_env: False: ``env`` is the kernel's whole environment.
            owner: Who starts the kernel (:func:`.holds.process_identity`).
            orphan_grace: Seconds the kernel may go without a holder before it
                is shut down; 0: never.

        Returns:
            ``{"kernel_id", "pid", "connection", "cwd"}``; ``cwd`` is where the
            kernel runs (``cwd``, else ``cwd_fallback``, else the agent's own).

        Raises:
            AgentError: Bad arguments, missing ipykernel, or a kernel that died
                or did not answer in time (nothing is left running then).
        """
        if kernel_id is None:
            kernel_id = str(uuid.uuid4())
        elif not KERNEL_ID_PATTERN.match(kernel_id):
            raise AgentError(
                BAD_REQUEST,
                f"kernel_id {kernel_id!r} is not usable: use up to 128 letters, digits, "
                "'.', '_' or '-', starting with a letter or digit",
            )
        if kernel_id in self.kernels or kernel_id in self._reserved:
            raise AgentError(
                KERNEL_EXISTS,
                f"kernel {kernel_id} already exists on {self.hostname}: restart it, shut it "
                "down first, or start a kernel with another id",
            )
        spec = LaunchSpec(
            argv=argv if argv is not None else default_argv(),
            env=env or {},
            cwd=self._working_directory(cwd, cwd_fallback),
            is_default=argv is None,
            inherit_env=inherit_env,
            owner=owner,
            orphan_grace=orphan_grace,
        )
        self._reserved.add(kernel_id)
        try:
            await self._check_ipykernel(spec)
            for attempt in range(1, _PORT_RETRIES + 1):
                kernel = self._new_kernel(kernel_id, spec)
                try:
                    async with kernel.lock:
                        await self._launch_and_wait(kernel, timeout)
                except AgentError as exc:
                    await self._forget(kernel)
                    port_race = "Address already in use" in exc.message
                    if exc.kind == KERNEL_DIED and port_race and attempt < _PORT_RETRIES:
                        log.warning("kernel %s lost a port race; retrying", kernel_id)
                        continue
                    raise
                log.info("kernel %s started (pid %d) in %s", kernel_id, kernel.pid,
                         spec.cwd or os.getcwd())
                kernel.hold.unheld_since = time.time()  # the grace counts from the start
                return kernel.start_result()
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            self._reserved.discard(kernel_id)

    def _working_directory(self, cwd: str | None, fallback: str | None) -> str | None:
        """The first of ``cwd`` and ``fallback`` that is a directory here.

        Raises:
            AgentError: ``bad_request`` when neither is.
        """
        wanted = [os.path.expanduser(path) for path in (cwd, fallback) if path]
        for path in wanted:
            if os.path.isdir(path):
                return os.path.abspath(path)
        if not wanted:
            return None
        raise AgentError(
            BAD_REQUEST,
            f"working directory {' nor '.join(wanted)} does not exist on {self.hostname}: "
            "create it or pass another cwd",
        )

    def _new_kernel(self, kernel_id: str, spec: LaunchSpec) -> Kernel:
        """Register a kernel with fresh channels and key, and write its connection file.

        An ipykernel listens on UNIX sockets in the state directory, which
        only this user can enter; a custom command line (which may not speak
        ZMQ's ``ipc`` transport) gets ports on 127.0.0.1.
        """
        ipc_dir = self.paths.root if spec.argv and (
            spec.is_default or spec.ipykernel_python() is not None) else None
        connection = new_connection_info(avoid=self._ports_in_use(), ipc_dir=ipc_dir)
        write_private_json(self.paths.connection_file(kernel_id), connection)
        tracker = ActivityTracker(kernel_id, connection, self.context)
        kernel = Kernel(kernel_id, connection, spec, tracker)
        self.kernels[kernel_id] = kernel
        tracker.start()
        return kernel

    async def _check_ipykernel(self, spec: LaunchSpec) -> None:
        """Fail with ``no_ipykernel`` when the kernel's python lacks ipykernel."""
        python = spec.ipykernel_python()
        if python is None:
            return
        if spec.is_default:
            importlib.invalidate_caches()
            if importlib.util.find_spec("ipykernel") is not None:
                return
            ok, reason, runnable = False, "No module named 'ipykernel'", True
        else:
            resolved = spec.resolved_python()
            if resolved in self._pythons_with_ipykernel:
                return
            result = await python_imports(resolved, "ipykernel")
            ok, reason, runnable = result.ok, result.reason, result.runnable
            if ok:
                self._pythons_with_ipykernel.add(resolved)
                return
        resolved = spec.resolved_python()
        if not runnable:
            raise AgentError(
                START_FAILED,
                f"cannot run the kernel's python {resolved} on {self.hostname}: {reason}; "
                "check the path in the kernel's argv",
            )
        raise AgentError(
            NO_IPYKERNEL,
            f"ipykernel is not installed for {resolved} on {self.hostname} ({reason}): "
            f"install it with `{resolved} -m pip install ipykernel`",
        )

    async def _launch_and_wait(self, kernel: Kernel, timeout: float) -> None:
        """Start the kernel's process and wait until it answers.

        Raises:
            AgentError: ``start_failed``, ``kernel_died`` or ``kernel_timeout``;
                the process is stopped in the latter cases.
        """
        kernel_id = kernel.kernel_id
        log_path = self.paths.kernel_log(kernel_id)
        connection_file = self.paths.connection_file(kernel_id)
        if not os.path.exists(connection_file):
            write_private_json(connection_file, kernel.connection)
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                         0o600)
        try:
            with os.fdopen(log_fd, "ab") as log_file:
                log_file.write(
                    f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting kernel\n".encode()
                )
                log_file.flush()
                process = kernel.launch.spawn(connection_file, log_file)
        except OSError as exc:
            raise AgentError(
                START_FAILED,
                f"cannot start kernel {kernel_id} on {self.hostname}: "
                f"{kernel.launch.argv[0]}: {exc.strerror or exc}; check the kernel's argv and cwd",
            )
        kernel.attach(process)
        kernel.tracker.reset(activity.STARTING)
        write_pid_file(self.paths.kernel_pid(kernel_id), process.pid)
        kernel.launch.save(self.paths.kernel_launch(kernel_id), process.pid, kernel.start_time)
        log.info("kernel %s: started process %d, waiting for it", kernel_id, process.pid)

        outcome = await wait_until_ready(kernel.connection, self.context, kernel.poll, timeout)
        if outcome == READY:
            kernel.tracker.mark_ready()
            kernel.state_known.set()
            return
        if outcome == DIED:
            tail = log_tail(log_path)
            log.warning("kernel %s died during startup with code %s", kernel_id, kernel.exit_code)
            raise AgentError(
                KERNEL_DIED,
                f"kernel {kernel_id} on {self.hostname} exited with code {kernel.exit_code} "
                f"before it answered; its log ({log_path}) ends with:\n{tail}",
            )
        await self._stop_process(kernel, now=True)
        tail = log_tail(log_path)
        raise AgentError(
            KERNEL_TIMEOUT,
            f"kernel {kernel_id} on {self.hostname} did not answer within {timeout:.0f} s "
            f"and was stopped; pass a longer timeout if the host is slow. "
            f"Its log ({log_path}) ends with:\n{tail}",
        )

    async def _forget(self, kernel: Kernel) -> None:
        """Stop a kernel's process if any, its tracker, and remove it and its files."""
        if kernel.pid and not kernel.exited:
            await self._stop_process(kernel, now=True)
        await kernel.tracker.close()
        if self.kernels.get(kernel.kernel_id) is kernel:
            del self.kernels[kernel.kernel_id]
        self._remove_files(kernel.kernel_id, kernel.connection)

    def _remove_files(self, kernel_id: str, connection: dict[str, Any] | None = None) -> None:
        """Remove a kernel's files, and its sockets when they are in the state directory."""
        if connection is None:
            with contextlib.suppress(OSError, ValueError):
                connection = read_connection_file(self.paths.connection_file(kernel_id))
        if connection is not None and os.path.dirname(str(connection["ip"])) == self.paths.root:
            remove_ipc_sockets(connection)
        for path in (
            self.paths.connection_file(kernel_id),
            self.paths.kernel_pid(kernel_id),
            self.paths.kernel_launch(kernel_id),
            self.paths.kernel_log(kernel_id),
        ):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # ------------------------------------------------------------------ control

    async def restart(self, kernel_id: str | None, timeout: float, now: bool) -> dict[str, Any]:
        """Replace a kernel's process with a new one on the same ports and key.

        Args:
            kernel_id: The kernel.
            timeout: Seconds to wait for the new process to answer.
            now: Kill the old process at once instead of SIGTERM first.

        Returns:
            ``{"kernel_id", "pid", "connection"}`` with the same connection as before.

        Raises:
            AgentError: Unknown kernel, or the new process died or did not
                answer (the kernel then stays listed, dead, and can be restarted
                again or shut down).
        """
        kernel = self.get(kernel_id)
        async with kernel.lock:
            if self.kernels.get(kernel.kernel_id) is not kernel:
                raise self._gone(kernel.kernel_id)
            await self._stop_process(kernel, now=now)
            await self._launch_and_wait(kernel, timeout)
            log.info("kernel %s restarted (pid %d)", kernel.kernel_id, kernel.pid)
            return kernel.start_result()

    def interrupt(self, kernel_id: str | None) -> None:
        """Send SIGINT to the kernel (its process group, as jupyter_client does).

        Raises:
            AgentError: Unknown kernel, or its process is not running.
        """
        self.signal(kernel_id, signal.SIGINT)

    def signal(self, kernel_id: str | None, signum: int) -> None:
        """Send ``signum`` to the kernel's process group; the kernel stays listed.

        Raises:
            AgentError: Unknown kernel, or its process is not running.
        """
        kernel = self.get(kernel_id)
        if not kernel.poll() or not signal_group(kernel.pid, signum):
            raise AgentError(
                KERNEL_DIED,
                f"kernel {kernel.kernel_id} on {self.hostname} is not running "
                f"(exit code {kernel.exit_code}): restart it",
            )
        log.info("kernel %s sent signal %d", kernel.kernel_id, signum)

    async def shutdown(self, kernel_id: str | None, now: bool) -> dict[str, Any]:
        """Stop a kernel's process group and forget the kernel and its files.

        Args:
            kernel_id: The kernel.
            now: SIGKILL at once instead of SIGTERM and a grace period.

        Returns:
            ``{"exit_code"}``: the process's exit status (negative: killed by that
            signal), or None when it was not the agent's child (re-adopted).
        """
        kernel = self.get(kernel_id)
        async with kernel.lock:
            if self.kernels.get(kernel.kernel_id) is not kernel:
                raise self._gone(kernel.kernel_id)
            await self._stop_process(kernel, now=now)
            await self._forget(kernel)
        log.info("kernel %s shut down (exit code %s)", kernel.kernel_id, kernel.exit_code)
        return {"exit_code": kernel.exit_code}

    def _gone(self, kernel_id: str) -> AgentError:
        return AgentError(
            UNKNOWN_KERNEL, f"kernel {kernel_id} on {self.hostname} was shut down meanwhile"
        )

    async def _stop_process(self, kernel: Kernel, now: bool) -> None:
        """Stop the kernel's process group: SIGTERM, then SIGKILL after a grace period."""
        if kernel.poll():
            if not now:
                signal_group(kernel.pid, signal.SIGTERM)
                await kernel.wait_exit(STOP_GRACE_SECONDS)
            if kernel.poll():
                signal_group(kernel.pid, signal.SIGKILL)
                if not await kernel.wait_exit(STOP_GRACE_SECONDS):
                    log.error("kernel %s: pid %d survived SIGKILL", kernel.kernel_id, kernel.pid)
        # Whatever the kernel started in its session goes too; but only while no
        # process holds the pid, so that a reused pid's group is never hit.
        if kernel.pid and not pid_alive(kernel.pid):
            try:
                os.killpg(kernel.pid, signal.SIGKILL)
            except OSError:
                pass
        if kernel.process is None and kernel.pid:
            await wait_gone(kernel.pid, kernel.start_time, 1.0)

    # ------------------------------------------------------------------ re-adoption

    def adopt_existing(self) -> None:
        """Take over kernels a previous agent left running; clean up after dead ones."""
        for connection_file in sorted(glob.glob(os.path.join(self.paths.kernels, "*.json"))):
            kernel_id = os.path.basename(connection_file)[: -len(".json")]
            if not KERNEL_ID_PATTERN.match(kernel_id) or kernel_id in self.kernels:
                continue
            try:
                self._adopt(kernel_id)
            except (OSError, ValueError) as exc:
                log.warning("kernel %s: not re-adopted (%s); removing its files", kernel_id, exc)
                self._remove_files(kernel_id)

    def _adopt(self, kernel_id: str) -> None:
        connection = read_connection_file(self.paths.connection_file(kernel_id))
        with open(self.paths.kernel_pid(kernel_id)) as handle:
            pid = int(handle.read().strip())
        try:
            loaded = LaunchSpec.load(self.paths.kernel_launch(kernel_id))
        except (OSError, ValueError) as exc:
            # Still take over a live kernel; a restart will run the default command.
            log.warning("kernel %s: launch record unreadable (%s)", kernel_id, exc)
            loaded = LoadedLaunch(LaunchSpec(default_argv(), is_default=True), None)
        if not pid_alive(pid, loaded.start_time):
            raise StateFileError(f"its process {pid} is gone")
        tracker = ActivityTracker(kernel_id, connection, self.context, activity.UNKNOWN)
        kernel = Kernel(kernel_id, connection, loaded.spec, tracker)
        kernel.adopt(pid, loaded.start_time)
        self.kernels[kernel_id] = kernel
        tracker.start()
        self._spawn_background(self._learn_state(kernel))
        log.info("kernel %s (pid %d) re-adopted", kernel_id, pid)

    async def _learn_state(self, kernel: Kernel) -> None:
        """Find out whether a re-adopted kernel is idle or busy.

        Its shell answers a kernel_info request at once when it is idle, and
        only after the running cell when it is busy.
        """
        try:
            outcome = await wait_until_ready(kernel.connection, self.context, kernel.poll,
                                             PROBE_BUSY_AFTER)
            if outcome == TIMEOUT:
                kernel.tracker.mark_running()
                kernel.state_known.set()
                outcome = await wait_until_ready(kernel.connection, self.context, kernel.poll,
                                                 24 * 3600)
            if outcome == READY:
                kernel.tracker.mark_ready()
        finally:
            kernel.state_known.set()
