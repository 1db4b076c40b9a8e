"""Submitting a SLURM holder job and waiting in the queue until it runs.

The launch steps ``submit job`` and ``queue`` of :class:`.provider.SLURMProvider`:
the job's options, its script, the check of the time limit against the
partition's, the submission over the login node, the queue's state every few
seconds, and finding a job this ledger already holds for a target.
"""

from __future__ import annotations

import asyncio
import secrets
import shlex
from typing import TYPE_CHECKING

from ...ledger.store import FINAL_STATES as LEDGER_FINAL
from ...transport import CommandResult
from ..target import Target
from .errors import HOPELESS_REASONS, SLURMError, SLURMRefusedError, sbatch_error
from .machine import Allocation, job_dir
from .queue import COMMENT_TAG, JobState, SlurmShell, parse_duration
from .targets import Offer
from .trust import MINE, REFUSED, chain, refused_line

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps
    from .access import ClusterAccess

#: The jobs' directory under the cluster's root (or the login home).
BASE = ".local/state/jupyter-remote-hw/slurm"

#: Seconds a running holder job waits for its agent: when none has come by then (the
#: Jupyter server that submitted it stopped or lost the cluster while it was queued),
#: the job ends itself rather than hold GPUs for nobody.
AGENT_WAIT = 300

#: The holder job's script: it keeps the allocation, notes SLURM's early warning, and
#: ends the job once the agent it was made for has come and gone, or never came.
HOLDER_SCRIPT = """#!/bin/sh
# jupyter-remote-hw: holds this allocation for a notebook's kernels.
d={base}/$SLURM_JOB_ID
mkdir -p "$d" && chmod 700 "$d"
trap 'date +%s > "$d/warned"' USR1
waited=0
while :; do
  if [ -e "$d/agent/agent.lock" ]; then
    if flock -n "$d/agent/agent.lock" true 2>/dev/null; then
      exit 0
    fi
  elif [ "$waited" -ge {agent_wait} ]; then
    echo "jupyter-remote-hw: no agent came within {agent_wait} s; releasing the allocation"
    exit 0
  fi
  sleep 5 & wait $!
  waited=$((waited + 5))
done
"""


def sbatch_options(
    provider: ClusterAccess, cluster: str, offer: Offer, base: str, tag: str
) -> list[str]:
    entry = provider.cluster_settings(cluster)
    gpus = int(entry.get("gpus", 1))
    options = [
        "-p",
        offer.partition,
        "-N",
        str(offer.node_count),
        "--ntasks-per-node",
        "1",
        "-c",
        str(int(entry.get("cpus", 1))),
        "-t",
        str(entry.get("time") or "60"),
        f"--signal=B:USR1@{int(entry.get('warn', 300))}",
        "-J",
        "jupyter-remote-hw",
        f"--comment={tag}",
        "-D",
        base,
        "-o",
        f"{base}/%j.out",
    ]
    if offer.gres:
        options.append(f"--gres={offer.gres}:{gpus}")
    for key, flag in (("account", "--account"), ("qos", "--qos"), ("mem", "--mem")):
        if entry.get(key):
            options.append(f"{flag}={entry[key]}")
    options += [str(o) for o in entry.get("sbatch_options") or []]
    return options


def check_limits(provider: ClusterAccess, cluster: str, offer: Offer) -> None:
    """Refuse, before submitting, a time limit over the partition's own."""
    entry = provider.cluster_settings(cluster)
    asked = parse_duration(_minutes(str(entry.get("time") or "60")))
    limit = parse_duration(offer.time_limit)
    if asked is not None and limit is not None and asked > limit:
        raise SLURMRefusedError(
            cluster,
            f"the time limit {entry.get('time')} is over partition "
            f"{offer.partition!r}'s maximum of {offer.time_limit}: lower the "
            "cluster's 'time'",
        )


async def live_allocation(
    provider: ClusterAccess, target: Target, shell: SlurmShell, steps: LaunchSteps
) -> Allocation | None:
    """The allocation this ledger holds for ``target`` when its job still runs."""
    assert provider.ledger is not None
    records = [
        m
        for m in provider.ledger.machines(provider=provider.name)
        if m.name == target.name and m.state not in LEDGER_FINAL
    ]
    for record in records:
        info = record.info
        state = await shell.job(record.resource_id) if record.resource_id else None
        if state is not None and (state.running or state.pending):
            with steps.step("queue"):
                await wait_running(provider, shell, state.job_id, steps)
            provider.ledger.set_machine_state(record.machine_id, "running", "reattached")
            return Allocation(
                str(info["cluster"]),
                record.resource_id,
                str(info["home"]),
                str(info["job_dir"]),
                record.machine_id,
            )
        detail = state.end_line() if state is not None else "never submitted"
        provider.ledger.set_machine_state(record.machine_id, "terminated", detail)
    return None


