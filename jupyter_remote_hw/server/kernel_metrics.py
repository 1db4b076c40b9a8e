"""The live view of the hardware under a notebook's kernel: its host's CPU, memory and
GPUs, read by the host's agent, with the machine's price and cost so far.

Free of HTTP: ``GET /jupyter-remote-hw/api/usage/<kernel id>`` (see
:mod:`.handlers`) calls :meth:`KernelMetrics.metrics`. Answers are kept a
couple of seconds, so that several browser tabs polling one kernel cost the host
one reading, not one each.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.provisioning.local_provisioner import LocalProvisioner

from ..agent.metrics import MetricsSampler
from ..agent_client import AgentError, AgentUnavailableError
from ..machines.manager import target_label
from ..providers.local import detect_hardware
from ..provisioner import RemoteHWProvisioner
from ..transport import TransportError
from .hardware_actions import HardwareActions, HardwareRequestError

#: Seconds an answer is reused for every caller asking about the same kernel.
CACHE_SECONDS = 2.0
#: Seconds the agent may take to answer (nvidia-smi's own limit is 5 s).
AGENT_WAIT = 10.0
#: Answers older than this are dropped from the cache.
_FORGET_AFTER = 60.0


@dataclass
class KernelMetrics:
    """Live use of the hardware each kernel runs on.

    Args:
        actions: The hardware actions (the server's kernel manager, the machines
            and what each machine costs).
        cache_seconds: Seconds an answer is reused.
    """

    actions: HardwareActions
    cache_seconds: float = CACHE_SECONDS
    _cache: dict[str, tuple[float, asyncio.Future[dict[str, Any]]]] = field(
        default_factory=dict, repr=False
    )
    _here: MetricsSampler | None = field(default=None, repr=False)

    async def metrics(self, kernel_id: str) -> dict[str, Any]:
        """The hardware use under a kernel, as of at most :attr:`cache_seconds` ago.

        Returns:
            ``kernel_id``, ``target`` (None for a kernel that is not ours, which runs
            on this machine), ``hardware``, ``where``, the host's ``cpu``,
            ``load``, ``memory`` and ``gpus``, the kernel process's own use
            (``kernel``), ``time`` (when read), ``warnings``, and the machine's
            ``price_per_hour`` and ``cost_so_far`` (0 for hardware already
            owned, None when unknown).

        Raises:
            HardwareRequestError: 404 for an unknown kernel; 409 while its machine
                cannot be reached; 502 when its agent fails.
        """
        if kernel_id not in self.actions.kernel_manager:
            raise HardwareRequestError(
                404,
                f"no kernel {kernel_id!r} on this server: it was shut down, or the "
                "notebook's kernel changed; reopen the notebook",
                "kernel_id",
            )
        now = time.monotonic()
        for key, (at, future) in list(self._cache.items()):
            if future.done() and now - at > _FORGET_AFTER:
                del self._cache[key]
        cached = self._cache.get(kernel_id)
        if cached is None or (cached[1].done() and now - cached[0] >= self.cache_seconds):
            cached = (now, asyncio.ensure_future(self._read(kernel_id)))
            self._cache[kernel_id] = cached
        return dict(await asyncio.shield(cached[1]))

    async def _read(self, kernel_id: str) -> dict[str, Any]:
        kernel = self.actions.kernel_manager.get_kernel(kernel_id)
        provisioner = getattr(kernel, "provisioner", None)
        if isinstance(provisioner, RemoteHWProvisioner) and provisioner.hibernation.hibernated:
            raise HardwareRequestError(
                409,
                f"{provisioner.named} hibernates: its hardware was released ($0/h); its use "
                "shows again once it wakes (run a cell, or wake it)",
                "kernel_id",
            )
        target_name = self.actions.kernel_target(kernel_id)
        if target_name is not None:
            return await self._from_agent(kernel_id, target_name)
        if not isinstance(provisioner, LocalProvisioner):
            raise HardwareRequestError(
                409,
                f"the kernel ({getattr(kernel, 'kernel_name', '?')}) is not started by "
                "jupyter-remote-hw nor a process of this machine "
                f"({type(provisioner).__name__}): its hardware use is not "
                "available here",
                "kernel_id",
            )
        if self._here is None:
            self._here = MetricsSampler()
        pid = getattr(provisioner, "pid", None)
        reading = await self._here.sample(pid if isinstance(pid, int) else None)
        return {
            "kernel_id": kernel_id,
            "target": None,
            "hardware": detect_hardware(),
            "where": "this machine",
            **reading,
            "price_per_hour": 0.0,
            "cost_so_far": 0.0,
        }

    async def _from_agent(self, kernel_id: str, target_name: str) -> dict[str, Any]:
        machines = self.actions.machines
        machine = machines.cached(target_name)
        if machine is None:
            raise HardwareRequestError(
                409,
                f"the kernel runs on {target_label(machines, target_name)}, which is not connected "
                "yet: "
                "try again once the kernel has started",
                "kernel_id",
            )
        if not machine.link_up:
            raise HardwareRequestError(
                409,
                f"the link to {machine.target.label} is down and being "
                "re-established: its hardware use shows again once it is back",
                "kernel_id",
            )

        async def ask() -> dict[str, Any]:
            client = await machine.agent()
            return await client.call("metrics", wait=AGENT_WAIT, kernel_id=kernel_id)

        try:
            reading = await machines.on_home(ask())
        except AgentError as exc:
            if exc.kind == "unknown_kernel":
                raise HardwareRequestError(
                    409,
                    f"the agent on {machine.target.label} no longer runs this kernel: "
                    "restart the kernel",
                    "kernel_id",
                ) from None
            raise HardwareRequestError(
                502,
                f"the agent on {machine.target.label} could not read its hardware use: {exc}",
                "kernel_id",
            ) from None
        except (AgentUnavailableError, TransportError, TimeoutError, OSError) as exc:
            raise HardwareRequestError(
                409,
                f"the agent on {machine.target.label} did not answer: "
                f"{exc or 'no answer in time'}; try again in a moment",
                "kernel_id",
            ) from None
        cost = self.actions.machine_model(target_name, machine.target)
        return {
            "kernel_id": kernel_id,
            "target": target_name,
            "hardware": machine.target.hardware,
            "where": machine.target.where,
            **reading,
            "price_per_hour": cost["price_per_hour"],
            "cost_so_far": cost["cost_so_far"],
            "time_left_seconds": machine.seconds_left(),
        }


__all__ = ["CACHE_SECONDS", "KernelMetrics"]
