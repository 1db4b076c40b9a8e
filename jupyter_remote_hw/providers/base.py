"""The provider contract: what every provider does, and what a machine it prepares offers.

A provider is where machines come from (this machine, SSH hosts, EC2, a SLURM
cluster...). Its lifecycle, in the order a kernel meets it:

1. **Offer targets** (:meth:`Provider.targets`): the hardware a user can pick now,
   and what of it is free right now where the provider knows
   (:meth:`Provider.availability`, a scheduler's free GPUs).
2. **Check usability** (:meth:`Provider.usability`, and per target
   :meth:`Provider.target_usability`): whether machines can be started now, and if
   not, why and what to do (no credentials, a cluster's login node unreachable).
3. **Prepare a machine** and **connect** (:meth:`Provider.open_machine`): make the
   target's machine exist and run (launch or start an instance, submit a job and
   wait in its queue), then reach it and make sure its agent runs. Every part is a
   step on the :class:`~.launch_steps.LaunchSteps` it is given, timed and named when
   it fails; a scheduler reports its queue state (job id, state, reason, position,
   expected start) as notes of its step.
4. **Report live resources**: the machine's agent reports its CPUs, memory and GPUs
   and their use (:meth:`Machine.agent`); what the provider launched that costs money
   is in the ledger (:class:`~..ledger.Ledger`), which the machines listing reads.
5. **Release** (:meth:`Provider.release`): when a machine runs no kernel any more
   and its agent stopped, let go of it (and of what it holds: a job, a reservation).
6. **Estimate cost** (:meth:`Provider.price_per_hour`): what a target costs per hour.

What nothing claims any more is ended by ``jupyter remote-hw reap``, which asks each
provider that launches machines in its own terms (what claims an instance is its
clients' heartbeat; what claims a job, a kernel the agent in it still runs):
``AWSProvider.reap_candidates``/``reap`` and ``SLURMProvider.reap``, driven by
:mod:`..cli.commands` and :mod:`..cli.slurm_reaping`; hardware the user owns has
nothing to reap.

A new provider is a package under ``providers/`` with a :class:`Provider` subclass
that implements :meth:`~Provider.targets` and :meth:`~Provider.open_machine` (and
overrides the others where it has something to say), registered under the entry
point group ``jupyter_remote_hw.providers`` by its :attr:`~Provider.name`.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, ABCMeta, abstractmethod
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from traitlets import Float, Int, MetaHasTraits
from traitlets.config import LoggingConfigurable

from ..agent_client import AgentClient, Progress
from ..agent_client.bootstrap import DEFAULT_IDLE_EXIT
from .target import Target
from .usability import Unusable

if TYPE_CHECKING:
    from ..agent_client.relay import KernelRelayClient
    from ..hibernation.far import FarPlace
    from .launch_steps import LaunchListener, LaunchSteps

#: The entry point group providers are registered under, by name.
ENTRY_POINT_GROUP = "jupyter_remote_hw.providers"

PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
"""The five ports of a kernel connection."""


class Machine(ABC):
    """A host with a running agent, from which kernel ports can be reached here.

    What a provider's :meth:`Provider.open_machine` returns: the agent (which starts,
    interrupts and stops kernels and reports the host's resources), the kernels'
    ports made reachable here, and byte streams to the host for transfers.

    Args:
        target: The target this machine serves.
        log: Where to log.
        idle_exit: Seconds the agent lingers with no kernel and no client.
    """

    def __init__(self, target: Target, log: logging.Logger, idle_exit: float) -> None:
        self.target = target
        self.log = log
        self.idle_exit = idle_exit
        self._client: AgentClient | None = None
        self._agent_lock = asyncio.Lock()

    @property
    @abstractmethod
    def link_up(self) -> bool:
        """Whether the host can be reached right now (False while reconnecting)."""

    async def agent(self, progress: Progress | None = None) -> AgentClient:
        """A live client of the host's agent, starting the agent (or reopening a
        broken stream to it) first when needed.

        Args:
            progress: Called with a line per preparation step.

        Raises:
            AgentUnavailableError: The agent cannot be reached or started.
        """
        async with self._agent_lock:
            if self._client is None or self._client.closed:
                self._client = await self._start_agent(progress)
            return self._client

    @abstractmethod
    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        """Make sure the host's agent runs; return a new client to it."""

    @abstractmethod
    async def expose(
        self, kernel_id: str, connection: dict[str, Any], local_ports: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """Make a kernel's ports reachable on 127.0.0.1 here.

        Calling it again for the same kernel keeps the ports it gave before.

        Args:
            kernel_id: The kernel.
            connection: The kernel's connection info on the host.
            local_ports: Local ports to use when free (from before a server
                restart); others are picked otherwise.

        Returns:
            The connection info to use here.
        """

    @abstractmethod
    async def unexpose(self, kernel_id: str) -> None:
        """Stop making a kernel's ports reachable here."""

    def relay(self, kernel_id: str) -> KernelRelayClient | None:
        """The relay whose ports a kernel's clients use here, or None where the kernel's
        ports are not a relay's (a machine that reaches its kernels directly). Only a
        kernel with a relay can hibernate and keep its ports."""
        return None

    async def detach(self, kernel_id: str) -> KernelRelayClient | None:
        """Take a kernel's relay out of this machine without closing it, and stop the rest
        of what makes the kernel reachable (its heartbeat forward): the relay keeps the
        ports while the kernel hibernates, and may outlive this machine.

        Returns:
            The relay, or None where the kernel has none (then nothing is stopped).
        """
        return None

    def adopt(self, kernel_id: str, relay: KernelRelayClient) -> None:
        """Make ``relay`` (taken out of this or another machine by :meth:`detach`) the
        kernel's relay here: the next :meth:`expose` of the kernel points it at the
        kernel on this machine, its ports unchanged.

        Raises:
            NotImplementedError: This kind of machine reaches kernels without relays.
        """
        raise NotImplementedError(f"{type(self).__name__} reaches kernels without relays")

    def seconds_left(self) -> float | None:
        """Seconds before the machine's time limit (a scheduler's allocation), or None
        where it has none."""
        return None

    def end_reason(self) -> str | None:
        """Why the machine ended for good under its kernels (a scheduler's job ended by
        its time limit, say), or None while it lasts. Its kernels are then dead."""
        return None

    async def confirm_end(self) -> str | None:
        """:meth:`end_reason`, asked now where the machine can be asked (a scheduler is
        asked about the job at once, not at its next look): for when its agent went away
        and whether the machine ended with it decides what to answer."""
        return self.end_reason()

    def expect_drops(self, kernel_id: str) -> None:
        """The kernel is stopping or restarting: its clients' reconnects will fail for a
        while, which is not worth a warning (only machines with forwards log them)."""

    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        """Open a byte stream to a port on the host's 127.0.0.1 (an ``int``) or to a UNIX
        socket there (a ``str``): a transfer's bulk stream.

        Returns:
            A reader and a writer (``asyncio`` or ``asyncssh`` streams).

        Raises:
            NotImplementedError: This kind of machine cannot; transfers then go
                as chunk messages over the kernel's shell channel.
        """
        raise NotImplementedError(f"{type(self).__name__} opens no byte streams")

    async def close(self) -> None:
        """Drop this side's resources (streams, forwards); the agent keeps running."""
        if self._client is not None:
            await self._client.close()


class ProviderMeta(MetaHasTraits, ABCMeta):
    """The metaclass of providers: traitlets' (for their settings) and ``abc``'s (so
    that a provider missing a part of the contract cannot be created)."""


@runtime_checkable
class Machines(Protocol):
    """What a provider may read of the machine manager that holds it (its ``parent``)."""

    @property
    def placements(self) -> Mapping[str, str]:
        """The machine each kernel of this server runs on, by kernel id."""

    launch_listeners: list[LaunchListener]
    """Who hears of launches and of machines' notices."""

    def cached(self, target_name: str) -> Machine | None:
        """The open machine called ``target_name``, without opening one."""


class Provider(LoggingConfigurable, metaclass=ProviderMeta):
    """Where machines come from (see the module's docstring for the lifecycle).

    Subclasses are configured through traitlets, as ``c.<ClassName>.<setting>``.

    Attributes:
        name: The provider's name in targets, the ledger and the entry point group
            (``local``, ``ssh``, ``aws``).
    """

    name: ClassVar[str]

    agent_idle_exit = Float(
        DEFAULT_IDLE_EXIT,
        config=True,
        help="Seconds a host agent with no kernel and no connected Jupyter server waits "
        "before it exits (0: it never does). While a server is connected, the agent stays, "
        "so that the next kernel starts without starting the agent again.",
    )

    relay_buffer_mib = Int(
        256,
        min=1,
        config=True,
        help="MiB of a kernel's messages its host keeps while the link to it is down, so "
        "that a cut of any length loses no output. A longer cut drops the oldest output "
        "beyond this, and the cell says how much.",
    )

    hibernate_after = Float(
        0.0,
        min=0.0,
        config=True,
        help="Seconds a kernel on this provider's targets may stay idle (no cell running, "
        "no message) before it hibernates: its state is saved on the Jupyter server's disk "
        "and its hardware released, and the next cell wakes it (docs/hibernation.md). 0: "
        "never. Keep it below the machine's own idle stop, which ends the kernel.",
    )

    @abstractmethod
    def targets(self) -> list[Target]:
        """The targets this provider offers now."""

    @property
    def machine_manager(self) -> Machines | None:
        """The machine manager that holds this provider (None: used on its own)."""
        return self.parent if isinstance(self.parent, Machines) else None

    def resolve(self, name: str) -> Target | None:
        """A target by name that :meth:`targets` does not list now (an allocation whose
        job ended, which a kernel placed in it still names); None: no such target."""
        return None

    def placement(self, name: str, taken: Collection[str], current: str | None) -> str:
        """The machine a kernel that asks for target ``name`` runs on.

        By default every kernel of a target runs on its one machine. A scheduler's
        provider may give each kernel an allocation of its own instead.

        Args:
            name: The target the kernel asked for.
            taken: Machines that other kernels of this server run on.
            current: The machine the kernel ran on before (a restart), if any.
        """
        return name

    def hibernate_after_for(self, target: Target) -> float:
        """Seconds a kernel on ``target`` may stay idle before it hibernates (0: never)."""
        return float(self.hibernate_after)

    def availability(self, target_name: str) -> str | None:
        """What of a target is free right now, for people (``2 of 4 GPUs free``), where
        the provider knows (a scheduler); None otherwise."""
        return None

    def specs(self, target_name: str) -> dict[str, Any] | None:
        """What a kernel on the target gets, where the provider knows it better than its
        hardware label says: any of ``gpu``, ``gpu_count``, ``gpu_memory_gib``,
        ``vcpus`` and ``memory_gib`` (None: unknown). None: read the label."""
        return None

    def usability(self) -> Unusable | None:
        """None when this provider can start machines now, else why not and what to do."""
        return None

    def target_usability(self, target_name: str) -> Unusable | None:
        """None when a machine of target ``target_name`` can be started now, else why not
        and what to do. By default what :meth:`usability` says of the whole provider; a
        provider whose targets are reached separately (a SLURM cluster's login node)
        says only what keeps that target from starting."""
        return self.usability()

    @abstractmethod
    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """Prepare ``target``'s machine and reach it: make it exist and run, then make
        sure its agent runs.

        Runs its steps on ``steps`` (at least ``connect`` and ``prepare host``; a
        machine that must be launched or queued for first has steps for that too).
        A machine this call launched is ended again when a later step fails, so that
        nothing is left costing money.

        Raises:
            LaunchError: A step failed.
        """

    async def release(self, machine: Machine) -> None:
        """Let go of a machine whose agent stopped because it ran no kernel: its
        streams and forwards here (and whatever the provider holds for it)."""
        await machine.close()

    async def after_hibernation(self, target: Target) -> str | None:
        """The last kernel on ``target``'s machine hibernated and its agent stopped: stop
        paying for the machine where that is the provider's to do (a cloud instance is
        stopped; a SLURM job already ended with its agent). What was done, for people.
        """
        return None

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """Where a kernel on ``target`` keeps its state while it hibernates: a directory
        its host writes, that outlives the machine's release and that kernels with the
        same place ``host`` read (see :mod:`..hibernation.far`); each kernel gets a
        directory in it. None (the default): the Jupyter server's disk, the store."""
        return None

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """A file of a place this provider made, read from here (to restore a kernel that
        cannot read the place itself): a read-only view, of a map of the file or of a
        copy spooled to this machine's disk, so that its bytes are not held in memory.

        Raises:
            OSError: It cannot be read from here (the message says why, and what to do).
        """
        raise OSError(f"{place.label} cannot be read from this machine")

    async def warm_hibernated(self, place: FarPlace, paths: list[str]) -> None:
        """Start reading a hibernated kernel's files (of a place this provider made) into
        their host's page cache, while the kernel that reads them comes up; best effort.
        The default does nothing (a place no host can read before the wake)."""

    async def remove_hibernated(self, place: FarPlace) -> str:
        """Remove a hibernated kernel's directory of a place this provider made, with no
        kernel there to do it; what was done, for people.

        Raises:
            OSError: It could not be removed.
        """
        return f"its saved state stays in {place.path} on {place.label}"

    def price_per_hour(self, target: Target) -> float | None:
        """US dollars per hour that ``target``'s machine costs while it runs; 0 for
        hardware the user owns, None when not known."""
        return None

    def close(self) -> None:
        """Release what the provider holds open (HTTP connection pools); it can still be used."""
