"""What each op of the agent protocol does: its arguments checked, then handed to the
kernel manager, the hardware and metrics readers, the lifetime watch or the shares.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
import platform
import signal
import socket
import sys
from typing import Any

from . import AGENT_VERSION
from .hardware import HardwareReporter
from .kernel_start import DEFAULT_START_TIMEOUT
from .kernels import STATE_WAIT, KernelManager
from .lifetime import LifetimeWatch
from .metrics import MetricsSampler
from .modules import find_modules
from .nodes import NodeReadings
from .paths import StatePaths
from .protocol import (
    BAD_REQUEST,
    AgentError,
    arg_bool,
    arg_dict,
    arg_duration,
    arg_number,
    arg_seconds,
    arg_str,
    arg_str_dict,
    arg_str_list,
)
from .relay import KernelRelays
from .shares import ShareRelays

log = logging.getLogger(__name__)


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):  # no name for this uid
        return str(os.getuid())


class AgentOperations:
    """The op handlers of :class:`.server.AgentServer`, by op name in its ``_handlers``."""

    paths: StatePaths
    kernels: KernelManager
    hardware: HardwareReporter
    metrics: MetricsSampler
    nodes: NodeReadings
    lifetime: LifetimeWatch
    shares: ShareRelays
    relays: KernelRelays

    async def _hello(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "version": AGENT_VERSION,
            "pid": os.getpid(),
            "python": sys.executable,
            "python_version": platform.python_version(),
            "hostname": socket.gethostname(),
            "user": _current_user(),
            "state_dir": self.paths.root,
        }

    async def _hardware(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self.hardware.report(
            python=arg_str(args, "hardware", "python"),
            refresh=arg_bool(args, "hardware", "refresh", False),
        )

    async def _metrics(self, args: dict[str, Any]) -> dict[str, Any]:
        kernel_id = arg_str(args, "metrics", "kernel_id")
        pid = self.kernels.get(kernel_id).pid if kernel_id is not None else None
        reading: dict[str, Any]
        reading, others = await asyncio.gather(
            self.metrics.sample(pid or None), self.nodes.others()
        )
        if others:  # an allocation of several nodes: each node's use, this one first
            here = {k: reading[k] for k in ("time", "cpu", "load", "memory", "gpus", "warnings")}
            reading["nodes"] = [{"node": self.nodes.node, **here}, *others]
        return reading

    async def _find_modules(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "find_modules"
        return await find_modules(
            arg_str_list(args, op, "modules") or [], arg_str(args, op, "python")
        )

    async def _start_kernel(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "start_kernel"
        kernel_id = arg_str(args, op, "kernel_id")
        replace = arg_bool(args, op, "replace", False)
        if replace and kernel_id is not None and kernel_id in self.kernels.kernels:
            # Its caller knows no kernel of this id runs: this one is what a start cut
            # off before it was confirmed left behind (a wake whose server died, or
            # whose link was cut).
            log.warning("kernel %s: replacing the kernel left running under its id", kernel_id)
            await self._shutdown_kernel({"kernel_id": kernel_id, "now": True})  # relay too
        return await self.kernels.start(
            kernel_id=kernel_id,
            argv=arg_str_list(args, op, "argv"),
            env=arg_str_dict(args, op, "env"),
            cwd=arg_str(args, op, "cwd"),
            timeout=arg_seconds(args, op, "timeout", DEFAULT_START_TIMEOUT),
            cwd_fallback=arg_str(args, op, "cwd_fallback"),
            inherit_env=arg_bool(args, op, "inherit_env", True),
            owner=arg_dict(args, op, "owner"),
            orphan_grace=arg_duration(args, op, "orphan_grace", 0.0),
            key=arg_str(args, op, "key"),
        )

    async def _restart_kernel(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "restart_kernel"
        return await self.kernels.restart(
            arg_str(args, op, "kernel_id", required=True),
            timeout=arg_seconds(args, op, "timeout", DEFAULT_START_TIMEOUT),
            now=arg_bool(args, op, "now", False),
            stopped=self.relays.new_process,  # what was queued for the old one is void
        )

    async def _interrupt_kernel(self, args: dict[str, Any]) -> dict[str, Any]:
        self.kernels.interrupt(arg_str(args, "interrupt_kernel", "kernel_id", required=True))
        return {}

    async def _signal_kernel(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "signal_kernel"
        name = arg_str(args, op, "signal", required=True)
        signum = getattr(signal, str(name), None) if str(name).startswith("SIG") else None
        if not isinstance(signum, int):
            raise AgentError(
                BAD_REQUEST, f"{op}: unknown signal {name!r}; name one such as SIGTERM or SIGKILL"
            )
        self.kernels.signal(arg_str(args, op, "kernel_id", required=True), signum)
        return {}

    async def _shutdown_kernel(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "shutdown_kernel"
        kernel_id = arg_str(args, op, "kernel_id", required=True)
        result = await self.kernels.shutdown(kernel_id, now=arg_bool(args, op, "now", False))
        await self.shares.drop_kernel(str(kernel_id))  # its shares end with it
        await self.relays.drop(str(kernel_id))  # and its relay, with what it kept
        return result

    async def _kernel_status(self, args: dict[str, Any]) -> dict[str, Any]:
        kernel_id = arg_str(args, "kernel_status", "kernel_id", required=True)
        kernel = self.kernels.get(kernel_id)
        await self._state_known([kernel.state_known])
        return {
            **kernel.status(),
            "others_can_run_code": self.shares.others_can_run_code(str(kernel_id)),
        }

    async def _list_kernels(self, args: dict[str, Any]) -> dict[str, Any]:
        await self._state_known([k.state_known for k in list(self.kernels.kernels.values())])
        return {
            "kernels": [
                {
                    **status,
                    "others_can_run_code": self.shares.others_can_run_code(
                        str(status["kernel_id"])
                    ),
                }
                for status in self.kernels.list_status()
            ]
        }

    @staticmethod
    async def _state_known(events: list[asyncio.Event]) -> None:
        """Wait a little for re-adopted kernels to be found idle or busy."""
        waiting = [asyncio.ensure_future(e.wait()) for e in events if not e.is_set()]
        if waiting:
            await asyncio.wait(waiting, timeout=STATE_WAIT)
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)

    async def _heartbeat(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"deadman_in": self.lifetime.status()["deadman_in"]}

    async def _set_lifetime(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.lifetime.configure(args)

    async def _lifetime(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.lifetime.status()

    def _kernel_channel(self, kernel_id: str, channel: str) -> dict[str, Any]:
        connection = self.kernels.get(kernel_id).connection
        if channel not in connection:
            raise AgentError(BAD_REQUEST, f"kernel {kernel_id} has no channel {channel!r}")
        return connection

    async def _add_share(self, args: dict[str, Any]) -> dict[str, Any]:
        op = "add_share"
        channels = arg_str_list(args, op, "channels")
        if channels is None:
            raise AgentError(BAD_REQUEST, f"{op} needs the list argument 'channels'")
        return await self.shares.add(
            share_id=str(arg_str(args, op, "share_id", required=True)),
            kernel_id=str(arg_str(args, op, "kernel_id", required=True)),
            channels=channels,
            public_key=str(arg_str(args, op, "public_key", required=True)),
            expires=arg_number(args, op, "expires"),
            authorized_keys=arg_str(args, op, "authorized_keys") or "~/.ssh/authorized_keys",
        )

    async def _drop_share(self, args: dict[str, Any]) -> dict[str, Any]:
        return await self.shares.drop(str(arg_str(args, "drop_share", "share_id", required=True)))

    async def _list_shares(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"shares": self.shares.list()}

    async def _shutdown_agent(self, args: dict[str, Any]) -> dict[str, Any]:
        arg_bool(args, "shutdown_agent", "kill_kernels", True)  # validate before answering
        if arg_bool(args, "shutdown_agent", "if_idle", False) and self.kernels.busy():
            return {"stopping": False}
        return {"stopping": True}
