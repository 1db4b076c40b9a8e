"""The kernels one agent runs: start, restart, interrupt, shut down, report, re-adopt."""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from . import activity
from .activity import ActivityTracker
from .connection import (
    StateFileError,
    ports_of,
    read_connection_file,
    remove_ipc_sockets,
)
from .kernel import Kernel
from .kernel_start import KERNEL_ID_PATTERN, KernelStarting
from .launch import LaunchSpec, LoadedLaunch, default_argv
from .paths import StatePaths
from .processes import (
    pid_alive,
    signal_group,
    wait_gone,
)
from .protocol import (
    BAD_REQUEST,
    KERNEL_DIED,
    UNKNOWN_KERNEL,
    AgentError,
)
from .readiness import READY, TIMEOUT, wait_until_ready

if TYPE_CHECKING:
    import zmq.asyncio

log = logging.getLogger(__name__)

STOP_GRACE_SECONDS = 5.0
_REAP_INTERVAL = 0.5
FORGET_DEAD_AFTER = 10.0
"""Seconds a kernel whose process ended on its own stays listed (dead, restartable),
so that its client can see its exit code and restart it on the same ports."""
PROBE_BUSY_AFTER = 2.0
"""Seconds a re-adopted kernel's shell has to answer kernel_info before it counts as busy."""
STATE_WAIT = 3.0
"""Seconds a status request waits for a re-adopted kernel's state to be known."""

ForgetCallback = Callable[[str], Awaitable[None]]


class KernelManager(KernelStarting):
    """All kernels of one agent, with their files under ``<state>/kernels``.

    Args:
        paths: The agent's state directory layout.
        context: A zmq asyncio context, or None when pyzmq is unavailable.
        on_forget: Awaited with a kernel's id after the agent ended or forgot it
            on its own (an orphan, or a process that died), not on request.
    """

    def __init__(
        self,
        paths: StatePaths,
        context: zmq.asyncio.Context | None,
        on_forget: ForgetCallback | None = None,
    ) -> None:
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
                        log.info(
                            "kernel %s: forgotten, %.0f s after its process ended and "
                            "no client restarted it",
                            kernel.kernel_id,
                            FORGET_DEAD_AFTER,
                        )
                        self._retire(kernel)
                    continue
                unheld = kernel.hold.orphaned_for(time.time())
                if unheld is not None and unheld >= kernel.hold.grace:
                    owner = kernel.hold.owner
                    log.warning(
                        "kernel %s (pid %d): shutting it down, no client has held it for "
                        "%.0f s (its orphan grace); it was started by %s",
                        kernel.kernel_id,
                        kernel.pid,
                        unheld,
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

    async def restart(
        self,
        kernel_id: str | None,
        timeout: float,
        now: bool,
        stopped: Callable[[str], Awaitable[None]] | None = None,
    ) -> dict[str, Any]:
        """Replace a kernel's process with a new one on the same ports and key.

        Args:
            kernel_id: The kernel.
            timeout: Seconds to wait for the new process to answer.
            now: Kill the old process at once instead of SIGTERM first.
            stopped: Awaited with the kernel's id once the old process is gone, before
                the new one starts.

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
            if stopped is not None:
                await stopped(kernel.kernel_id)
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
            outcome = await wait_until_ready(
                kernel.connection, self.context, kernel.poll, PROBE_BUSY_AFTER
            )
            if outcome == TIMEOUT:
                kernel.tracker.mark_running()
                kernel.state_known.set()
                outcome = await wait_until_ready(
                    kernel.connection, self.context, kernel.poll, 24 * 3600
                )
            if outcome == READY:
                kernel.tracker.mark_ready()
        finally:
            kernel.state_known.set()
