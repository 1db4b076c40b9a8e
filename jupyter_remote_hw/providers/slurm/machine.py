"""A kernel host inside a SLURM allocation, reached through the cluster's login node.

The holder job keeps the allocation. The agent runs in a step of that job
(``srun --jobid=ID --overlap``), started detached from the login node's SSH
session, so kernels survive a dropped link and a restarted Jupyter server; they
are processes of the job, so SLURM ends them with it (time limit, scancel,
preemption). The agent's socket and the kernels' ports are reached through the
login node's one SSH connection, as for an SSH host.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...agent_client import AgentClient, AgentError, AgentUnavailableError, Progress, agent_zipapp
from ...ledger import Ledger
from ...transport import SSHConnection, TransportError, TransportManager
from ..ssh import SSHMachine
from ..target import Target
from .bridge import BridgeForward, open_bridge
from .errors import SLURMRefusedError
from .queue import JobState, SlurmShell
from .trust import MINE, MY_FILE, REFUSED, chain, refused_line

#: Seconds the agent may take to answer once its step was started.
AGENT_START_WAIT = 60.0


@dataclass(frozen=True)
class Allocation:
    """A holder job and where its files are on the cluster.

    Attributes:
        cluster: The configured cluster's name.
        job_id: The holder job's id.
        home: The directory under which the agent's bundle is cached (absolute).
        job_dir: The job's directory on the cluster (absolute): the agent's state
            directory, its log, the warning marker.
        machine_id: The ledger's row for it.
    """

    cluster: str
    job_id: str
    home: str
    job_dir: str
    machine_id: str

    @property
    def socket(self) -> str:
        """The agent's socket."""
        return f"{self.job_dir}/agent/agent.sock"


def job_dir(base: str, job_id: str) -> str:
    """The directory of job ``job_id`` under the provider's base directory."""
    return f"{base}/{job_id}"


