"""The ``local`` provider: kernels as separate processes on this machine."""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traitlets import Bool, Unicode

from ..agent.hardware import cpu_count, gpu_size_label, parse_gpu_csv
from ..agent_client import AgentClient, start_local_agent
from .base import Machine, Provider
from .target import Target

if TYPE_CHECKING:
    from ..launch_steps import LaunchSteps

DEFAULT_STATE_DIR = "~/.local/state/jupyter-remote-hw/local"


@functools.cache
def detect_hardware() -> str:
    """A short label for this machine: its GPUs when nvidia-smi lists any, else its CPUs."""
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index,name,memory.total,driver_version",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        gpus = parse_gpu_csv(out)
        if gpus:
            first = " ".join(p for p in (gpus[0]["name"], gpu_size_label(gpus[0]["memory_mib"])) if p)
            return first if len(gpus) == 1 else f"{len(gpus)} × {first}"
    cpus = cpu_count()
    return f"{cpus} CPU" + ("" if cpus == 1 else "s")


class LocalMachine(Machine):
    """This machine, through an agent running as a local daemon."""

    def __init__(self, target: Target, state_dir: Path, client: AgentClient,
                 log: logging.Logger, idle_exit: float) -> None:
        super().__init__(target, log)
        self.state_dir = state_dir
        self.idle_exit = idle_exit
        self._client = client

    @property
    def link_up(self) -> bool:
        return True

    async def agent(self) -> AgentClient:
        if self._client.closed:
            self._client = await start_local_agent(self.state_dir, log=self.log,
                                                   idle_exit=self.idle_exit)
        return self._client

    async def expose(
        self, kernel_id: str, connection: dict[str, Any], local_ports: dict[str, int] | None = None
    ) -> dict[str, Any]:
        return dict(connection)

    async def unexpose(self, kernel_id: str) -> None:
        return None

    async def close(self) -> None:
        await self._client.close()


class LocalProvider(Provider):
    """Kernels on this machine, started by a local agent daemon (no SSH)."""

    name = "local"

    enabled = Bool(True, config=True, help="Offer this machine as a target.")
    hardware = Unicode(
        "", config=True,
        help="Hardware label shown in the kernel picker; empty: detected (GPUs, else CPUs).",
    )
    state_dir = Unicode(
        DEFAULT_STATE_DIR, config=True,
        help="The local agent's state directory (its socket path must stay under 108 bytes).",
    )

    def targets(self) -> list[Target]:
        if not self.enabled:
            return []
        return [Target(
            name="local", provider=self.name, where="this machine",
            hardware=self.hardware or detect_hardware(), python=sys.executable,
        )]

    async def open_machine(self, target: Target, steps: LaunchSteps) -> Machine:
        state_dir = Path(self.state_dir).expanduser()
        with steps.step("prepare host"):
            client = await start_local_agent(state_dir, progress=steps.note, log=self.log,
                                             idle_exit=self.agent_idle_exit)
        return LocalMachine(target, state_dir, client, self.log, self.agent_idle_exit)