async def submit(
    provider: ClusterAccess,
    cluster: str,
    offer: Offer,
    target: Target,
    shell: SlurmShell,
    steps: LaunchSteps,
) -> Allocation:
    """Submit the holder job and wait until it runs (the queue is the launch step)."""
    assert provider.ledger is not None
    entry = provider.cluster_settings(cluster)
    machine_id = "s-" + secrets.token_hex(6)
    tag = f"{COMMENT_TAG}:{machine_id}"
    with steps.step("submit job"):
        check_limits(provider, cluster, offer)
        home = shlex.quote(str(entry["root"])) if entry.get("root") else '"$HOME"'
        base_expr = f'"$h"/{BASE}'
        provider.ledger.add_machine(
            machine_id,
            target.name,
            provider.name,
            owner=provider.owner,
            instance_type=target.hardware,
            region=cluster,
            info={"cluster": cluster, "partition": offer.partition, "login": entry["login"]},
            detail=f"partition {offer.partition}",
        )
        result = await sbatch(provider, shell, cluster, offer, home, base_expr, tag)
        lines = result.stdout.strip().splitlines()
        refusal = refused_line(result.stderr) if result.exit_status == REFUSED else None
        if refusal is not None:
            provider.ledger.set_machine_state(machine_id, "failed", refusal)
            raise SLURMRefusedError(cluster, f"nothing was submitted: {refusal}")
        if not result.ok or len(lines) < 3:
            error = sbatch_error(
                cluster,
                result.stderr,
                partition=offer.partition,
                partitions=sorted({r.partition for r in provider.cached_rows(cluster) or []}),
                detail=f"{offer.gres or 'CPUs'}:{entry.get('gpus', 1)}".lstrip(":"),
                time=str(entry.get("time") or "60"),
            )
            provider.ledger.set_machine_state(machine_id, "failed", str(error))
            raise error
        home_dir, base, job_id = lines[-3], lines[-2], lines[-1].split(";")[0]
        allocation = Allocation(cluster, job_id, home_dir, job_dir(base, job_id), machine_id)
        provider.ledger.update_machine(
            machine_id, resource_id=job_id, info={"home": home_dir, "job_dir": allocation.job_dir}
        )
        provider.ledger.set_machine_state(machine_id, "pending", f"SLURM job {job_id}")
        steps.note(f"submitted SLURM job {job_id} to partition {offer.partition} of {cluster}")
    try:
        with steps.step("queue"):
            await wait_running(provider, shell, job_id, steps)
    except BaseException as exc:
        detail = (
            "the launch was cancelled"
            if isinstance(exc, asyncio.CancelledError)
            else f"the launch failed: {exc}"
        )
        await shell.cancel(job_id)
        provider.ledger.set_machine_state(
            machine_id, "terminated", f"SLURM job {job_id} was cancelled: {detail}"
        )
        raise
    provider.ledger.set_machine_state(machine_id, "running", f"SLURM job {job_id} runs")
    return allocation


async def sbatch(
    provider: ClusterAccess,
    shell: SlurmShell,
    cluster: str,
    offer: Offer,
    home: str,
    base_expr: str,
    tag: str,
) -> CommandResult:
    """Make the jobs' directory and submit the holder job; prints home, base, job id."""
    options = shlex.join(sbatch_options(provider, cluster, offer, "@BASE@", tag))
    options = options.replace("'@BASE@/%j.out'", '"$b/%j.out"').replace("@BASE@", '"$b"')
    script = HOLDER_SCRIPT.replace("{base}", '"$JRHW_BASE"').replace(
        "{agent_wait}", str(int(provider.cluster_settings(cluster).get("agent_wait", AGENT_WAIT)))
    )
    dirs = chain('"$h"', BASE)
    return await shell.run(
        f'{MINE}h={home}; mkdir -p "$h" || exit 1; mine {dirs}; b={base_expr}; '
        f'chmod 700 "$b" && echo "$h" && echo "$b" && JRHW_BASE="$b" sbatch --parsable '
        f"--export=ALL,JRHW_BASE {options}",
        input=script,
    )


async def wait_running(
    provider: ClusterAccess, shell: SlurmShell, job_id: str, steps: LaunchSteps
) -> JobState:
    """Report the job's queue state every :attr:`queue_poll` seconds until it runs.

    Raises:
        SLURMError: It ended, or pends for a reason waiting cannot clear.
    """
    said = ""
    while True:
        state = await shell.job(job_id, with_position=True)
        if state.running:
            steps.note(f"job {job_id} RUNNING on {state.nodes}")
            return state
        if state.ended:
            raise SLURMError(shell.cluster, state.end_line() + " before it started")
        hopeless = HOPELESS_REASONS.get(state.reason)
        if hopeless is not None:
            raise SLURMRefusedError(
                shell.cluster,
                f"job {job_id} can never start: {hopeless} "
                f"({state.reason}); change the cluster's settings",
            )
        line = state.queue_line()
        if line != said:
            steps.note(line)
            said = line
        await asyncio.sleep(provider.queue_poll)


def _minutes(text: str) -> str:
    """SLURM's ``-t`` forms as ``[days-]h:m:s`` (a bare number is minutes)."""
    text = text.strip()
    if text.isdigit():
        return f"{int(text) // 60}:{int(text) % 60}:00"
    if "-" not in text and text.count(":") == 1:
        return f"0:{text}"
    return text


__all__ = [
    "AGENT_WAIT",
    "HOLDER_SCRIPT",
    "check_limits",
    "live_allocation",
    "sbatch",
    "sbatch_options",
    "submit",
    "wait_running",
]
