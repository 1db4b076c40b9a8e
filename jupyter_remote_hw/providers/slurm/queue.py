"""SLURM's commands over the login node's SSH connection: submit, watch, cancel, list.

Every command runs through :class:`SlurmShell`, which puts the cluster's
environment (``SLURM_CONF``, module paths...) in front of it, so nothing here
depends on the login shell's startup files.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ...transport import CommandResult, SSHConnection
from .errors import SLURMError
from .settings import env_name_error

#: Job states after which nothing runs any more.
FINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)

#: Why a job ended, in words, by its final state.
END_WORDS = {
    "TIMEOUT": "it reached its time limit",
    "CANCELLED": "it was cancelled (scancel, by you or an administrator)",
    "PREEMPTED": "it was preempted by a job of higher priority",
    "NODE_FAIL": "its node failed",
    "BOOT_FAIL": "its node failed to boot",
    "DEADLINE": "it reached its deadline",
    "OUT_OF_MEMORY": "it ran out of memory",
    "FAILED": "its holder script failed",
    "COMPLETED": "its agent exited (no kernel and no client for its idle limit)",
    "GONE": "SLURM no longer knows it (it ended a while ago)",
}

#: squeue's fields for one job, ``|``-separated.
_JOB_FORMAT = "%i|%T|%r|%S|%e|%L|%N|%P|%l|%M"

#: Tag in a job's comment that marks it as started by jupyter-remote-hw.
COMMENT_TAG = "jupyter-remote-hw"


@dataclass(frozen=True)
class JobState:
    """One job as squeue describes it.

    Attributes:
        job_id: The job id.
        state: SLURM's state (``PENDING``, ``RUNNING``, ``TIMEOUT``...), or ``GONE``
            when squeue no longer lists it.
        reason: The pending or end reason (``Resources``, ``Priority``, ``TimeLimit``).
        start: Expected (pending) or actual start, as SLURM prints it, or ``N/A``.
        end: Expected end (``N/A`` when unknown).
        time_left: Time left as SLURM prints it (``4:58``), or ``INVALID``.
        nodes: The nodes it runs on (empty while pending).
        partition: Its partition.
        time_limit: Its time limit as SLURM prints it.
        position: Its place among the partition's pending jobs (1 first), when pending.
        marked: Whether the marker file asked about exists (see :meth:`SlurmShell.job`).
    """

    job_id: str
    state: str
    reason: str = ""
    start: str = "N/A"
    end: str = "N/A"
    time_left: str = ""
    nodes: str = ""
    partition: str = ""
    time_limit: str = ""
    position: int | None = None
    marked: bool = False

    @property
    def pending(self) -> bool:
        """Whether it waits in the queue."""
        return self.state in ("PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED")

    @property
    def running(self) -> bool:
        """Whether its allocation is there."""
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        """Whether it has ended (a job still ``COMPLETING`` has not: its final state,
        the reason it ended, comes with the next look)."""
        return self.state in FINAL_STATES or self.state == "GONE"

    def queue_line(self) -> str:
        """The launch step's line while it pends, what matters most first (a narrow
        toolbar shows its start): ``#1 in the gpu queue (Resources), job 12 PENDING,
        expected start ...``; without a known position, ``job 12 PENDING (Priority)``."""
        reason = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        if self.position is not None:
            parts = [
                f"#{self.position} in the {self.partition} queue{reason}",
                f"job {self.job_id} {self.state}",
            ]
        else:
            parts = [f"job {self.job_id} {self.state}{reason}"]
        if self.start not in ("N/A", "", "Unknown"):
            parts.append(f"expected start {self.start.replace('T', ' ')}")
        return ", ".join(parts)

    def end_line(self) -> str:
        """Why it ended, in words: ``SLURM job 12 ended: TIMEOUT (it reached ...)``."""
        words = END_WORDS.get(self.state, self.reason or "")
        return f"SLURM job {self.job_id} ended: {self.state}" + (f" ({words})" if words else "")

    def seconds_left(self) -> float | None:
        """Seconds left before its time limit, from ``time_left``; None when unknown."""
        return parse_duration(self.time_left)


def parse_duration(text: str) -> float | None:
    """Seconds in SLURM's ``[days-][hours:]minutes:seconds`` (or None for others)."""
    text = text.strip()
    if not text or text in ("INVALID", "UNLIMITED", "NOT_SET", "N/A"):
        return None
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        days = int(head)
    try:
        numbers = [int(part) for part in text.split(":")]
    except ValueError:
        return None
    while len(numbers) < 3:
        numbers.insert(0, 0)
    hours, minutes, seconds = numbers[-3:]
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


#: squeue: this user's live jobs with their comments (see :func:`parse_ours`).
OURS_COMMAND = f"squeue -h --me -o '{_JOB_FORMAT}|%k'"


