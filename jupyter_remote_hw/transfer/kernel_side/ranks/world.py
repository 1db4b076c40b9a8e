"""The ranks of the allocation this kernel runs in, read from SLURM: which nodes, how
many GPUs each, and the environment each rank's engine gets."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

#: ``Nodes=gpu1 CPU_IDs=0 Mem=1024 GRES=gpu:a100:1(IDX:0)`` in ``scontrol show job -d``.
_NODE_LINE = re.compile(r"^\s*Nodes=(?P<nodes>\S+)\s.*?(?:GRES=(?P<gres>\S*))?\s*$", re.MULTILINE)
#: A GPU count in a GRES entry: ``gpu:a100:2(IDX:0-1)``, ``gpu:1``.
_GPUS = re.compile(r"gpu(?::[^:(,]+)?:(?P<count>\d+)")
#: ``NodeAddr=10.0.0.5`` in ``scontrol show node``.
_ADDR = re.compile(r"\bNodeAddr=(?P<addr>\S+)")

#: What torchrun calls a rendezvous port when none is chosen.
DEFAULT_PORT = 29500


class WorldError(Exception):
    """The kernel is not in an allocation whose ranks can be known."""


@dataclass(frozen=True)
class Rank:
    """One rank: where it runs and its place in the world.

    Attributes:
        rank: Its global rank.
        node: The node it runs on.
        node_rank: The node's index in the allocation.
        local_rank: Its index among the ranks of its node.
        local_size: How many ranks its node runs.
    """

    rank: int
    node: str
    node_rank: int
    local_rank: int
    local_size: int


@dataclass(frozen=True)
class World:
    """The ranks of one SLURM job.

    Attributes:
        job_id: The job.
        ranks: One per allocated GPU, or one per node where the job has no GPU.
        master_addr: The first node's address (``MASTER_ADDR``).
    """

    job_id: str
    ranks: list[Rank]
    master_addr: str

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(r.node for r in self.ranks))

    def environment(self, rank: Rank, port: int) -> dict[str, str]:
        """What ``torchrun`` would set for ``rank``, so that
        ``torch.distributed.init_process_group()`` needs no argument."""
        return {
            "RANK": str(rank.rank),
            "LOCAL_RANK": str(rank.local_rank),
            "WORLD_SIZE": str(self.size),
            "LOCAL_WORLD_SIZE": str(rank.local_size),
            "GROUP_RANK": str(rank.node_rank),
            "NODE_RANK": str(rank.node_rank),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(port),
        }


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise WorldError(f"`{' '.join(argv)}` could not run: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise WorldError(f"`{' '.join(argv)}` failed: {said}")
    return done.stdout


def parse_nodes(text: str) -> list[tuple[str, int]]:
    """``(node list, GPUs per node)`` from ``scontrol show job -d``'s node lines."""
    found = []
    for match in _NODE_LINE.finditer(text):
        gres = match["gres"] or ""
        gpus = sum(int(m["count"]) for m in _GPUS.finditer(gres))
        found.append((match["nodes"], gpus))
    return found


def ranks_of(nodes: list[tuple[str, int]]) -> list[Rank]:
    """The ranks of ``[(node, GPUs), ...]``: one per GPU, one per node without GPUs."""
    ranks: list[Rank] = []
    for node_rank, (node, gpus) in enumerate(nodes):
        local = max(1, gpus)
        for local_rank in range(local):
            ranks.append(Rank(len(ranks), node, node_rank, local_rank, local))
    return ranks


def read_world(job_id: str | None = None) -> World:
    """The ranks of the job this kernel runs in.

    Raises:
        WorldError: Not in a SLURM job, or SLURM could not say what it holds.
    """
    job = job_id or os.environ.get("SLURM_JOB_ID")
    if not job:
        raise WorldError(
            "this kernel does not run in a SLURM allocation: %%ranks runs cells on the "
            "ranks of a SLURM target (pick one such as slurm-<cluster>-<partition>-<gpu>-2x1)"
        )
    nodes: list[tuple[str, int]] = []
    for group, gpus in parse_nodes(_run(["scontrol", "show", "job", "-d", job])):
        for node in _run(["scontrol", "show", "hostnames", group]).split():
            nodes.append((node, gpus))
    if not nodes:
        raise WorldError(f"SLURM job {job} lists no nodes (has it ended?)")
    first = nodes[0][0]
    found = _ADDR.search(_run(["scontrol", "show", "node", first]))
    return World(job, ranks_of(nodes), found["addr"] if found else first)


__all__ = ["DEFAULT_PORT", "Rank", "World", "WorldError", "parse_nodes", "ranks_of", "read_world"]
