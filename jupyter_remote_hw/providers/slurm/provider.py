"""The ``slurm`` provider: GPUs from SLURM clusters, one holder job per target in use.

Each configured cluster is reached through its login node (an SSH host). Its
targets come from ``sinfo``: one per partition and GPU type. A kernel on such a
target runs in an allocation that a holder job keeps: submitted with
``sbatch --parsable`` on the login node, watched in the queue (the launch steps
say the job id, state, reason, queue position and expected start), then the
agent is started inside it (see :mod:`.machine`). Kernels on the same target
share its allocation; the job ends when its last kernel is shut down, when the
agent's idle stop fires, or when SLURM ends it (time limit, scancel,
preemption), which the kernel reports as the reason it died.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Dict, Float, Instance, Unicode, validate

from ...hibernation.far import FarPlace
from ...ledger import Ledger
from ...ledger.store import MachineRecord
from ...transport import SSHConnection, TransportError, TransportManager
from ..aws.tags import default_owner
from ..base import Machine, Provider
from ..errors import UnknownHardwareError
from ..target import Target
from ..usability import Unusable
from .allocations import (
    allocation_target,
    forget_ended,
    live_names,
    place,
    shared_targets,
    split,
)
from .allocations import availability as allocation_availability
from .ending import end_after_hibernation, reap_jobs, terminate_job
from .errors import LoginUnreachableError, SLURMError
from .hibernated import HibernatedOnCluster
from .machine import SLURMMachine
from .queue import OURS_COMMAND, SlurmShell, parse_ours
from .reach import cluster_of, notify_kernels, unreachable, unreached_target
from .settings import CLUSTER_KEYS, CLUSTERS_HELP, check_clusters
from .submission import live_allocation, submit
from .targets import (
    READ_COMMAND,
    MemoryDefault,
    NodeRow,
    Offer,
    allocation_specs,
    make_target,
    multi_node_offers,
    offers,
    parse_memory_default,
    parse_sinfo,
)
from .targets import target_name as name_of

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps


class SLURMProvider(Provider):
    """SLURM clusters, reached through their login nodes over SSH.

    Configure as ``c.SLURMProvider.clusters = {"name": {"login": "alias", ...}}``.
    """

    name = "slurm"

    clusters = Dict(config=True, help=CLUSTERS_HELP)
    hibernate_after = Float(
        1800.0,
        min=0.0,
        config=True,
        help="Seconds a kernel in an allocation may stay idle before it hibernates: its "
        "state is saved on the Jupyter server's disk, and the job ends once no kernel runs "
        "in it; the next cell submits a new one and wakes the kernel (docs/hibernation.md). "
        "0: never. A cluster's 'hibernate_after' overrides it; keep it below idle_stop.",
    )
    idle_stop = Float(
        3600.0,
        min=0.0,
        config=True,
        help="Seconds without kernel activity (a running cell is activity) after which an "
        "allocation's agent cancels its job, releasing the GPUs; 0: never. A cluster's "
        "'idle_stop' overrides it.",
    )
    queue_poll = Float(
        3.0,
        min=0.2,
        config=True,
        help="Seconds between checks of a pending job's queue state during a launch.",
    )
    watch_interval = Float(
        5.0,
        min=0.2,
        config=True,
        help="Seconds between checks of a running job's state (to report its end).",
    )
    sinfo_ttl = Float(
        30.0,
        min=0.0,
        config=True,
        help="Seconds the partitions read from sinfo are used before they are read again.",
    )
    owner = Unicode(config=True, help="Who our jobs belong to in the ledger (default user@host).")

    transport = Instance(TransportManager, allow_none=True)
    ledger = Instance(Ledger, allow_none=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not self.owner:
            self.owner = default_owner()
        self._rows: dict[str, tuple[float, list[NodeRow]]] = {}
        self._memory: dict[str, MemoryDefault] = {}
        self._errors: dict[str, str] = {}
        self._tried: set[str] = set()
        self._refreshing: asyncio.Task[None] | None = None
        self.hibernated = HibernatedOnCluster(self)
        """Where hibernated kernels' state waits: the cluster's shared home."""

    @validate("clusters")
    def _check_clusters(self, proposal: Any) -> dict[str, dict[str, Any]]:
        return check_clusters(proposal["value"])

    # ------------------------------------------------------------------ plumbing

    def cluster_settings(self, name: str) -> dict[str, Any]:
        """A copy of the entry of cluster ``name`` (``c.SLURMProvider.clusters``)."""
        return dict(self.clusters[name])

    def _cache_file(self, cluster: str) -> Path | None:
        if self.ledger is None:
            return None
        return Path(self.ledger.path).parent / "slurm" / f"{cluster}.sinfo"

    async def connect_login(
        self, cluster: str, transport: TransportManager | None = None
    ) -> SSHConnection:
        """The login node's SSH connection (through ``transport``, default the shared one).

        Raises:
            LoginUnreachableError: It cannot be reached; the message names the cluster.
        """
        transport = transport or self.transport
        assert transport is not None
        login = str(self.cluster_settings(cluster)["login"])
        try:
            return await transport.connect(login)
        except TransportError as exc:
            raise LoginUnreachableError(
                login,
                f"SLURM cluster {cluster}: the login node {login} cannot be reached "
                f"({exc}). Check that `ssh {login}` works from the Jupyter server's machine.",
            ) from exc

    def shell(self, cluster: str, conn: SSHConnection) -> SlurmShell:
        """A runner of SLURM commands on ``cluster``'s login node."""
        env = dict(self.cluster_settings(cluster).get("env") or {})
        return SlurmShell(cluster, conn, {str(k): str(v) for k, v in env.items()})

    # ------------------------------------------------------------------ targets

    async def refresh(
        self, cluster: str | None = None, transport: TransportManager | None = None
    ) -> None:
        """Read the partitions of ``cluster`` (default: every cluster) from sinfo now,
        and (on the shared ``transport``) record as ended the allocations whose jobs
        SLURM no longer lists.

        A cluster that cannot be asked keeps the partitions read before, and
        :meth:`target_usability` says why.
        """
        for name in [cluster] if cluster else list(self.clusters):
            try:
                conn = await self.connect_login(name, transport)
                shell = self.shell(name, conn)
                if transport is None:  # on the ledger's own thread: note ended jobs too
                    asked_at = time.time()
                    both = f"{READ_COMMAND} && echo @@ && {OURS_COMMAND}"
                    text, _, ours = (await shell.checked(both, "sinfo or squeue")).partition("@@\n")
                    live = {state.job_id for state, _ in parse_ours(ours)}
                    forget_ended(self, name, live, asked_at)
                else:
                    text = await shell.checked(READ_COMMAND, "sinfo")
            except (TransportError, SLURMError, OSError) as exc:
                self._errors[name] = str(exc)
                self.log.warning("%s", exc)
                continue
            self._errors.pop(name, None)
            self._rows[name] = (time.monotonic(), parse_sinfo(text))
            self._memory[name] = parse_memory_default(text)
            path = self._cache_file(name)
            if path is not None:
                with contextlib.suppress(OSError):
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)

    def cached_rows(self, cluster: str) -> list[NodeRow] | None:
        """The partitions of ``cluster`` as last read (or cached on disk), or None."""
        if cluster in self._rows:
            return self._rows[cluster][1]
        path = self._cache_file(cluster)
        if path is not None and path.exists():
            with contextlib.suppress(OSError):
                text = path.read_text()
                rows = parse_sinfo(text)
                self._rows[cluster] = (float("-inf"), rows)
                self._memory[cluster] = parse_memory_default(text)
                return rows
        return None

    def _read_now(self, cluster: str) -> None:
        """Read ``cluster``'s partitions at once, on a connection of a thread's own (the
        first listing in a process that never read them: a kernelspec lookup cannot wait
        for a background reading)."""
        if self.transport is None or cluster in self._tried:
            return
        self._tried.add(cluster)
        settings = {
            name: getattr(self.transport, name) for name in self.transport.trait_names(config=True)
        }

        async def read() -> None:
            own = TransportManager(log=self.log, **settings)
            try:
                await self.refresh(cluster, own)
            finally:
                await own.close_all()

        worker = threading.Thread(target=asyncio.run, args=(read(),), daemon=True)
        worker.start()
        worker.join()

    def _refresh_soon(self) -> None:
        """Refresh stale partitions in the background, when called on a running loop."""
        stale = [
            name
            for name in self.clusters
            if time.monotonic() - self._rows.get(name, (float("-inf"), []))[0] > self.sinfo_ttl
        ]
        if not stale or self.transport is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self.refresh(), name="slurm sinfo")

    def offers(self, cluster: str) -> list[Offer]:
        """The partitions × GPU types of ``cluster`` as last read (configured partitions
        sinfo does not list are kept, so that launching them says what is wrong)."""
        entry = self.cluster_settings(cluster)
        partitions = [str(p) for p in entry.get("partitions") or []]
        rows = self.cached_rows(cluster)
        if rows is None:
            self._read_now(cluster)
            rows = self.cached_rows(cluster)
        if rows is None:
            return []
        default = self._memory.get(cluster, MemoryDefault())
        gpus = int(entry.get("gpus", 1))
        found = offers(rows, partitions or None, gpus, default)
        listed = {o.partition for o in found}
        found += [Offer(p, None) for p in partitions if p not in listed]
        return found + multi_node_offers(found, [int(n) for n in entry.get("nodes") or []], gpus)

    def targets(self) -> list[Target]:
        """A new allocation of each partition × GPU type, then each running allocation
        (to share it: see :mod:`.allocations`)."""
        bases = {t.name: t for t in self._base_targets()}
        return [*bases.values(), *shared_targets(self, bases)]

    def resolve(self, name: str) -> Target | None:
        """An allocation by its name (``<target>.<n>``), whether its job runs or not; or
        a target of a cluster whose login node was never reached (its launch then says
        so, see :func:`.reach.unreached_target`)."""
        found = allocation_target(name, {t.name: t for t in self._base_targets()})
        if found is not None:
            return found
        cluster = cluster_of(self.clusters, name)
        if cluster is None or cluster not in self._errors or self.cached_rows(cluster):
            return None
        return unreached_target(cluster, self.cluster_settings(cluster), name)

    def placement(self, name: str, taken: Collection[str], current: str | None) -> str:
        """A new allocation for each kernel, unless it asks for a running one or its
        cluster's entry says ``share`` (see :func:`.allocations.place`)."""
        found = self.find_target(name)
        share = found is not None and bool(self.cluster_settings(found[0]).get("share"))
        names = {name_of(c, o) for c, o in self._all_offers()}
        return place(
            name, {*taken, *live_names(self)}, names.__contains__, current=current, share=share
        )

    def _base_targets(self) -> list[Target]:
        self._refresh_soon()
        found = []
        for cluster in self.clusters:
            entry = self.cluster_settings(cluster)
            found += [make_target(cluster, entry, offer) for offer in self.offers(cluster)]
        return found

    def availability(self, target_name: str) -> str | None:
        """What is free now on a target's nodes (as last read), for people."""
        found = self.find_target(target_name)
        if found is None:
            return None
        cluster, offer = found
        base = name_of(cluster, offer)
        if target_name != base:
            return allocation_availability(self, target_name, base)
        return offer.availability() if offer.nodes else "not listed by sinfo"

    def hibernate_after_for(self, target: Target) -> float:
        """The cluster's ``hibernate_after``, else :attr:`hibernate_after`."""
        found = self.find_target(target.name)
        entry = self.cluster_settings(found[0]) if found is not None else {}
        return float(entry.get("hibernate_after", self.hibernate_after))

    def specs(self, target_name: str) -> dict[str, Any] | None:
        """What one allocation of a target holds (see :func:`.targets.allocation_specs`)."""
        found = self.find_target(target_name)
        if found is None:
            return None
        cluster, offer = found
        return allocation_specs(self.cluster_settings(cluster), offer)

    def find_target(self, target_name: str) -> tuple[str, Offer] | None:
        """The cluster and offer of a target or of one of its allocations, as last read."""
        found = {name_of(cluster, offer): (cluster, offer) for cluster, offer in self._all_offers()}
        return found.get(split(target_name, found.__contains__)[0])

    def _all_offers(self) -> list[tuple[str, Offer]]:
        return [(cluster, offer) for cluster in self.clusters for offer in self.offers(cluster)]

    def usability(self) -> Unusable | None:
        """Why no cluster can be used now (none of their login nodes could be asked);
        None while one can. Each target says why its own cluster cannot
        (:meth:`target_usability`)."""
        if not self.clusters or set(self.clusters) - set(self._errors):
            return None
        return unreachable(self.clusters, self._errors)

    def target_usability(self, target_name: str) -> Unusable | None:
        """Why ``target_name``'s cluster cannot be used now: its login node could not be
        asked (other clusters' troubles are not its own)."""
        found = self.find_target(target_name)
        cluster = found[0] if found is not None else cluster_of(self.clusters, target_name)
        if cluster is None or cluster not in self._errors:
            return None
        return unreachable({cluster: self.clusters[cluster]}, self._errors)

    async def _reach(self, target: Target) -> tuple[str, Offer, SSHConnection]:
        """The cluster and offer of ``target``, and its login node's connection; a
        cluster whose partitions were never read has them read now.

        Raises:
            LoginUnreachableError: The login node cannot be reached.
            UnknownHardwareError: The cluster does not offer ``target``.
        """
        found = self.find_target(target.name)
        cluster = found[0] if found is not None else cluster_of(self.clusters, target.name)
        if cluster is None:
            raise UnknownHardwareError(target.name, [t.name for t in self._base_targets()])
        conn = await self.connect_login(cluster)
        if found is None:
            await self.refresh(cluster)
            found = self.find_target(target.name)
        if found is None:
            raise UnknownHardwareError(target.name, [t.name for t in self._base_targets()])
        return found[0], found[1], conn

    # ------------------------------------------------------------------ launch

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        assert self.transport is not None and self.ledger is not None
        with steps.step("connect"):
            cluster, offer, conn = await self._reach(target)
        shell = self.shell(cluster, conn)
        allocation = await live_allocation(self, target, shell, steps)
        if allocation is None:
            allocation = await submit(self, cluster, offer, target, shell, steps)
        entry = self.cluster_settings(cluster)
        idle = float(entry.get("idle_stop", self.idle_stop))
        machine = SLURMMachine(
            target,
            self.transport,
            conn,
            self.log,
            self.agent_idle_exit,
            self.relay_buffer_mib * 1024 * 1024,
            shell=shell,
            allocation=allocation,
            ledger=self.ledger,
            watch_interval=self.watch_interval,
            lifetime={"idle_stop": idle, "deadman": 0.0} if idle else None,
            notify=lambda line: notify_kernels(self, target, line),
            bridged=str(entry.get("reach") or "bridge") != "direct",
            warn=float(entry.get("warn", 300)),
        )
        try:
            with steps.step("prepare host"):
                await machine.agent(progress=steps.note)
        except BaseException:
            await machine.release("its agent could not start")
            await machine.close()
            raise
        return machine

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """The cluster's shared home (see :class:`.hibernated.HibernatedOnCluster`)."""
        return self.hibernated.hibernation_place(target)

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """A file of a hibernated kernel's state, read over the login node's connection."""
        return await self.hibernated.read_hibernated(place, path)

    async def remove_hibernated(self, place: FarPlace) -> str:
        """A hibernated kernel's state removed over the login node's connection."""
        return await self.hibernated.remove_hibernated(place)

    # ------------------------------------------------------------------ ending

    async def after_hibernation(self, target: Target) -> str | None:
        """End the allocation's job (see :func:`.ending.end_after_hibernation`)."""
        return await end_after_hibernation(self, target)

    async def terminate(self, record: MachineRecord, detail: str = "by the user") -> MachineRecord:
        """Cancel an allocation's job (see :func:`.ending.terminate_job`)."""
        return await terminate_job(self, record, detail)

    async def reap(
        self, live_kernel_targets: set[str], *, dry_run: bool = False
    ) -> tuple[list[str], list[str]]:
        """Cancel the jobs this ledger started whose kernels are gone (see
        :func:`.ending.reap_jobs`)."""
        return await reap_jobs(self, live_kernel_targets, dry_run=dry_run)


__all__ = ["CLUSTER_KEYS", "SLURMProvider"]
