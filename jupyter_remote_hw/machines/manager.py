"""The process-wide registry of targets and prepared machines.

One :class:`MachineManager` per process (a traitlets singleton) is shared by
the kernel spec manager, every kernel provisioner and the server extension:
it owns the SSH connections, the providers, the open machines and the ledger.

Those SSH connections and forwards live on one event loop, the manager's home
loop, which must keep running while kernels run: the Jupyter server's loop
(bound by the server extension), the loop of ``%%remote``'s thread (bound by
:class:`~..notebook.remote_sessions.RemoteSessions`), or else a loop the manager runs in
a daemon thread of its own. Kernels started through jupyter_client's
synchronous API (``jupyter run``, ``jupyter console``, nbclient, papermill)
thus keep answering while their caller blocks and runs no loop.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from jupyter_core.paths import jupyter_config_path, jupyter_data_dir
from traitlets import Float, Instance, List, Unicode
from traitlets.config import Config, SingletonConfigurable
from traitlets.config.loader import ConfigFileNotFound, JSONFileConfigLoader, PyFileConfigLoader

from ..agent_client import AgentError, AgentUnavailableError
from ..errors import causes
from ..hibernation import HibernationStore
from ..ledger import Ledger
from ..providers import Machine, Provider, Target, UnknownHardwareError
from ..providers.launch_steps import LaunchError, LaunchListener, LaunchSteps
from ..providers.registry import provider_classes
from ..transport import HostKeyError, TransportError, TransportManager
from ..transport.state import ConnectionState, StateChange
from .measured import MeasuredHosts
from .placements import Placements

T = TypeVar("T")


class HomeLoopClosedError(RuntimeError):
    """The manager's own loop was stopped (at process exit); machines cannot be reached."""


def server_config() -> Config:
    """The Jupyter server's configuration (``jupyter_server_config.py``/``.json``).

    Read from the same places the server reads it, so that ``%%remote`` and
    kernels started outside a server (``jupyter run``, nbclient, papermill)
    offer the hardware the notebook's kernel picker offers.
    """
    config = Config()
    # jupyter_config_path() lists the highest priority first.
    for directory in reversed([os.getcwd(), *jupyter_config_path()]):
        for loader_class, name in (
            (PyFileConfigLoader, "jupyter_server_config.py"),
            (JSONFileConfigLoader, "jupyter_server_config.json"),
        ):
            try:
                config.merge(loader_class(name, path=directory).load_config())
            except ConfigFileNotFound:
                continue
    return config


@dataclass(frozen=True)
class Unreachable:
    """A target whose last connection failed.

    Attributes:
        since: When the first failure in a row was (epoch seconds).
        key_not_trusted: Whether it failed on the host's key (unknown or changed).
        detail: What the last failure said.
    """

    since: float
    key_not_trusted: bool
    detail: str

    @classmethod
    def after(cls, exc: LaunchError, earlier: Unreachable | None) -> Unreachable | None:
        """What a failed launch says of its target: unreachable (since the ``earlier``
        failure in a row, if any) when it failed to connect; None for other failures."""
        transport = next((c for c in causes(exc) if isinstance(c, TransportError)), None)
        if transport is None:
            return None
        return cls(
            since=earlier.since if earlier is not None else time.time(),
            key_not_trusted=isinstance(transport, HostKeyError),
            detail=exc.reason,
        )

    def to_json(self) -> dict[str, Any]:
        """As the hardware listing sends it: ``{"reason", "since", "detail"}``."""
        reason = "host key not trusted" if self.key_not_trusted else "unreachable"
        return {"reason": reason, "since": self.since, "detail": self.detail}