def parse_ours(text: str) -> list[tuple[JobState, str]]:
    """The jobs in :data:`OURS_COMMAND`'s output whose comment carries our tag, with that
    comment; a job ``COMPLETING`` is ending already, and not among them."""
    found = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 11 or not fields[10].startswith(COMMENT_TAG):
            continue
        state = parse_job("|".join(fields[:10]))
        if state is not None and state.state != "COMPLETING" and not state.ended:
            found.append((state, fields[10]))
    return found


class SlurmShell:
    """Runs SLURM's commands on a cluster's login node.

    Args:
        cluster: The cluster's configured name, for messages.
        conn: The login node's SSH connection.
        env: Variables set in front of every command (``SLURM_CONF``...).

    Raises:
        ValueError: A name of ``env`` is not a shell variable name.
    """

    def __init__(self, cluster: str, conn: SSHConnection, env: dict[str, str]) -> None:
        for key in env:
            error = env_name_error(cluster, key)
            if error is not None:
                raise ValueError(error)
        self.cluster = cluster
        self.conn = conn
        self.env = dict(env)

    def command(self, text: str) -> str:
        """``text`` with the cluster's environment exported first."""
        exports = "".join(
            f"export {key}={shlex.quote(value)}; " for key, value in sorted(self.env.items())
        )
        return exports + text

    async def run(
        self, text: str, *, input: str | None = None, timeout: float | None = None
    ) -> CommandResult:
        """Run ``text`` (sh syntax) on the login node."""
        return await self.conn.run(self.command(text), input=input, timeout=timeout)

    async def checked(self, text: str, what: str) -> str:
        """Run ``text``; its stdout, or a :class:`SLURMError` naming ``what`` failed."""
        result = await self.run(text)
        if not result.ok:
            said = (result.stderr or result.stdout).strip().splitlines()
            raise SLURMError(self.cluster, f"{what} failed: {said[-1] if said else 'no output'}")
        return result.stdout

    async def submit(self, options: list[str], script: str) -> CommandResult:
        """``sbatch --parsable OPTIONS`` with ``script`` on its stdin."""
        return await self.run(shlex.join(["sbatch", "--parsable", *options]), input=script)

    async def job(
        self, job_id: str, with_position: bool = False, marker: str | None = None
    ) -> JobState:
        """The job's state now (``GONE`` once squeue no longer lists it).

        Args:
            job_id: The job.
            with_position: Also find its place among its partition's pending jobs.
            marker: A file on the cluster whose existence is reported in
                :attr:`JobState.marked` (the holder's note of SLURM's warning).
        """
        text = f"squeue -h -t all -j {shlex.quote(job_id)} -o '{_JOB_FORMAT}' 2>/dev/null"
        if with_position:
            text += "; echo @@; squeue -h -t PD --sort=-p,i -o '%i|%P'"
        if marker:
            text += f"; test -e {shlex.quote(marker)} && echo @@marked"
        result = await self.run(text)
        marked = "@@marked" in result.stdout
        head, _, queue = result.stdout.replace("@@marked", "").partition("@@")
        state = next((parse_job(line) for line in head.splitlines() if line.strip()), None)
        if state is None:
            return JobState(job_id=job_id, state="GONE")
        if marked:
            state = JobState(**{**state.__dict__, "marked": True})
        if with_position and state.pending:
            ahead = [
                line.split("|")[0]
                for line in queue.splitlines()
                if line.strip() and line.split("|")[-1] == state.partition
            ]
            if job_id in ahead:
                state = JobState(**{**state.__dict__, "position": ahead.index(job_id) + 1})
        return state

    async def cancel(self, job_id: str) -> None:
        """``scancel`` the job (nothing happens for one that has ended)."""
        await self.run(f"scancel {shlex.quote(job_id)}")

    async def ours(self) -> list[tuple[JobState, str]]:
        """This user's live jobs whose comment carries our tag, with that comment (a job
        ``COMPLETING`` is ending already, and not among them).

        Raises:
            SLURMError: squeue failed (so no job is taken for ended).
        """
        return parse_ours(await self.checked(OURS_COMMAND, "squeue"))


def parse_job(line: str) -> JobState | None:
    """A :class:`JobState` from one line of :data:`_JOB_FORMAT`."""
    fields = line.strip().split("|")
    if len(fields) != 10 or not fields[0]:
        return None
    job_id, state, reason, start, end, left, nodes, partition, limit, _used = fields
    return JobState(
        job_id=job_id,
        state=state.split()[0],
        reason=reason,
        start=start,
        end=end,
        time_left=left,
        nodes=nodes,
        partition=partition,
        time_limit=limit,
    )


__all__ = [
    "COMMENT_TAG",
    "FINAL_STATES",
    "OURS_COMMAND",
    "JobState",
    "SlurmShell",
    "parse_duration",
    "parse_job",
    "parse_ours",
]
