"""The process-wide registry of targets and prepared machines.

One :class:`MachineManager` per process (a traitlets singleton) is shared by
the kernel spec manager, every kernel provisioner and the server extension:
it owns the SSH connections, the providers, the open machines and the ledger.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Instance, List, Unicode
from traitlets.config import SingletonConfigurable

from .agent_client import AgentError, AgentUnavailableError
from .launch_steps import LaunchListener, LaunchSteps
from .ledger import Ledger
from .providers import LocalProvider, Machine, Provider, SSHProvider, Target, UnknownHardwareError
from .providers.aws import AWSProvider
from .transport import TransportError, TransportManager


class MachineManager(SingletonConfigurable):
    """Targets, the machines prepared for them, and the ledger.

    Configure it (and the providers and transport it creates) in
    ``jupyter_server_config.py``: ``c.MachineManager.*``, ``c.LocalProvider.*``,
    ``c.SSHProvider.*``, ``c.AWSProvider.*``, ``c.BudgetGuard.*``, ``c.TransportManager.*``.
    """

    ledger_path = Unicode(
        "", config=True,
        help="The SQLite ledger of running kernels; empty: "
        "<jupyter data dir>/jupyter_remote_hw/ledger.sqlite3.",
    )
    default_target = Unicode(
        "local", config=True, help="The target listed first (the default hardware)."
    )
    launch_listeners: List[LaunchListener] = List(
        help="Called with every launch event (step started, progress, done, failed)."
    )
    transport = Instance(TransportManager)
    ledger = Instance(Ledger)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transport = TransportManager(parent=self, log=self.log)
        self.providers: dict[str, Provider] = {
            "local": LocalProvider(parent=self, log=self.log),
            "ssh": SSHProvider(parent=self, log=self.log, transport=self.transport),
        }
        path = Path(self.ledger_path or Path(jupyter_data_dir()) / "jupyter_remote_hw"
                    / "ledger.sqlite3").expanduser()
        self.ledger = Ledger(path)
        self.providers["aws"] = AWSProvider(parent=self, log=self.log, transport=self.transport,
                                            ledger=self.ledger)
        self._machines: dict[str, Machine] = {}
        self._locks: dict[str, asyncio.Lock] = {}

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
        targets = {t.name: t for t in self.targets()}
        if name not in targets:
            raise UnknownHardwareError(name, list(targets))
        return targets[name]

    def steps(self, target: str, kernel_id: str) -> LaunchSteps:
        """A step recorder for one launch, reporting to :attr:`launch_listeners`."""
        return LaunchSteps(target, kernel_id, self.log, self.launch_listeners)

    # ------------------------------------------------------------------ machines

    async def machine(self, target: Target, steps: LaunchSteps) -> Machine:
        """The prepared machine for ``target``, connecting and preparing it when needed."""
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
            machine = await self.providers[target.provider].open_machine(target, steps)
            self._machines[target.name] = machine
            return machine

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
                result = await client.call("shutdown_agent", wait=15, if_idle=True,
                                           kill_kernels=False)
            except (AgentError, AgentUnavailableError, TransportError, OSError,
                    TimeoutError) as exc:  # a lost link at teardown leaves the agent be
                self.log.info("machine %s: agent left running: %s", target_name, exc)
                return False
            if not result.get("stopping"):
                return False
            del self._machines[target_name]
            await machine.close()
            host = machine.target.host
            if host is not None and not any(
                m.target.host == host for m in self._machines.values()
            ):
                await self.transport.close(host)
            self.log.info("machine %s: no kernels left; its agent stopped", target_name)
            return True

    async def close(self) -> None:
        """Stop agents that run no kernel; close every machine link and SSH connection.

        Agents with kernels keep running, and so do their kernels.
        """
        for name in list(self._machines):
            await self.release_if_idle(name)
        machines = list(self._machines.values())
        self._machines.clear()
        for machine in machines:
            await machine.close()
        await self.transport.close_all()
        self.ledger.close()
