"""The ``local`` provider: kernels as separate processes on this machine."""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Unicode

from ...agent.hardware import (
    NVIDIA_QUERY,
    NVIDIA_SMI_TIMEOUT,
    cpu_count,
    gpu_label,
    parse_gpu_csv,
)
from ...agent_client import AgentClient, Progress, start_local_agent
from ...hibernation.far import FarPlace
from ...hibernation.files import map_path
from ...hibernation.warm import read_ahead
from ...transfer.client import open_local_stream
from ..base import Machine, Provider
from ..relayed import Forward, RelayedMachine, Where
from ..target import Target, gib_label
from .forward import LocalForward

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

DEFAULT_STATE_DIR = "~/.local/state/jupyter-remote-hw/local"


#: The ``host`` of this machine's place for hibernated state: ``local:`` and its name.
PLACE_PREFIX = "local:"
PLACE_LABEL = "this machine's disk"


@functools.cache
def detect_hardware() -> str:
    """A short label for this machine: its GPUs when nvidia-smi lists any, else its CPUs."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run(
                [smi, *NVIDIA_QUERY],
                capture_output=True,
                text=True,
                timeout=NVIDIA_SMI_TIMEOUT,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        gpus = parse_gpu_csv(out)
        if gpus:
            first = gpu_label(gpus[0])
            return first if len(gpus) == 1 else f"{len(gpus)} × {first}"
    cpus = cpu_count()
    return f"{cpus} CPU" + ("" if cpus == 1 else "s")


class LocalMachine(RelayedMachine):
    """This machine, through an agent running as a local daemon.

    A kernel's shell, control, stdin and IOPub ports here are its relay's
    (:class:`...agent_client.relay.KernelRelayClient`, through the agent's socket),
    and its heartbeat port a forward to the kernel's: so the kernel can hibernate
    and wake with its ports unchanged, as on any host.

    Args:
        relay_buffer: Bytes of a kernel's messages the agent keeps for its relay.
    """

    def __init__(
        self,
        target: Target,
        state_dir: Path,
        log: logging.Logger,
        idle_exit: float,
        relay_buffer: int = 256 * 1024 * 1024,
    ) -> None:
        super().__init__(target, log, idle_exit, relay_buffer)
        self.state_dir = state_dir

    @property
    def link_up(self) -> bool:
        return True

    async def _start_agent(self, progress: Progress | None) -> AgentClient:
        return await start_local_agent(
            self.state_dir, progress=progress, log=self.log, idle_exit=self.idle_exit
        )

    async def _open_agent_stream(self) -> tuple[Any, Any]:
        """A new stream to the agent (starting it again if it is gone)."""
        client = await self.agent()
        if client.socket is None:
            raise RuntimeError("the agent's socket is not known")
        return await open_local_stream(client.socket)

    async def _forward_heartbeat(self, where: Where, local_port: int) -> Forward:
        forward = LocalForward(where, self.log)
        await forward.start(local_port)
        return forward

    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        return await open_local_stream(where)


class LocalProvider(Provider):
    """Kernels on this machine, started by a local agent daemon (no SSH)."""

    name = "local"

    enabled = Bool(True, config=True, help="Offer this machine as a target.")
    hardware = Unicode(
        "",
        config=True,
        help="Hardware label shown in the kernel picker (memory reads in GiB); empty: "
        "detected (GPUs, else CPUs).",
    )
    state_dir = Unicode(
        DEFAULT_STATE_DIR,
        config=True,
        help="The local agent's state directory (its socket path must stay under 108 bytes).",
    )

    def targets(self) -> list[Target]:
        if not self.enabled:
            return []
        return [
            Target(
                name="local",
                provider=self.name,
                where="this machine",
                hardware=gib_label(self.hardware) or detect_hardware(),
                python=sys.executable,
            )
        ]

    def price_per_hour(self, target: Target) -> float | None:
        """Nothing: this machine is the user's own."""
        return 0.0

    def hibernation_place(self, target: Target) -> FarPlace | None:
        """This machine's own disk, beside the agent's state: a kernel here writes its
        state straight to disk, and reads it back there, without passing it through the
        Jupyter server's memory."""
        root = Path(self.state_dir).expanduser().resolve()
        return FarPlace(
            self.name, PLACE_PREFIX + socket.gethostname(), str(root / "hibernated"), PLACE_LABEL
        )

    def _in_place(self, place: FarPlace, path: str) -> Path:
        """``path``, which must lie in ``place`` on this machine.

        Raises:
            OSError: ``place`` is another machine's, or ``path`` lies outside it.
        """
        if place.host != PLACE_PREFIX + socket.gethostname():
            raise OSError(f"{place.label} of {place.host} is not this machine's")
        base, found = Path(place.path).expanduser(), Path(path).expanduser()
        if not found.resolve().is_relative_to(base.resolve()):
            raise OSError(f"{path} is not in {place.path}")
        return found

    async def read_hibernated(self, place: FarPlace, path: str) -> memoryview:
        """The file on this machine's disk (for a kernel woken elsewhere), as a read-only
        view of a map of it: no copy in our memory."""
        return await asyncio.to_thread(map_path, self._in_place(place, path))

    async def warm_hibernated(self, place: FarPlace, paths: list[str]) -> None:
        """The files asked of this machine's disk ahead (see :func:`...hibernation.warm`)."""
        await read_ahead([self._in_place(place, path) for path in paths])

    async def remove_hibernated(self, place: FarPlace) -> str:
        """The directory removed from this machine's disk."""
        found = self._in_place(place, place.path)
        await asyncio.to_thread(shutil.rmtree, found, ignore_errors=True)
        return f"its saved state in {place.path} on {place.label} removed"

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        machine = LocalMachine(
            target,
            Path(self.state_dir).expanduser(),
            self.log,
            self.agent_idle_exit,
            self.relay_buffer_mib * 1024 * 1024,
        )
        with steps.step("prepare host"):
            await machine.agent(progress=steps.note)
        return machine
