"""Starting a kernel: its id and working directory checked, ipykernel looked for, its
channels and connection file made, its process started and waited for until it answers.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from . import activity
from .activity import ActivityTracker
from .connection import (
    new_connection_info,
    write_private_json,
)
from .kernel import Kernel
from .launch import LaunchSpec, default_argv
from .paths import StatePaths
from .processes import (
    log_tail,
    python_imports,
    write_pid_file,
)
from .protocol import (
    BAD_REQUEST,
    KERNEL_DIED,
    KERNEL_EXISTS,
    KERNEL_TIMEOUT,
    NO_IPYKERNEL,
    START_FAILED,
    AgentError,
)
from .readiness import DIED, READY, wait_until_ready

if TYPE_CHECKING:
    import zmq.asyncio


log = logging.getLogger(__name__)

KERNEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
#: A key a caller may give a kernel: hex digits (a uuid's dashes allowed).
_KEY_PATTERN = re.compile(r"^[0-9A-Fa-f-]{32,128}$")


DEFAULT_START_TIMEOUT = 60.0


_PORT_RETRIES = 3


class KernelStarting:
    """How :class:`.kernels.KernelManager` starts a kernel."""

    paths: StatePaths
    context: zmq.asyncio.Context | None
    hostname: str
    kernels: dict[str, Kernel]
    _reserved: set[str]
    _pythons_with_ipykernel: set[str]

    def _ports_in_use(self) -> set[int]:
        raise NotImplementedError

    async def _forget(self, kernel: Kernel) -> None:
        raise NotImplementedError

    async def _stop_process(self, kernel: Kernel, now: bool) -> None:
        raise NotImplementedError

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
        key: str | None = None,
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
            key: The key its messages are signed with (hex digits), or None for a
                new random one. A kernel woken from hibernation gets its old key,
                so that clients connected to it all along keep working.

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
        if key is not None and not _KEY_PATTERN.match(key):
            raise AgentError(BAD_REQUEST, "start_kernel: 'key' must be 32 to 128 hex digits")
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
                kernel = self._new_kernel(kernel_id, spec, key)
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
                log.info(
                    "kernel %s started (pid %d) in %s",
                    kernel_id,
                    kernel.pid,
                    spec.cwd or os.getcwd(),
                )
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

    def _new_kernel(self, kernel_id: str, spec: LaunchSpec, key: str | None = None) -> Kernel:
        """Register a kernel with fresh channels and key (or ``key``), and write its
        connection file.

        An ipykernel listens on UNIX sockets in the state directory, which
        only this user can enter; a custom command line (which may not speak
        ZMQ's ``ipc`` transport) gets ports on 127.0.0.1.
        """
        ipc_dir = (
            self.paths.root
            if spec.argv and (spec.is_default or spec.ipykernel_python() is not None)
            else None
        )
        connection = new_connection_info(avoid=self._ports_in_use(), ipc_dir=ipc_dir)
        if key is not None:
            connection["key"] = key
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
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
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
                f"cannot start the kernel on {self.hostname}: "
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
                f"the kernel on {self.hostname} exited with code {kernel.exit_code} "
                f"before it answered; its log ({log_path}) ends with:\n{tail}",
            )
        await self._stop_process(kernel, now=True)
        tail = log_tail(log_path)
        raise AgentError(
            KERNEL_TIMEOUT,
            f"the kernel on {self.hostname} did not answer within {timeout:.0f} s "
            f"and was stopped; pass a longer timeout if the host is slow. "
            f"Its log ({log_path}) ends with:\n{tail}",
        )