class MachineManager(SingletonConfigurable):
    """Targets, the machines prepared for them, and the ledger.

    Configure it (and the providers and transport it creates) in
    ``jupyter_server_config.py``: ``c.MachineManager.*``, ``c.LocalProvider.*``,
    ``c.SSHProvider.*``, ``c.AWSProvider.*``, ``c.SLURMProvider.*``, ``c.BudgetGuard.*``,
    ``c.TransportManager.*``, ``c.HibernationStore.*``.
    """

    ledger_path = Unicode(
        "",
        config=True,
        help="The SQLite ledger of running kernels; empty: "
        "<jupyter data dir>/jupyter_remote_hw/ledger.sqlite3.",
    )
    default_target = Unicode(
        "local", config=True, help="The target listed first (the default hardware)."
    )
    exit_timeout = Float(
        10.0,
        config=True,
        help="Seconds the manager's own loop may take at process exit to stop idle agents "
        "and close SSH connections (only in processes without a Jupyter server, such as "
        "`jupyter run` or papermill).",
    )
    launch_listeners: List[LaunchListener] = List(
        help="Called with every launch event (step started, progress, done, failed)."
    )
    transport = Instance(TransportManager)
    ledger = Instance(Ledger)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport = TransportManager(parent=self, log=self.log)
        path = Path(
            self.ledger_path or Path(jupyter_data_dir()) / "jupyter_remote_hw" / "ledger.sqlite3"
        ).expanduser()
        self.ledger = Ledger(path)
        #: Every provider, by name (see :mod:`..providers.registry`); each gets this
        #: process's SSH connections and ledger when it has a setting for them.
        self.providers: dict[str, Provider] = {}
        for name, cls in provider_classes(self.log).items():
            shared: dict[str, Any] = {}
            if cls.class_traits().get("transport") is not None:
                shared["transport"] = self.transport
            if cls.class_traits().get("ledger") is not None:
                shared["ledger"] = self.ledger
            self.providers[name] = cls(parent=self, log=self.log, **shared)
        self._machines: dict[str, Machine] = {}
        #: Kernels in the ledger that a server could not reattach yet (their host is
        #: away), by kernel id: their target's name. The server keeps retrying them.
        self.waiting: dict[str, str] = {}
        #: Whether the Jupyter server is stopping: its kernels' shutdowns then leave a
        #: hibernated kernel's saved state and ledger row for the next server.
        self.server_stopping = False
        #: Launches under way, by kernel id: their task and the loop it runs on
        #: (see :meth:`cancel_launch`).
        self.launches: dict[str, tuple[asyncio.Task[Any], asyncio.AbstractEventLoop]] = {}
        #: The machine each kernel runs on (or will, or did before it hibernated), by
        #: kernel id: its target's name, or an allocation's (see :meth:`place`).
        self.placements = Placements()
        #: Since when (epoch seconds) each open machine's link has been down, by target name.
        self.link_down_since: dict[str, float] = {}
        #: Targets whose last connection failed, by name: since when, and why (cleared
        #: by the next connection that succeeds). See :meth:`machine`.
        self.unreachable: dict[str, Unreachable] = {}
        #: What each target's agent measured of its host (CPUs, memory), for the listing.
        self.measured = MeasuredHosts(self.log)
        #: Called with a target's name and whether its link is up, whenever that changes.
        self.link_listeners: list[Callable[[str, bool], None]] = []
        self._locks: dict[str, asyncio.Lock] = {}
        self._home: asyncio.AbstractEventLoop | None = None
        self._home_thread: threading.Thread | None = None
        self._home_guard = threading.Lock()
        self._home_closed = False
        self._hibernation_store: HibernationStore | None = None

    @property
    def hibernation_store(self) -> HibernationStore:
        """Where this process keeps the state of hibernated kernels (``c.HibernationStore``),
        made on first use."""
        if self._hibernation_store is None:
            self._hibernation_store = HibernationStore(parent=self, log=self.log)
        return self._hibernation_store

    # ------------------------------------------------------------------ home loop

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make ``loop`` the home loop: a loop its owner keeps running (the server's).

        A manager that already started a loop of its own keeps it.
        """
        with self._home_guard:
            if self._home_thread is not None and not self._home_closed:
                # Machines already live there; callers on ``loop`` reach them through it.
                self.log.debug("machines: keeping their own loop")
                return
            self._home = loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The home loop; started in a daemon thread on first use when none was bound.

        Raises:
            HomeLoopClosedError: The manager's own loop was stopped at exit.
        """
        with self._home_guard:
            if self._home_closed:
                raise HomeLoopClosedError(
                    "the machine manager was closed at process exit; its machines cannot "
                    "be reached any more"
                )
            if self._home is None or self._home.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, daemon=True, name="jupyter-remote-hw-machines"
                )
                thread.start()
                self._home, self._home_thread = loop, thread
                # Registered after the client that started the first kernel registered
                # its own exit handlers (``jupyter run`` shuts its kernel down there),
                # so this runs after them.
                atexit.register(self.stop_own_loop)
                self.log.debug("machines: running on a loop of their own")
            return self._home

    async def on_home(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Await ``coroutine`` on the home loop, from whichever loop calls.

        Cancelling the caller cancels the coroutine on the home loop.
        """
        try:
            loop = self.loop
        except HomeLoopClosedError:
            coroutine.close()
            raise
        if asyncio.get_running_loop() is loop:
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))

    def stop_own_loop(self) -> None:
        """Close every machine on the manager's own loop and stop it (at process exit).

        Does nothing when the home loop is a bound one: its owner closes the manager.
        """
        with self._home_guard:
            loop, thread = self._home, self._home_thread
            if thread is None or loop is None or self._home_closed:
                return
            self._home_closed = True
        atexit.unregister(self.stop_own_loop)
        try:
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(self.exit_timeout)
        except Exception as exc:  # noqa: BLE001 (at exit: report, do not raise)
            self.log.warning("machines: closing at exit failed: %s", exc or type(exc).__name__)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.exit_timeout)
        if not thread.is_alive():
            loop.close()

    # ------------------------------------------------------------------ targets

    def targets(self) -> list[Target]:
        """Every target the providers offer now, the default one first."""
        found: dict[str, Target] = {}
        for provider in self.providers.values():
            for target in provider.targets():
                found.setdefault(target.name, target)
        return sorted(found.values(), key=lambda t: t.name != self.default_target)

    def target(self, name: str) -> Target:
        """The target called ``name``.

        Raises:
            UnknownHardwareError: No provider offers it.
        """
        listed = {t.name: t for t in self.targets()}
        found = listed.get(name) or self._resolve(name)
        if found is None:
            raise UnknownHardwareError(name, list(listed))
        return found

    def _resolve(self, name: str) -> Target | None:
        """A target no provider lists now but one still knows (see ``Provider.resolve``)."""
        for provider in self.providers.values():
            found = provider.resolve(name)
            if found is not None:
                return found
        return None

    def known_targets(self, also: Iterable[str] = ()) -> dict[str, Target]:
        """Every target listed now, by name, with those of open machines and of kernels'
        places, and those of ``also`` that a provider still knows (an allocation whose
        job ended while its kernel hibernates, say)."""
        found = {t.name: t for t in self.targets()}
        for machine in self._machines.values():
            found.setdefault(machine.target.name, machine.target)
        for name in sorted({*also, *self.placements.values()} - found.keys()):
            target = self._resolve(name)
            if target is not None:
                found[name] = target
        return found

    def place(self, kernel_id: str, target: Target) -> Target:
        """Where a kernel that asks for ``target`` runs: the target of its machine.

        On most targets that is the target itself (kernels share its machine); a
        SLURM target gives each kernel an allocation of its own unless the user asks
        to share one (see :mod:`..providers.slurm.allocations`). A kernel keeps its
        place until :meth:`unplace`, so that a restart finds it there again.

        Raises:
            UnknownHardwareError: The place the provider chose is not a target (a bug
                of that provider).
        """
        provider = self.providers[target.provider]
        current = self.placements.get(kernel_id)
        taken = {m for k, m in self.placements.items() if k != kernel_id}
        placed = provider.placement(target.name, taken, current)
        found = target if placed == target.name else self.target(placed)
        self.placements.put(kernel_id, placed)
        return found

    def unplace(self, kernel_id: str) -> None:
        """Forget where a kernel ran: it was shut down, or its launch failed."""
        self.placements.drop(kernel_id)

    def steps(self, target: str, kernel_id: str) -> LaunchSteps:
        """A step recorder for one launch, reporting to :attr:`launch_listeners`."""
        return LaunchSteps(target, kernel_id, self.log, self.launch_listeners)

    def cancel_launch(self, kernel_id: str) -> bool:
        """Cancel the launch of a kernel under way (from any thread): what it started is
        undone (a pending SLURM job cancelled) and the launch fails as cancelled.

        Returns:
            False when no launch of that kernel is under way.
        """
        entry = self.launches.get(kernel_id)
        if entry is None or entry[0].done():
            return False
        task, loop = entry
        loop.call_soon_threadsafe(task.cancel)
        return True

    async def cancel_launches(self, wait: float = 30.0, keep: Collection[str] = ()) -> int:
        """Cancel every launch under way but those of the kernels in ``keep``, and wait
        (up to ``wait`` seconds) until each has undone what it started (a job in a SLURM
        queue cancelled): at shutdown.

        Returns:
            How many were cancelled.
        """

        async def cancel_all() -> int:
            tasks = [
                task
                for kernel_id, (task, _) in self.launches.items()
                if not task.done() and kernel_id not in keep
            ]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=wait)
            return len(tasks)

        home = self._home
        if home is None or home.is_closed() or self._home_closed:
            return await cancel_all()
        return await self.on_home(cancel_all())

    # ------------------------------------------------------------------ machines

    async def machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """The prepared machine for ``target``, connecting and preparing it when needed."""
        steps.for_target(target)
        lock = self._locks.setdefault(target.name, asyncio.Lock())
        async with lock:
            machine = self._machines.get(target.name)
            if machine is not None:
                try:
                    await machine.agent()
                    return machine
                except AgentUnavailableError as exc:
                    self.log.info("machine %s: reopening (%s)", target.name, exc)
                    await machine.close()
                    del self._machines[target.name]
            try:
                machine = await self.providers[target.provider].open_machine(target, steps)
            except LaunchError as exc:
                noted = Unreachable.after(exc, self.unreachable.get(target.name))
                if noted is not None:
                    self.unreachable[target.name] = noted
                raise
            self.unreachable.pop(target.name, None)
            self._machines[target.name] = machine
            self._watch_link(machine)
            self.measured.measure_soon(machine)
            return machine

    def _watch_link(self, machine: Machine) -> None:
        """Keep :attr:`link_down_since` and tell :attr:`link_listeners` of the machine's link."""
        conn = getattr(machine, "conn", None)
        if conn is None:
            return  # this machine: no link to lose
        name = machine.target.name

        def changed(change: StateChange) -> None:
            up = change.state == ConnectionState.CONNECTED
            if up:
                self.link_down_since.pop(name, None)
            else:
                self.link_down_since.setdefault(name, change.timestamp)
            for listener in list(self.link_listeners):
                try:
                    listener(name, up)
                except Exception:  # a listener's bug must not stop the others
                    self.log.exception("machine %s: link listener failed", name)

        conn.add_listener(changed)

    def cached(self, target_name: str) -> Machine | None:
        """The machine already prepared for a target, if any."""
        return self._machines.get(target_name)

    def open_machines(self) -> list[Machine]:
        """Every machine prepared in this process, by target name."""
        return [self._machines[name] for name in sorted(self._machines)]

    async def release_if_idle(self, target_name: str) -> bool:
        """Stop a machine's agent when it runs no kernel, and drop this side's link to it.

        Returns:
            True when the agent stopped.
        """
        lock = self._locks.setdefault(target_name, asyncio.Lock())
        async with lock:
            machine = self._machines.get(target_name)
            if machine is None:
                return False
            try:
                client = await machine.agent()
                result = await client.call(
                    "shutdown_agent", wait=15, if_idle=True, kill_kernels=False
                )
            except (
                AgentError,
                AgentUnavailableError,
                TransportError,
                OSError,
                TimeoutError,
            ) as exc:  # a lost link at teardown leaves the agent be
                self.log.info("machine %s: agent left running: %s", target_name, exc)
                return False
            if not result.get("stopping"):
                return False
            del self._machines[target_name]
            await self._release(machine)
            host = machine.target.host
            if host is not None and not any(m.target.host == host for m in self._machines.values()):
                await self.transport.close(host)
            self.log.info("machine %s: no kernels left; its agent stopped", target_name)
            return True

    async def close(self) -> None:
        """Stop agents that run no kernel; close every machine link and SSH connection.

        Agents with kernels keep running, and so do their kernels. Runs on the
        home loop when there is one.
        """
        home = self._home
        if home is None or home.is_closed() or self._home_closed:
            await self._close()  # nothing ever ran elsewhere: no loop to start for it
        else:
            await self.on_home(self._close())

    async def _close(self) -> None:
        await self.measured.close()
        for name in list(self._machines):
            await self.release_if_idle(name)
        machines = list(self._machines.values())
        self._machines.clear()
        for machine in machines:
            await machine.close()
        await self.transport.close_all()
        for provider in self.providers.values():
            provider.close()
        self.ledger.close()

    async def _release(self, machine: Machine) -> None:
        """Have the machine's provider let go of it (or close it, when no provider of
        that name is left)."""
        provider = self.providers.get(machine.target.provider)
        if provider is None:
            await machine.close()
        else:
            await provider.release(machine)


def target_label(manager: MachineManager, name: str) -> str:
    """Target ``name`` as people read it (``A10G 24 GiB · gpu-box``); the name itself
    when no provider knows it any more."""
    found = manager.known_targets([name]).get(name)
    return found.label if found else name
