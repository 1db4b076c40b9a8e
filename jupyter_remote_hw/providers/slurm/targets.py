"""Targets from ``sinfo``: one per partition and GPU type, with what its nodes offer now."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..target import Target, slug

#: sinfo's fields, one line per node and partition, ``|``-separated.
SINFO_FIELDS = (
    "PartitionName",
    "NodeList",
    "CPUs",
    "Memory",
    "Gres",
    "GresUsed",
    "StateCompact",
    "Time",
    "Available",
    "CPUsState",
)
SINFO_COMMAND = "sinfo -h -N -O '" + ",".join(f"{name}:256|" for name in SINFO_FIELDS) + "'"

#: The memory SLURM gives a job that asks for none, appended to sinfo's lines (which
#: :func:`parse_sinfo` skips): ``DefMemPerCPU = 1024``, or nothing where none is set.
DEFAULTS_COMMAND = "{ scontrol show config 2>/dev/null | grep -E '^DefMemPer(CPU|Node) ' || true; }"

#: What one reading of a cluster's partitions runs on its login node.
READ_COMMAND = f"{SINFO_COMMAND} && {DEFAULTS_COMMAND}"

#: ``DefMemPerCPU = 1024`` (MB) or ``DefMemPerNode = UNLIMITED``.
_DEFAULT = re.compile(r"^DefMemPer(?P<per>CPU|Node)\s*=\s*(?P<mb>\d+)\s*$", re.MULTILINE)

#: A GRES entry: ``gpu:a100:2``, ``gpu:2``, ``gpu:a100:2(S:0-1)``, ``gpu:a100:1(IDX:0)``.
_GRES = re.compile(r"^gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")

#: Node states in which a node takes no new job.
_UNUSABLE = ("down", "drain", "drng", "fail", "maint", "inval", "unk", "futr", "resv", "boot")


def _gpus(gres: str) -> tuple[str | None, int]:
    """The GPU type (None when untyped) and count of one sinfo GRES field."""
    for entry in re.split(r",(?![^(]*\))", gres):
        found = _GRES.match(entry.strip())
        if found:
            return found["type"], int(found["count"])
    return None, 0


@dataclass(frozen=True)
class NodeRow:
    """One node of one partition, as sinfo describes it."""

    partition: str
    node: str
    cpus: int
    memory_mb: int
    gpu_type: str | None
    gpus: int
    gpus_used: int
    state: str
    time_limit: str
    available: bool
    cpus_idle: int

    @property
    def usable(self) -> bool:
        """Whether the node takes jobs at all (up, not drained or down)."""
        return self.available and not self.state.lower().startswith(_UNUSABLE)


def parse_sinfo(text: str) -> list[NodeRow]:
    """The rows of :data:`SINFO_COMMAND`'s output (lines it cannot read are skipped)."""
    rows = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < len(SINFO_FIELDS):
            continue
        part, node, cpus, mem, gres, used, state, limit, avail, cpu_state = fields[
            : len(SINFO_FIELDS)
        ]
        gpu_type, count = _gpus(gres)
        _, in_use = _gpus(used)
        try:
            idle = int(cpu_state.split("/")[1])
            rows.append(
                NodeRow(
                    part.rstrip("*"),
                    node,
                    int(cpus),
                    int(mem or 0),
                    gpu_type,
                    count,
                    in_use,
                    state,
                    limit,
                    avail == "up",
                    idle,
                )
            )
        except (ValueError, IndexError):
            continue
    return rows


@dataclass(frozen=True)
class MemoryDefault:
    """The memory SLURM gives a job that asks for none (``scontrol show config``).

    Attributes:
        per_cpu_mb: ``DefMemPerCPU``, None when not set.
        per_node_mb: ``DefMemPerNode``, None when not set or unlimited.
    """

    per_cpu_mb: int | None = None
    per_node_mb: int | None = None


def parse_memory_default(text: str) -> MemoryDefault:
    """The cluster's default memory per job, from :data:`READ_COMMAND`'s output."""
    found = {m["per"]: int(m["mb"]) for m in _DEFAULT.finditer(text)}
    return MemoryDefault(found.get("CPU") or None, found.get("Node") or None)


