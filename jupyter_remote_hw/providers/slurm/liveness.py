"""Whether a job's kernels still live, asked on the cluster: the agent in the job is
asked for its kernels, as our side reaches it for a kernel (through a job step, or
the login node's own socket where the login node is the compute node).

The reaper asks this instead of trusting the ledger: a ledger row outlives a Jupyter
server that was killed, and a kernel process killed inside its job leaves the job
running with nothing in it.
"""

from __future__ import annotations

import asyncio
import shlex
from typing import TYPE_CHECKING

from ...agent_client import AgentClient, AgentError, AgentUnavailableError
from ...transport import TransportError
from .bridge import open_bridge
from .machine import ready_line
from .queue import JobState, SlurmShell

if TYPE_CHECKING:
    from .access import ClusterAccess

#: Seconds the agent in a job has to answer before the job counts as having none.
ASK_WAIT = 15.0


async def live_kernels(
    provider: ClusterAccess, shell: SlurmShell, state: JobState, job_dir: str
) -> int | None:
    """How many kernels run in job ``state`` now, as the agent in it says: 0 when its
    agent does not answer (it exited, or was killed with them); None when no agent
    has started in the job yet (a launch may be starting it; the holder job ends
    itself when none comes).

    Args:
        provider: The provider (the cluster's settings: its Python, how nodes are reached).
        shell: SLURM's commands on the cluster's login node.
        state: The job, running.
        job_dir: The job's directory on the cluster (the agent's ready line is there).
    """
    said = await shell.run(f"cat {shlex.quote(job_dir + '/agent.out')} 2>/dev/null")
    ready = ready_line(said.stdout)
    if ready is None or not isinstance(ready.get("socket"), str):
        return None
    socket = str(ready["socket"])
    entry = provider.cluster_settings(shell.cluster)
    node = state.nodes.split(",")[0]
    try:
        async with asyncio.timeout(ASK_WAIT):
            if str(entry.get("reach") or "bridge") == "direct":
                reader, writer = await shell.conn.open_unix_connection(socket)
            else:
                python = str(entry.get("python") or "python3")
                reader, writer = await open_bridge(
                    shell.conn, shell.command, state.job_id, node, python, socket
                )
            client = AgentClient(reader, writer, where=f"SLURM job {state.job_id}")
            try:
                kernels = (await client.call("list_kernels", wait=ASK_WAIT)).get("kernels")
            finally:
                await client.close()
    except (TimeoutError, TransportError, OSError, AgentError, AgentUnavailableError) as exc:
        provider.log.info("SLURM job %s: its agent does not answer (%s)", state.job_id, exc)
        return 0
    return sum(1 for k in kernels or [] if isinstance(k, dict) and k.get("alive"))


__all__ = ["ASK_WAIT", "live_kernels"]
