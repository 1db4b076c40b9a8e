"""How SLURM allocations end on purpose: cancelled by the user (the machines panel's
Terminate), or reaped when no live kernel uses them any more."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ...ledger.store import FINAL_STATES as LEDGER_FINAL
from ...ledger.store import MachineRecord
from ...transport import TransportError
from .allocations import record_ended
from .errors import SLURMError
from .liveness import live_kernels
from .queue import JobState, SlurmShell

if TYPE_CHECKING:
    from ..target import Target
    from .access import ClusterAccess


async def terminate_job(
    provider: ClusterAccess, record: MachineRecord, detail: str = "by the user"
) -> MachineRecord:
    """Cancel an allocation's job (the machines panel's Terminate); its kernels end
    with it, and are reported dead with that reason.

    Raises:
        LoginUnreachableError: The cluster's login node cannot be reached.
    """
    assert provider.ledger is not None
    cluster = str(record.info.get("cluster") or record.region)
    job_id = record.resource_id
    if job_id and record.state not in LEDGER_FINAL and cluster in provider.clusters:
        shell = provider.shell(cluster, await provider.connect_login(cluster))
        await shell.cancel(job_id)
    return provider.ledger.set_machine_state(
        record.machine_id, "terminated", f"SLURM job {job_id or '?'} was cancelled {detail}"
    )


async def end_after_hibernation(provider: ClusterAccess, target: Target) -> str | None:
    """The last kernel of allocation ``target`` hibernated and its agent stopped: its
    holder job ends within seconds (it ends once its agent is gone). Record it as ended
    now, so that it is not offered to share meanwhile (a job the ledger has ended that
    still runs is cancelled by ``reap``). What was done, for people; None when the
    ledger has no live job of ``target``.
    """
    ended = record_ended(
        provider, lambda record: record.name == target.name, "its last kernel hibernated"
    )
    return "; ".join(f"SLURM job {job_id} ends with its agent" for job_id in ended) or None


async def reap_jobs(
    provider: ClusterAccess, live_kernel_targets: set[str], *, dry_run: bool = False
) -> tuple[list[str], list[str]]:
    """Cancel the jobs this ledger started whose kernels are gone, asked on the cluster.

    A job is ours when its comment carries our tag and the ledger id in it is
    one of this ledger's allocations. A running job is kept while the agent in it
    says a kernel of it lives (:func:`.liveness.live_kernels`): a ledger row
    outlives a killed server, and a kernel killed in its job leaves the job
    running for nothing. A queued job is kept while a kernel the ledger knows
    waits for it (``live_kernel_targets``). Jobs with our tag that this ledger
    did not start (another Jupyter server's, on another machine) are left
    running and returned, for people to check.

    Args:
        live_kernel_targets: Targets that kernels in the ledger run on (or wait for).
        dry_run: Only say what would be cancelled.

    Returns:
        The job ids cancelled (or to cancel, with ``dry_run``), and those of
        tagged jobs left running because this ledger did not start them.
    """
    assert provider.ledger is not None
    cancelled: list[str] = []
    unknown: list[str] = []
    for cluster in provider.clusters:
        try:
            shell = provider.shell(cluster, await provider.connect_login(cluster))
            jobs = await shell.ours()
        except (TransportError, SLURMError, OSError) as exc:
            provider.log.warning("reap: %s", exc)
            continue
        for state, comment in jobs:
            machine_id = comment.split(":", 1)[1] if ":" in comment else ""
            record = provider.ledger.get_machine(machine_id) if machine_id else None
            if record is None or record.provider != provider.name:
                unknown.append(state.job_id)
                continue
            why = await _why_reaped(provider, shell, state, record, live_kernel_targets)
            if why is None:
                continue
            cancelled.append(state.job_id)
            if dry_run:
                continue
            await shell.cancel(state.job_id)
            detail = f"SLURM job {state.job_id} was cancelled: reaped ({why})"
            with contextlib.suppress(KeyError):
                provider.ledger.set_machine_state(record.machine_id, "terminated", detail)
            provider.log.info("%s", detail)
    return cancelled, unknown


async def _why_reaped(
    provider: ClusterAccess,
    shell: SlurmShell,
    state: JobState,
    record: MachineRecord,
    live_kernel_targets: set[str],
) -> str | None:
    """Why our job ``state`` is to be cancelled, or None while a kernel lives in it."""
    if record.state in LEDGER_FINAL:
        return f"the ledger has it {record.state}"
    if not state.running:
        if record.name in live_kernel_targets:
            return None  # a launch waits for it in the queue
        return "no kernel waits for it"
    job_dir = str(record.info.get("job_dir") or "")
    alive = await live_kernels(provider, shell, state, job_dir) if job_dir else None
    if alive is None and record.name in live_kernel_targets:
        return None  # its agent is being started for a kernel of the ledger
    if alive:
        return None
    return "no kernel lives in it"


__all__ = ["end_after_hibernation", "reap_jobs", "terminate_job"]