@dataclass
class Offer:
    """One partition × GPU type: the target it makes and what its nodes have now.

    Attributes:
        partition: The partition.
        gpu_type: The GPU type (``a100``), None for untyped GPUs, ``""`` for CPU nodes.
        nodes: The nodes.
        cpus: CPUs per node (the smallest node's).
        memory_mb: Memory per node in MB (the smallest node's).
        gpus_per_node: GPUs per node (the smallest node's).
        gpus_free: GPUs free now, over usable nodes.
        nodes_free: Usable nodes where one more kernel fits now.
        time_limit: The partition's time limit as SLURM prints it.
        default_memory: What memory the cluster gives a job that asks for none.
        node_count: How many nodes one allocation holds (the ``%%ranks`` world spans
            them); 1 for a kernel on one node.
        gpu_types: The GPU types of a multi-node offer that spans several (its
            ``gpu_type`` is then None: any GPU).
        gpus_asked: GPUs per node an allocation of a multi-node offer asks for.
    """

    partition: str
    gpu_type: str | None
    nodes: list[str] = field(default_factory=list)
    cpus: int = 0
    memory_mb: int = 0
    gpus_per_node: int = 0
    gpus_free: int = 0
    nodes_free: int = 0
    time_limit: str = ""
    default_memory: MemoryDefault = field(default_factory=MemoryDefault)
    node_count: int = 1
    gpu_types: tuple[str, ...] = ()
    gpus_asked: int = 1

    @property
    def gres(self) -> str:
        """The ``--gres`` value for ``count`` GPUs of this type (``gpu:a100``), or ``""``."""
        if self.gpu_type == "":
            return ""
        return "gpu" if self.gpu_type is None else f"gpu:{self.gpu_type}"

    def memory_gib(self, cpus: int, asked: str | None) -> float | None:
        """The memory one job gets in GiB: what the cluster's entry asks for (``--mem``),
        else the cluster's default for ``cpus`` CPUs, else the whole node's (a cluster
        without a default does not limit a job's memory); None when unknown."""
        if asked:
            return memory_gib(asked)
        node = self.memory_mb or None
        default = self.default_memory
        if default.per_cpu_mb:
            mb: int | None = default.per_cpu_mb * cpus
        else:
            mb = default.per_node_mb or node
        if mb is None:
            return None
        return round(min(mb, node or mb) / 1024, 2)

    def label(self, gpus: int, cpus: int, memory: float | None) -> str:
        """The hardware label, for one job (what the node has after "of"):
        ``A100 ×1 of 2 · 1 of 2 CPUs · 1 of 4 GiB``."""

        def part(mine: float | None, node: float, unit: str) -> str:
            whole = f"{node:g} {unit}"
            if mine is None or mine >= node:
                return whole
            return f"{mine:g} of {whole}"

        cpus_part = part(cpus, self.cpus, "CPU" if self.cpus == 1 else "CPUs")
        memory_part = part(memory, self.memory_mb / 1024, "GiB")
        nodes = f"{self.node_count} nodes × " if self.node_count > 1 else ""
        if self.gpu_type == "":
            return f"{nodes}{cpus_part} · {memory_part}"
        name = "/".join(t.upper() for t in self.gpu_types) or (self.gpu_type or "GPU").upper()
        return f"{nodes}{name} ×{gpus} of {self.gpus_per_node} · {cpus_part} · {memory_part}"

    def availability(self) -> str:
        """What is free now, for people: ``2 of 2 GPUs free on 1 node``."""
        count = len(self.nodes)
        nodes = f"{count} node{'s' if count != 1 else ''}"
        if self.node_count > 1:
            return f"{self.nodes_free} of {nodes} free now; an allocation takes {self.node_count}"
        if self.gpu_type == "":
            return f"{self.nodes_free} of {nodes} with free CPUs"
        return f"{self.gpus_free} of {self.gpus_per_node * count} GPUs free on {nodes}"


def offers(
    rows: list[NodeRow],
    partitions: list[str] | None,
    gpus: int,
    default_memory: MemoryDefault | None = None,
) -> list[Offer]:
    """Group sinfo's rows by partition and GPU type (only ``partitions`` when given)."""
    found: dict[tuple[str, str | None], Offer] = {}
    default = default_memory or MemoryDefault()
    for row in rows:
        if partitions and row.partition not in partitions:
            continue
        gpu_type = row.gpu_type if row.gpus else ""
        offer = found.setdefault(
            (row.partition, gpu_type), Offer(row.partition, gpu_type, default_memory=default)
        )
        first = not offer.nodes
        offer.nodes.append(row.node)
        offer.cpus = row.cpus if first else min(offer.cpus, row.cpus)
        offer.memory_mb = row.memory_mb if first else min(offer.memory_mb, row.memory_mb)
        offer.gpus_per_node = row.gpus if first else min(offer.gpus_per_node, row.gpus)
        offer.time_limit = row.time_limit
        if row.usable:
            free = max(0, row.gpus - row.gpus_used)
            offer.gpus_free += free
            if row.cpus_idle > 0 and (gpu_type == "" or free >= gpus):
                offer.nodes_free += 1
    order = {name: i for i, name in enumerate(partitions or [])}
    return sorted(
        found.values(),
        key=lambda o: (order.get(o.partition, len(order)), o.partition, o.gpu_type or ""),
    )


