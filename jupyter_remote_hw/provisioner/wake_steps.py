"""The steps of a wake that stand apart from the kernel's hibernation state: starting the
kernel's process again while its host cannot be reached, telling the restore's
progress, and saying in words why a wake failed or cannot be done."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from ..agent_client import AgentUnavailableError
from ..errors import causes, one_line
from ..hibernation import HibernationStore, Progress
from ..hibernation.errors import EntryNotFoundError
from ..hibernation.store import size_text
from ..machines.manager import target_label
from ..providers.launch_steps import LaunchError, LaunchSteps
from ..transport import AuthenticationError, HostKeyError, TransportError
from .kernel_context import KernelContext

#: How a wake starts the kernel's process again: the launch's own path
#: (:meth:`.launching.KernelLauncher.launch`), with its steps, arguments and timeout.
Relaunch = Callable[[LaunchSteps, dict[str, Any], float], Awaitable[KernelConnectionInfo]]

#: Seconds between two progress notes of a restore's bytes on the launch steps.
PROGRESS_EVERY = 0.5

#: Seconds a wake leaves for the steps after connecting, of the launch's time.
WAKE_AFTER_CONNECT = 30.0


def host_unreachable(exc: BaseException) -> bool:
    """Whether a launch failed because the host or its agent could not be reached (a
    link that dropped, before or while the kernel started), not on the host's key, the
    login, or anything the host said: a wake then tries again."""
    found = list(causes(exc))
    if any(isinstance(c, HostKeyError | AuthenticationError) for c in found):
        return False
    return any(isinstance(c, TransportError | AgentUnavailableError) for c in found)


async def launch_waiting_for_host(p: KernelContext, steps: LaunchSteps, relaunch: Relaunch) -> None:
    """Start the woken kernel's process; while its host cannot be reached (a link that
    dropped, a host rebooting), try again with backoff, saying so in the progress, for
    up to the launch's time less :data:`WAKE_AFTER_CONNECT`. The state is safe meanwhile,
    and the cell that woke the kernel waits as it would for a running kernel."""
    began = time.monotonic()

    def say(state: RetryCallState) -> None:
        waited = time.monotonic() - began
        where = target_label(p.manager, p.target)
        steps.note(f"{where} cannot be reached; trying again ({waited:.0f} s so far)")

    async for attempt in AsyncRetrying(
        retry=retry_if_exception(host_unreachable),
        wait=wait_exponential(multiplier=0.5, max=5.0),
        stop=stop_after_delay(max(0.0, p.launch_timeout - WAKE_AFTER_CONNECT)),
        before_sleep=say,
        reraise=True,
    ):
        with attempt:
            await relaunch(steps, dict(p.launch_kwargs), p.launch_timeout)


def wake_failure(exc: BaseException, steps: LaunchSteps, ended: str | None) -> str:
    """Why a wake failed, in words (``ended``: how a restart or a shutdown ended it)."""
    if isinstance(exc, asyncio.CancelledError):
        return ended or "the wake was cancelled"
    if isinstance(exc, LaunchError):
        detail = str(exc.__cause__) if exc.__cause__ is not None else exc.reason
        return f"step '{exc.step}' failed: {one_line(detail).rstrip('.')}"
    if isinstance(exc, TimeoutError):
        return f"it took longer than {steps.elapsed:.0f} s (c.RemoteHWProvisioner.launch_timeout)"
    return one_line(str(exc)).rstrip(".") or type(exc).__name__  # a sentence follows


def restore_progress(steps: LaunchSteps, progress: Progress | None) -> Progress:
    """Report a restore's steps, bytes and rate on the launch steps (every
    :data:`PROGRESS_EVERY` seconds at most) and to ``progress``."""
    last: dict[str, Any] = {"step": None, "at": 0.0, "began": 0.0, "start": None}

    def report(step: str, done: int, total: int) -> None:
        if progress is not None:
            progress(step, done, total)
        now = time.monotonic()
        if last["start"] is None:
            last["start"] = now
        if step != last["step"]:
            last["began"] = now
        elif now - last["at"] < PROGRESS_EVERY and done < total:
            return
        last.update(step=step, at=now)
        if not total:
            steps.note(step)
            return
        # A step's own rate; a step reported once (the closing "restored", after a
        # kernel read its state on its own disk) the whole restore's.
        took = now - last["began"] if now - last["began"] > 0.05 else now - last["start"]
        rate = f" · {size_text(done / took)}/s" if done and took > 0.05 else ""
        steps.note(f"{step}: {size_text(done)} of {size_text(total)}{rate}")

    return report


async def deleted_state(store: HibernationStore, kernel_id: str) -> str | None:
    """Why a kernel cannot wake when its saved state was deleted from ``store`` while it
    hibernated (``jupyter remote-hw hibernated --delete``); else None."""
    try:
        await asyncio.to_thread(store.entry, kernel_id)
    except EntryNotFoundError:
        return (
            f"its saved state was deleted from {store.path} (jupyter remote-hw hibernated "
            "--delete); restart the kernel to run cells in a fresh one, or start a new kernel"
        )
    except (OSError, ValueError):
        return None  # the restore says what is wrong with it
    return None


__all__ = [
    "PROGRESS_EVERY",
    "WAKE_AFTER_CONNECT",
    "Relaunch",
    "deleted_state",
    "host_unreachable",
    "launch_waiting_for_host",
    "restore_progress",
    "wake_failure",
]