class SLURMMachine(SSHMachine):
    """One SLURM allocation, running one agent and its kernels.

    Args:
        shell: Runs SLURM's commands on the login node.
        allocation: The holder job.
        ledger: Where the job's state changes are recorded.
        watch_interval: Seconds between checks of the job's state.
        lifetime: The agent's lifetime policy (idle stop), with ``scancel`` as its
            stop command; empty: none.
        notify: Called with a line for the user when the job's time is nearly up
            (SLURM's signal reached the job, or its queue says so).
        bridged: Carry every stream to the node through a job step (see
            :mod:`.bridge`); False where the login node reaches the node's sockets
            itself (a single-host cluster).
        warn: Seconds before the time limit at which the user is told (the cluster
            entry's ``warn``, which SLURM's ``--signal`` is also given).
    """

    def __init__(
        self,
        target: Target,
        transport: TransportManager,
        conn: SSHConnection,
        log: logging.Logger,
        idle_exit: float,
        relay_buffer: int,
        *,
        shell: SlurmShell,
        allocation: Allocation,
        ledger: Ledger,
        watch_interval: float = 5.0,
        lifetime: dict[str, Any] | None = None,
        notify: Callable[[str], None] | None = None,
        bridged: bool = True,
        warn: float = 300.0,
    ) -> None:
        super().__init__(target, transport, conn, log, idle_exit, relay_buffer)
        self.shell = shell
        self.allocation = allocation
        self.ledger = ledger
        self.watch_interval = watch_interval
        self.lifetime = dict(lifetime or {})
        self.notify = notify
        self.bridged = bridged
        self.warn = warn
        self._warned = False
        self._read_at = time.monotonic()
        self.job: JobState | None = None
        """The job's state when last checked."""
        self._ended: str | None = None
        self._watcher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ the job

    def end_reason(self) -> str | None:
        """Why the job ended (``SLURM job 12 ended: TIMEOUT (...)``), or None while it runs."""
        return self._ended

    async def confirm_end(self, tries: int = 10, interval: float = 0.5) -> str | None:
        """Ask SLURM now whether the job ended; while it is ``COMPLETING`` (ending, its
        final state not yet known), ask again, ``tries`` times at most."""
        for _ in range(tries):
            if self._ended is not None:
                break
            try:
                state = await self.refresh()
            except (TransportError, OSError) as exc:
                self.log.debug("machine %s: job state not read: %s", self.target.name, exc)
                break
            if state.state != "COMPLETING":
                break
            await asyncio.sleep(interval)
        return self._ended

    def seconds_left(self) -> float | None:
        """Seconds before the job's time limit (from the last check, less the time since);
        None when unknown."""
        if self.job is None or self._ended:
            return None
        left = self.job.seconds_left()
        if left is None:
            return None
        return max(0.0, left - (time.monotonic() - self._read_at))

    def _mark_ended(self, state: JobState, detail: str | None = None) -> None:
        if self._ended is not None:
            return
        self._ended = detail or state.end_line()
        self.log.warning("machine %s: %s", self.target.name, self._ended)
        with contextlib.suppress(KeyError):
            self.ledger.set_machine_state(self.allocation.machine_id, "terminated", self._ended)

    async def refresh(self) -> JobState:
        """Ask SLURM for the job's state now; an ended job is recorded as such, and
        SLURM's early warning is said once."""
        marker = None if self._warned else f"{self.allocation.job_dir}/warned"
        state = await self.shell.job(self.allocation.job_id, marker=marker)
        self.job, self._read_at = state, time.monotonic()
        if state.ended and self._ended is None:
            self._mark_ended(state, await self._stopped_by_agent(state))
        elif not self._warned and (state.marked or self._warning_due(state)):
            self._warned = True
            left = state.seconds_left()
            when = f"in {left:.0f} s" if left is not None else "soon"
            notice = (
                f"SLURM job {state.job_id} ends {when} (its time limit): save your work; "
                "the kernel ends with it"
            )
            self.log.warning("machine %s: %s", self.target.name, notice)
            with contextlib.suppress(KeyError):
                self.ledger.note_machine(self.allocation.machine_id, "warned", notice)
            if self.notify is not None:
                self.notify(notice)
        return state

    def _warning_due(self, state: JobState) -> bool:
        """Whether the job is within :attr:`warn` seconds of its time limit, as SLURM's
        queue says: the notice does not wait for SLURM's own signal, which comes up to a
        minute late or early (the resolution of its timers), or not at all when the job
        ends first."""
        left = state.seconds_left()
        return state.state == "RUNNING" and left is not None and left <= self.warn

    async def _stopped_by_agent(self, state: JobState) -> str | None:
        """Why the agent cancelled its own job (its idle stop), when it did."""
        if state.state != "CANCELLED":
            return None
        result = await self.shell.run(
            f"cat {shlex.quote(self.allocation.job_dir + '/stopped')} 2>/dev/null"
        )
        why = result.stdout.strip()
        if why != "idle":
            return None
        idle = self.lifetime.get("idle_stop", 0)
        return (
            f"SLURM job {state.job_id} was cancelled by its idle stop: no kernel activity "
            f"for {idle:g} s"
        )

    def stop_command(self) -> list[str]:
        """What the agent runs for its idle stop: note why, then cancel the job."""
        return [
            "sh",
            "-c",
            (
                f'echo "$JRHW_STOP_REASON" > '
                f"{shlex.quote(self.allocation.job_dir + '/stopped')}; "
                f"exec scancel {shlex.quote(self.allocation.job_id)}"
            ),
        ]

    async def _watch(self) -> None:
        """Check the job every :attr:`watch_interval` seconds until it has ended."""
        while self._ended is None:
            await asyncio.sleep(self.watch_interval)
            try:
                await self.refresh()
            except (TransportError, OSError) as exc:
                self.log.debug("machine %s: job state not read: %s", self.target.name, exc)

    def _start_watching(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch(), name=f"watch {self.target.name}")

    async def release(self, detail: str) -> None:
        """End the job now (``scancel``) and record why."""
        job_id = self.allocation.job_id
        if self._ended is None:
            self.log.info(
                "machine %s: cancelling SLURM job %s: %s", self.target.name, job_id, detail
            )
            try:
                await self.shell.cancel(job_id)
            except (TransportError, OSError) as exc:
                self.log.warning(
                    "machine %s: scancel %s failed (%s); `jupyter remote-hw reap` finds it",
                    self.target.name,
                    job_id,
                    exc,
                )
                return
            self._mark_ended(
                JobState(job_id, "CANCELLED"), f"SLURM job {job_id} was cancelled: {detail}"
            )

    # ------------------------------------------------------------------ the agent

    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        say = progress or (lambda _line: None)
        state = await self.refresh()
        if self._ended is not None:
            raise AgentUnavailableError(self._ended)
        if not state.running:
            raise AgentUnavailableError(
                f"SLURM job {state.job_id} is not running ({state.queue_line()})"
            )
        conn = await self._connection()
        ready = await self._running_agent(conn)
        if ready is None:
            say(f"prepare host: starting the agent in SLURM job {state.job_id} on {state.nodes}")
            ready = await self._launch_agent(conn, say)
        socket = str(ready["socket"])
        reader, writer = await self._open_unix(socket)
        client = AgentClient(reader, writer, where=self.target.where, log=self.log, socket=socket)
        if self.lifetime:
            try:
                await client.call("set_lifetime", **self.lifetime, stop_command=self.stop_command())
            except AgentError as exc:
                self.log.warning("machine %s: idle stop not set: %s", self.target.name, exc)
        self._open_spare(client)
        self._start_watching()
        return client

    async def _running_agent(self, conn: SSHConnection) -> dict[str, Any] | None:
        """The ready line of an agent already serving this job, if it still listens."""
        result = await self.shell.run(
            f"cat {shlex.quote(self.allocation.job_dir + '/agent.out')} 2>/dev/null"
        )
        ready = ready_line(result.stdout)
        if ready is None or "socket" not in ready:
            return None
        try:
            _reader, writer = await self._open_unix(str(ready["socket"]))
        except TransportError:
            return None
        writer.close()
        return ready

    async def _launch_agent(self, conn: SSHConnection, say: Progress) -> dict[str, Any]:
        """Start the agent in a step of the job, sending its bundle first when needed."""
        name, data = agent_zipapp()
        digest = hashlib.sha256(data).hexdigest()
        cache = f"{self.allocation.home}/.cache/jupyter-remote-hw"
        bundle = f"{cache}/{name}"
        directory = shlex.quote(self.allocation.job_dir)
        srun = shlex.join(
            [
                "srun",
                f"--jobid={self.allocation.job_id}",
                "--overlap",
                "-N1",
                "-n1",
                "--job-name=jupyter-remote-hw-agent",
                self.target.python,
                bundle,
                "serve",
                "--state-dir",
                f"{self.allocation.job_dir}/agent",
                "--idle-exit",
                f"{self.idle_exit:g}",
            ]
        )
        ticks = int(AGENT_START_WAIT * 10)
        home = shlex.quote(self.allocation.home)
        command = (
            f"{MINE}{MY_FILE}mine {chain(home, '.cache/jupyter-remote-hw')} "
            f"{self._job_chain()}; myfile {shlex.quote(bundle)}; "
            f'd={directory}; mkdir -p "$d" && chmod 700 "$d" || exit 1; '
            f'[ "$(sha256sum {shlex.quote(bundle)} 2>/dev/null | cut -c1-64)" = {digest} ] '
            "|| { echo need; exit 3; }; "
            'rm -f "$d/agent.out"; '
            f'setsid nohup {srun} </dev/null >"$d/agent.out" 2>"$d/agent.err" & '
            f"i=0; while [ $i -lt {ticks} ]; do "
            'if grep -q \'^{\' "$d/agent.out" 2>/dev/null; then cat "$d/agent.out"; exit 0; fi; '
            "sleep 0.1; i=$((i+1)); done; "
            'tail -n 5 "$d/agent.err" >&2; exit 1'
        )
        result = await self.shell.run(command, timeout=AGENT_START_WAIT + 30)
        if result.exit_status == 3:
            say(f"prepare host: uploading the agent ({len(data) // 1024} KiB)")
            await _upload(conn, self.allocation.home, bundle, data)
            result = await self.shell.run(command, timeout=AGENT_START_WAIT + 30)
        refusal = refused_line(result.stderr) if result.exit_status == REFUSED else None
        if refusal is not None:
            raise SLURMRefusedError(
                self.allocation.cluster, f"the agent was not started: {refusal}"
            )
        ready = ready_line(result.stdout)
        if ready is None or "error" in ready or "socket" not in ready:
            said = (ready or {}).get("error") or result.stderr.strip() or result.stdout.strip()
            raise AgentUnavailableError(
                f"the agent did not start in SLURM job {self.allocation.job_id}: "
                f"{said or 'no output'}. Check that `{self.target.python}` runs on the "
                "cluster's nodes (set the cluster's 'python')"
            )
        return ready

    def _job_chain(self) -> str:
        """The job's directory and the agent's in it, with their parents from the
        cluster's root down, as words for ``mine`` (see :mod:`.trust`)."""
        home, job = self.allocation.home.rstrip("/"), self.allocation.job_dir
        if job.startswith(home + "/"):
            return chain(shlex.quote(home), job[len(home) + 1 :] + "/agent")
        return f"{shlex.quote(job)} {shlex.quote(job + '/agent')}"

    # ------------------------------------------------------------------ streams

    async def _open_unix(self, path: str | int) -> tuple[Any, Any]:
        """A byte stream to a socket on the job's node (a path, or a port on its 127.0.0.1)."""
        conn = await self._connection()
        if not self.bridged:
            if isinstance(path, str):
                return await conn.open_unix_connection(path)
            return await conn.open_connection("127.0.0.1", path)
        node = (self.job.nodes if self.job is not None else "").split(",")[0]
        if not node:
            node = (await self.refresh()).nodes.split(",")[0]
        return await open_bridge(
            conn, self.shell.command, self.allocation.job_id, node, self.target.python, path
        )

    def _open_spare(self, client: AgentClient) -> None:
        """Open a stream to the agent ahead of need, while a kernel starts."""
        if client.socket is not None and not self._closing:
            spare = asyncio.ensure_future(self._open_unix(client.socket))
            spare.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._spare = spare

    async def _open_agent_stream(self) -> tuple[Any, Any]:
        """A new stream to the agent (the one opened ahead of need when it is open)."""
        client = await self.agent()
        stream = await self._take_spare()
        if stream is None:
            if client.socket is None:
                raise RuntimeError("the agent's socket is not known")
            stream = await self._open_unix(client.socket)
        self._open_spare(client)
        return stream

    async def _forward(  # type: ignore[override]
        self, conn: SSHConnection, remote_port: int, remote_path: str | None, local_port: int
    ) -> Any:
        """The heartbeat's local port: bridged through a job step, or forwarded directly."""
        if not self.bridged:
            return await SSHMachine._forward(conn, remote_port, remote_path, local_port)
        if local_port:
            with contextlib.suppress(OSError):
                return await BridgeForward(
                    self._open_unix, remote_port, remote_path, local_port, self.log
                ).start()
        return await BridgeForward(self._open_unix, remote_port, remote_path, 0, self.log).start()

    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        return await self._open_unix(where)

    # ------------------------------------------------------------------ kernels

    async def unexpose(self, kernel_id: str) -> None:
        """Stop relaying a kernel; once the allocation runs none, end the job."""
        await super().unexpose(kernel_id)
        if not self._closing and not self.exposed:
            await self.release("its last kernel was shut down")

    async def close(self) -> None:
        """Drop this side's link; the job and its kernels keep running (for a reattach)."""
        self._closing = True
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        await super().close()


