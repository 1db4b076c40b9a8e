"""Lifetime of the host, enforced by the agent: idle stop and the dead-man switch.

- Idle stop: when no kernel has been busy for ``idle_stop`` seconds (a running
  cell keeps its kernel busy, so it is activity however long it runs), the
  agent runs the stop command.
- Dead-man switch: when no client has sent a request (a heartbeat) for
  ``deadman`` seconds, the agent runs the stop command, even while kernels run.

The stop command is a shell-free argv (on a cloud machine ``sudo shutdown -h now``,
which stops or terminates the instance as its shutdown behaviour says). It runs
with ``JRHW_STOP_REASON`` set to ``idle`` or ``deadman``. The policy is kept in
``<state>/lifetime.json`` so that a replaced or restarted agent enforces it too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

from . import activity
from .connection import write_private_json
from .kernels import KernelManager
from .protocol import BAD_REQUEST, AgentError

log = logging.getLogger(__name__)

DEFAULT_STOP_COMMAND = ["sudo", "shutdown", "-h", "now"]
"""Stops the machine (the cloud instance stops or terminates, per its shutdown behaviour)."""
STOP_COMMAND_TIMEOUT = 60.0
"""Seconds the stop command may run before it is killed."""
MAX_CHECK_INTERVAL = 5.0
"""Longest wait between two checks of the timers."""


def _seconds(args: dict[str, Any], name: str) -> float:
    value = args.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise AgentError(
            BAD_REQUEST,
            f"argument '{name}' of set_lifetime must be a number of "
            "seconds, 0 or more (0 turns it off)",
        )
    return float(value)


class LifetimeWatch:
    """Watches kernel activity and client heartbeats; runs the stop command when a timer runs out.

    Args:
        path: Where the policy is kept (``<state>/lifetime.json``).
        kernels: The agent's kernels, whose activity counts.
    """

    def __init__(self, path: str, kernels: KernelManager) -> None:
        self.path = path
        self.kernels = kernels
        self.idle_stop = 0.0
        self.deadman = 0.0
        self.stop_command: list[str] = list(DEFAULT_STOP_COMMAND)
        self.fired: list[dict[str, Any]] = []
        self._activity = time.time()
        self._heartbeat = time.time()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ policy

    @property
    def enforcing(self) -> bool:
        """Whether a timer is set (the agent then stays, to enforce it)."""
        return self.idle_stop > 0 or self.deadman > 0

    def load(self) -> None:
        """Read the kept policy, if any (a broken file is logged and ignored)."""
        try:
            with open(self.path) as handle:
                data = json.load(handle)
            self._apply(data)
        except FileNotFoundError:
            return
        except (OSError, ValueError, AgentError) as exc:
            log.warning("lifetime policy %s not read: %s", self.path, exc)
            return
        log.info(
            "lifetime policy: idle stop %.0f s, dead-man %.0f s, stop command %s",
            self.idle_stop,
            self.deadman,
            self.stop_command,
        )

    def _apply(self, args: dict[str, Any]) -> None:
        idle_stop = _seconds(args, "idle_stop")
        deadman = _seconds(args, "deadman")
        command = args.get("stop_command", DEFAULT_STOP_COMMAND)
        if command is None:
            command = DEFAULT_STOP_COMMAND
        if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
            raise AgentError(
                BAD_REQUEST,
                "argument 'stop_command' of set_lifetime must be a "
                "non-empty list of strings (an argv, run without a shell)",
            )
        self.idle_stop, self.deadman, self.stop_command = idle_stop, deadman, list(command)

    def configure(self, args: dict[str, Any]) -> dict[str, Any]:
        """The ``set_lifetime`` op: set, keep and start enforcing a policy; timers restart now.

        Raises:
            AgentError: ``bad_request`` for a malformed policy (the old one stays).
        """
        self._apply(args)
        write_private_json(
            self.path,
            {
                "idle_stop": self.idle_stop,
                "deadman": self.deadman,
                "stop_command": self.stop_command,
            },
        )
        now = time.time()
        self._activity = self._heartbeat = now
        self._wake.set()
        log.info(
            "lifetime policy set: idle stop %.0f s, dead-man %.0f s, stop command %s",
            self.idle_stop,
            self.deadman,
            self.stop_command,
        )
        return self.status()

    # ------------------------------------------------------------------ inputs

    def heartbeat(self) -> None:
        """A client showed it is alive (any request counts)."""
        self._heartbeat = time.time()

    def idle_for(self, now: float | None = None) -> float:
        """Seconds since a kernel was last busy; 0 while one is busy or starting."""
        now = time.time() if now is None else now
        latest = self._activity
        for kernel in list(self.kernels.kernels.values()):
            tracker = kernel.tracker
            if kernel.poll() and tracker.execution_state in (activity.BUSY, activity.STARTING):
                return 0.0
            latest = max(latest, tracker.last_activity)
        if self.kernels.busy() and not self.kernels.kernels:
            return 0.0  # a kernel is being started
        return max(0.0, now - latest)

    def status(self) -> dict[str, Any]:
        """The ``lifetime`` op's result: the policy, both timers and what fired."""
        now = time.time()
        idle = self.idle_for(now)
        silent = max(0.0, now - self._heartbeat)
        return {
            "idle_stop": self.idle_stop,
            "deadman": self.deadman,
            "stop_command": list(self.stop_command),
            "idle_for": idle,
            "heartbeat_age": silent,
            "idle_stop_in": max(0.0, self.idle_stop - idle) if self.idle_stop else None,
            "deadman_in": max(0.0, self.deadman - silent) if self.deadman else None,
            "fired": list(self.fired),
        }

    # ------------------------------------------------------------------ enforcing

    def start(self) -> None:
        """Start checking the timers in the background."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())

    async def close(self) -> None:
        """Stop checking."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            timers = [t for t in (self.idle_stop, self.deadman) if t > 0]
            interval = min([MAX_CHECK_INTERVAL] + [max(0.1, t / 10) for t in timers])
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), interval)
            except asyncio.TimeoutError:
                pass
            now = time.time()
            reason = None
            if self.idle_stop > 0 and self.idle_for(now) >= self.idle_stop:
                reason = "idle"
                detail = f"no kernel activity for {self.idle_stop:.0f} s"
            elif self.deadman > 0 and now - self._heartbeat >= self.deadman:
                reason = "deadman"
                detail = f"no client heartbeat for {self.deadman:.0f} s"
            if reason is not None:
                await self._fire(reason, detail)
                # Start both timers over: a stop command that did not stop the
                # machine is run again only after another full period.
                self._activity = self._heartbeat = time.time()

    async def _fire(self, reason: str, detail: str) -> None:
        log.warning("lifetime: %s; running %s", detail, self.stop_command)
        record: dict[str, Any] = {
            "reason": reason,
            "detail": detail,
            "time": time.time(),
            "exit_code": None,
            "error": None,
        }
        env = dict(os.environ, JRHW_STOP_REASON=reason)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.stop_command,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            try:
                _, err = await asyncio.wait_for(proc.communicate(), STOP_COMMAND_TIMEOUT)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
                err = b"timed out"
            record["exit_code"] = proc.returncode
            if proc.returncode:
                record["error"] = err.decode(errors="replace").strip()[-500:]
                log.error(
                    "lifetime: stop command failed (%s): %s", proc.returncode, record["error"]
                )
        except OSError as exc:
            record["error"] = f"cannot run {self.stop_command[0]}: {exc}"
            log.error("lifetime: %s", record["error"])
        self.fired.append(record)
        del self.fired[:-20]