def multi_node_offers(found: list[Offer], counts: list[int], gpus: int) -> list[Offer]:
    """The offers of allocations of ``counts`` nodes each (counts of 1 are the offers
    themselves): one per partition × GPU type whose nodes are enough, and, where the
    partition's nodes are enough only across GPU types, one of any GPU type."""
    made = []
    for count in sorted({c for c in counts if c > 1}):
        partitions: dict[str, list[Offer]] = {}
        for offer in found:
            partitions.setdefault(offer.partition, []).append(offer)
            if len(offer.nodes) >= count:
                made.append(replace(offer, node_count=count, gpus_asked=gpus))
        for group in partitions.values():
            typed = [o for o in group if o.gpu_type and o.nodes]
            if len(typed) < 2 or any(len(o.nodes) >= count for o in typed):
                continue
            nodes = [n for o in typed for n in o.nodes]
            if len(nodes) < count:
                continue
            first = typed[0]
            made.append(
                replace(
                    first,
                    gpu_type=None,
                    nodes=nodes,
                    cpus=min(o.cpus for o in typed),
                    memory_mb=min(o.memory_mb for o in typed),
                    gpus_per_node=min(o.gpus_per_node for o in typed),
                    gpus_free=sum(o.gpus_free for o in typed),
                    nodes_free=sum(o.nodes_free for o in typed),
                    node_count=count,
                    gpu_types=tuple(str(o.gpu_type) for o in typed),
                    gpus_asked=gpus,
                )
            )
    return [o for o in made if o.gpu_type == "" or o.gpus_per_node >= gpus]


def target_name(cluster: str, offer: Offer) -> str:
    """``slurm-<cluster>-<partition>-<gpu type or cpu>``, and for an allocation of
    several nodes ``-<nodes>x<GPUs per node>`` after it (``-<nodes>nodes`` without GPUs)."""
    kind = offer.gpu_type if offer.gpu_type else ("gpu" if offer.gpu_type is None else "cpu")
    name = f"slurm-{slug(cluster)}-{slug(offer.partition)}-{slug(kind)}"
    if offer.node_count > 1:
        gpus = offer.gpus_per_node if offer.gpu_type != "" else 0
        return f"{name}-{offer.node_count}" + (f"x{offer.gpus_asked}" if gpus else "nodes")
    return name


def memory_gib(text: str) -> float | None:
    """SLURM's ``--mem`` value (``16G``, ``512M``, ``2T``; a bare number is MiB) in GiB."""
    text = text.strip().upper()
    units = {"K": 1 / (1024 * 1024), "M": 1 / 1024, "G": 1.0, "T": 1024.0}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "M")
    try:
        return round(float(number) * units[unit], 2)
    except ValueError:
        return None


def make_target(cluster: str, entry: dict[str, Any], offer: Offer) -> Target:
    """The picker's target for ``offer`` of the cluster configured by ``entry``."""
    cpus = int(entry.get("cpus", 1))
    memory = offer.memory_gib(cpus, str(entry["mem"]) if entry.get("mem") else None)
    return Target(
        name=target_name(cluster, offer),
        provider="slurm",
        where=f"SLURM {cluster} · {offer.partition}",
        hardware=offer.label(int(entry.get("gpus", 1)), cpus, memory),
        host=str(entry["login"]),
        python=str(entry.get("python") or "python3"),
        root=str(entry["root"]) if entry.get("root") else None,
        workdir=str(entry.get("workdir") or "~"),
    )


def allocation_specs(entry: dict[str, Any], offer: Offer) -> dict[str, Any]:
    """What one allocation of ``offer`` holds (the hardware listing's columns): its GPUs,
    the CPUs the cluster's entry asks for, and the memory the job gets."""
    gpus = int(entry.get("gpus", 1)) if offer.gpu_type != "" else 0
    cpus = int(entry.get("cpus", 1))
    memory = offer.memory_gib(cpus, str(entry["mem"]) if entry.get("mem") else None)
    nodes = offer.node_count
    return {
        "gpu": ("/".join(offer.gpu_types) or offer.gpu_type or "GPU").upper() if gpus else None,
        "gpu_count": gpus * nodes,
        "gpu_memory_gib": None,
        "vcpus": cpus * nodes,
        "memory_gib": round(memory * nodes, 2) if memory is not None else None,
    }


__all__ = [
    "DEFAULTS_COMMAND",
    "READ_COMMAND",
    "SINFO_COMMAND",
    "MemoryDefault",
    "NodeRow",
    "Offer",
    "allocation_specs",
    "make_target",
    "memory_gib",
    "multi_node_offers",
    "offers",
    "parse_memory_default",
    "parse_sinfo",
    "target_name",
]
