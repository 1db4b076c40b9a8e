"""The live use of the other nodes of a multi-node SLURM allocation the agent runs in.

The agent runs on the allocation's first node. Each other node is read by a step of
the job on it (``srun --overlap -w NODE``) that runs this same agent's ``metrics``
command and prints one reading; the readings are kept for :data:`CACHE_SECONDS`, so
that a panel polling every few seconds starts one step per node at most that often.
Standard library only, like the rest of the agent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

#: Seconds a reading of the other nodes is reused.
CACHE_SECONDS = 5.0
#: Seconds one node's step may take.
READ_TIMEOUT = 15.0

_NODE_LIST = re.compile(r"\bNodeList=(\S+)")


def metrics_command() -> list[str]:
    """This agent's ``metrics`` command, from its zipapp (or the source it runs from)."""
    archive = getattr(globals().get("__loader__"), "archive", None)
    if archive:
        return [sys.executable, archive, "metrics"]
    return [sys.executable, "-m", "jupyter_remote_hw.agent", "metrics"]


async def _run(argv: list[str], env: Mapping[str, str], timeout: float) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        raise RuntimeError(f"no answer within {timeout:g} s") from None
    if process.returncode != 0:
        said = (err.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"exit status {process.returncode}: {said}")
    return out.decode(errors="replace")


class NodeReadings:
    """Reads the allocation's other nodes (nothing outside a job of several nodes).

    Args:
        env: The agent's environment (``SLURM_JOB_ID``, ``SLURMD_NODENAME``).
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.job_id = env.get("SLURM_JOB_ID", "")
        self.node = env.get("SLURMD_NODENAME", "")
        # A new step is bounded by the variables of the step the agent runs in (its
        # one node and one task): the steps start as from outside the job.
        self.env = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
        if env.get("SLURM_CONF"):
            self.env["SLURM_CONF"] = env["SLURM_CONF"]
        self._nodes: list[str] | None = None
        self._read_at = 0.0
        self._readings: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()

    async def nodes(self) -> list[str]:
        """The allocation's nodes, the agent's first (empty outside a SLURM job)."""
        if self._nodes is None:
            self._nodes = []
            if self.job_id:
                try:
                    shown = await _run(["scontrol", "show", "job", self.job_id], self.env, 10)
                    found = _NODE_LIST.search(shown)
                    if found:
                        names = await _run(
                            ["scontrol", "show", "hostnames", found[1]], self.env, 10
                        )
                        self._nodes = names.split()
                except (OSError, RuntimeError) as exc:
                    log.warning("the nodes of SLURM job %s were not read: %s", self.job_id, exc)
        return self._nodes

    async def others(self) -> list[dict[str, Any]]:
        """One reading per other node (``node`` and the keys of a reading, or ``node``
        and ``error``); empty for an allocation of one node."""
        nodes = [n for n in await self.nodes() if n != self.node]
        if not nodes:
            return []
        async with self._lock:
            if time.monotonic() - self._read_at > CACHE_SECONDS:
                self._readings = list(await asyncio.gather(*(self._read(n) for n in nodes)))
                self._read_at = time.monotonic()
            return self._readings

    async def _read(self, node: str) -> dict[str, Any]:
        argv = [
            "srun",
            f"--jobid={self.job_id}",
            "--overlap",
            "-N1",
            "-n1",
            "-w",
            node,
            "--job-name=jupyter-remote-hw-metrics",
            *metrics_command(),
        ]
        try:
            out = await _run(argv, self.env, READ_TIMEOUT)
            reading = json.loads(out.strip().splitlines()[-1])
        except (OSError, RuntimeError, ValueError, IndexError) as exc:
            return {"node": node, "error": f"its use was not read: {exc}"}
        return {"node": node, **reading}


__all__ = ["CACHE_SECONDS", "NodeReadings", "metrics_command"]