async def _upload(conn: SSHConnection, home: str, bundle: str, data: bytes) -> None:
    """Store the agent's bundle at ``bundle`` on the cluster (owner-only, atomically),
    in a cache under ``home`` whose directories are ours (see :mod:`.trust`)."""
    part = shlex.quote(bundle + ".part")
    command = (
        f"umask 077; {MINE}mine {chain(shlex.quote(home), '.cache/jupyter-remote-hw')}; "
        f"rm -f {part} && cat > {part} && mv {part} {shlex.quote(bundle)} && echo stored"
    )
    async with asyncio.timeout(conn.settings.command_timeout):
        async with conn.open_process(command) as process:
            process.stdin.write(data)
            process.stdin.write_eof()
            said = await process.stdout.read()
            errors = await process.stderr.read()
            await process.wait()
    if b"stored" not in said:
        raise AgentUnavailableError(
            f"could not store the agent at {bundle} on the cluster: "
            f"{errors.decode(errors='replace').strip() or 'no output'}"
        )


def ready_line(output: str) -> dict[str, Any] | None:
    """The agent's last JSON line in ``output``, if any."""
    for line in reversed(output.strip().splitlines()):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict):
                return found
    return None


__all__ = ["Allocation", "SLURMMachine", "job_dir", "ready_line"]
