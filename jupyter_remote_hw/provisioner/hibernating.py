"""Hibernating a provisioner's kernel and waking it, under the same kernel id.

Hibernating saves the kernel's state into the process's
:class:`~..hibernation.HibernationStore` (see :mod:`..hibernation`), then stops
the kernel on its host and lets the machine go when it runs no other kernel.
The kernel's relay (:class:`~..agent_client.relay.KernelRelayClient`) stays,
with its ports: while the kernel hibernates it answers what it can itself
(kernel info, completions...) and holds the rest. Jupyter still lists the
kernel, alive, under its id.

The next cell (or an explicit wake) starts a new kernel on the same target
with the same key, points the relay at it, restores the state, and only then
hands the held requests over, the waiting cell first. A failure on the way
leaves the saved state as it was and the kernel hibernated: the waiting cell
gets an error saying what failed, and the next cell tries again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.manager import KernelManager

from ..agent_client import AgentError, AgentUnavailableError
from ..agent_client.relay import KernelRelayClient
from ..errors import UserError
from ..hibernation import (
    HibernationStore,
    Policy,
    Progress,
    RestoreSummary,
    SaveSummary,
    restore,
    save,
)
from ..hibernation.far import FarPlace
from ..hibernation.restore import wake_notice
from ..hibernation.store import size_text
from ..machines.manager import target_label
from ..transport import TransportError
from .asleep import sleeping_relay
from .far_state import access_for, delete_state, drop_base, keep_as_base, place_for, warm_state
from .kernel_context import KernelContext
from .kernel_end import end_reason, restart_refusal
from .moving import Place, check_wake_target, is_on, move, move_back
from .operations import HIBERNATION, RESTART, SHUTDOWN, WAKE
from .run_by_others import RunByOthers
from .wake_steps import (
    Relaunch,
    deleted_state,
    launch_waiting_for_host,
    restore_progress,
    wake_failure,
)

#: Seconds a kernel that reads as busy may take to be idle before a hibernation is
#: refused as one of a running cell (a request of the server's own is that short).
BUSY_GRACE = 2.0


class HibernationStateError(UserError):
    """A hibernation or a wake that cannot be done now (the message says why)."""


class WakeError(UserError):
    """A hibernated kernel could not be woken; its saved state is intact."""


class KernelHibernation:
    """Hibernates one provisioner's kernel and wakes it. Where the kernel runs it reports
    to the provisioner's :class:`~.kernel_run.KernelRun`; it assigns nothing of the
    provisioner's.

    Args:
        provisioner: The provisioner whose kernel it is.
        run_by_others: The kernel's mark (a save keeps it; a wake restores with it).
        relaunch: How a wake starts the kernel's process again.
    """

    def __init__(
        self, provisioner: KernelContext, run_by_others: RunByOthers, relaunch: Relaunch
    ) -> None:
        self.p = provisioner
        self.run_by_others = run_by_others
        self.relaunch = relaunch
        #: The kernel's relay while it hibernates (None while it runs).
        self.relay: KernelRelayClient | None = None
        #: What the ledger keeps of the hibernation: ``bytes``, ``saved_at``,
        #: ``left_out``, ``kernel_info``; None while the kernel runs.
        self.state: dict[str, Any] | None = None
        #: Why the last wake failed, or None.
        self.wake_error: str | None = None
        #: Set when the kernel is being shut down: it then counts as ended.
        self.stopping = False
        self._saving: asyncio.Future[SaveSummary] | None = None
        self._settling = False  # saved; the kernel and its machine are being let go
        self._wake_pending = False
        self._waking: asyncio.Task[RestoreSummary] | None = None
        #: The target whose host could not be told to stop the kernel (a link cut as a
        #: wake failed): the next wake replaces that kernel, a shutdown stops it.
        self.left_on: str | None = None
        #: Where the state of its last hibernation stays, once it woke, as the base of
        #: its next save (removed when the kernel is shut down); None: nowhere.
        self.base: FarPlace | None = None

    @property
    def hibernated(self) -> bool:
        """Whether the kernel hibernates now (also while it is being woken)."""
        return self.relay is not None

    @property
    def waking(self) -> bool:
        """Whether a wake is under way."""
        return self._waking is not None and not self._waking.done()

    @property
    def store(self) -> HibernationStore:
        """The process's store of hibernated state."""
        return self.p.manager.hibernation_store

    def _kernel_manager(self) -> KernelManager:
        """The kernel's own manager, through which the save and the restore reach it.

        Raises:
            HibernationStateError: The kernel has none (a provisioner used alone).
        """
        manager = self.p.parent
        if not isinstance(manager, KernelManager):
            raise HibernationStateError(f"{self.p.named} has no kernel manager")
        return manager

    def summary(self) -> dict[str, Any] | None:
        """The hibernation as the ledger and the machines listing show it, or None."""
        if self.state is None:
            return None
        return {**self.state, "waking": self.waking, "wake_error": self.wake_error}

    # ------------------------------------------------------------------ hibernate

    async def hibernate(self, policy: Policy, progress: Progress | None) -> SaveSummary:
        """Save the kernel's state, stop it, and keep its ports answering.

        Raises:
            HibernationStateError: The kernel cannot hibernate now (not running,
                running a cell, already hibernated, a machine without relays, a cell
                run while it was being saved: it then runs on).
            SaveError: The save failed (``UnsavableStateError`` under ``refuse``,
                ``StoreFullError``): the kernel runs on as it was.
        """
        p = self.p
        machine = p.run.machine
        if self.hibernated and not self.waking:
            raise HibernationStateError(f"{p.named} is already hibernated")
        p.operations.refuse_if_busy(HIBERNATION)
        if p.run.host_connection is None or machine is None:
            raise HibernationStateError(f"{p.named} is not running")
        if refusal := restart_refusal(p):
            raise HibernationStateError(f"{p.named} is dead: {refusal}")
        if not await _idle_within(p, BUSY_GRACE):
            raise HibernationStateError(
                f"{p.named} is running a cell: it can hibernate once the cell ends"
            )
        relay = machine.relay(p.kernel_id)
        if relay is None:
            raise HibernationStateError(
                f"{p.named} cannot hibernate: its ports are the kernel's own, "
                "with no relay to keep them while it is away"
            )
        relay.hold(self._wake_requested)
        self._saving = asyncio.ensure_future(
            save(
                self._kernel_manager(), p.kernel_id, self.store, policy, progress, far=place_for(p)
            )
        )
        p.operations.begin(HIBERNATION, self._saving)
        try:
            summary = await self._saving
        except BaseException as exc:
            if not (ended := end_reason(p)):
                await relay.release()  # else its relay answers for the dead kernel
            p.operations.end(HIBERNATION)
            current = asyncio.current_task()
            cancelled = isinstance(exc, asyncio.CancelledError)  # by a cell, a stop, a death
            if cancelled and current is not None and current.cancelling():
                raise
            if ended and (cancelled or isinstance(exc, Exception)):
                raise HibernationStateError(f"{p.named} died during its save: {ended}")
            if not cancelled:
                raise
            why = p.operations.ended("its state was being saved") or (
                "a cell was run while its state was being saved, so it keeps running"
            )
            raise HibernationStateError(f"{p.named} was not hibernated: {why}") from None
        finally:
            self._saving = None
        self.base = None  # the save took what it kept from there, and removed it
        self._settling = True
        try:
            await relay.sleep()
            self.relay = relay
            self.wake_error = None
            self.state = {
                "bytes": summary.entry.nbytes,
                "kept_on": (summary.entry.far or {}).get("label"),
                "saved_at": time.time(),
                "left_out": summary.left_out,
                "kernel_info": (relay.kernel_info or b"").decode(errors="replace") or None,
                "run_by_others": await self.run_by_others.ask(unknown_marks=True),
            }
            await self._record()
            await self._stop_remote()
            await self._let_machine_go()
        finally:
            self._settling = False
            p.operations.end(HIBERNATION)
        if self._wake_pending:  # a cell came while the kernel was being let go
            self._wake_pending = False
            self._wake_requested()
        p.log.info(
            "kernel %s hibernated: %s saved, %d left out, in %.1f s",
            p.kernel_id,
            size_text(summary.entry.nbytes),
            len(summary.left_out),
            summary.seconds,
        )
        return summary

    def _wake_requested(self) -> None:
        """A client sent what needs the kernel: cancel a save under way, or wake it (once
        the kernel and its machine are let go, when that is under way); not while it is
        restarted or shut down: its requests wait for the new kernel, or end with it."""
        if self.p.operations.running in (RESTART, SHUTDOWN):
            return
        if self._settling:
            self._wake_pending = True
            return
        if self._saving is not None and not self._saving.done():
            self.p.log.info(
                "kernel %s: a cell was run while it was being saved: not hibernating",
                self.p.kernel_id,
            )
            self._saving.cancel()
            return
        if self.hibernated and not self.waking:
            task = asyncio.ensure_future(self.wake())
            task.add_done_callback(self._woken)

    def _woken(self, task: asyncio.Future[RestoreSummary | None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.p.log.debug("kernel %s: wake failed: %s", self.p.kernel_id, task.exception())

    async def _stop_remote(self) -> None:
        """Shut the kernel down on its host (best effort: its agent ends it otherwise)."""
        p = self.p
        # First: a poll (jupyter_client's restarter) while it stops must not take the
        # kernel for dead, and restart it behind the hibernation's back.
        p.run.stopped()
        try:
            await p.agent_call("shutdown_kernel", now=True)
            self.left_on = None
        except (AgentError, AgentUnavailableError, TimeoutError, TransportError) as exc:
            self.left_on = p.target
            p.log.warning(
                "kernel %s: stopping it on %s failed (%s); it is stopped when the kernel "
                "wakes or is shut down, or by its agent once no one holds it",
                p.kernel_id,
                p.target,
                exc,
            )

    async def _let_machine_go(self) -> None:
        """Take the relay out of the machine (it keeps answering on the kernel's ports, the
        heartbeat included) and release the machine when it runs no other kernel."""
        p, relay = self.p, self.relay
        machine = p.run.released()
        if machine is not None:
            await machine.detach(p.kernel_id)
        if relay is not None:
            await relay.echo_heartbeats(int(p.run.local_ports.get("hb_port", 0)))
        if machine is not None and await p.manager.release_if_idle(machine.target.name):
            provider = p.manager.providers.get(machine.target.provider)
            done = await provider.after_hibernation(machine.target) if provider else None
            if done:
                p.log.info("kernel %s hibernated; %s", p.kernel_id, done)

    async def _record(self) -> None:
        """Write the kernel's row in the ledger, with its hibernation."""
        p = self.p
        name = str(getattr(p.parent, "kernel_name", "") or p.resolved_target().kernel_name)
        p.manager.ledger.put_kernel(
            p.kernel_id, name, p.target, await p.get_provisioner_info(), owner=p.owner
        )

    # ------------------------------------------------------------------ wake

    async def wake(
        self, progress: Progress | None = None, target: str | None = None
    ) -> RestoreSummary | None:
        """Start a kernel on the same target (or on ``target``, which then becomes the
        kernel's), restore the state, then release what clients sent meanwhile; one wake
        at a time (a second caller waits for the first).

        Returns:
            What was restored, or None when the kernel was not hibernated.

        Raises:
            WakeError: A step failed: the kernel still hibernates on its target with its
                state intact, and the waiting cell was told; the next cell tries again.
            HibernationStateError: ``target`` is another than the one a wake under way
                or a running kernel is on.
            MoveError, UnknownHardwareError: The kernel cannot wake on ``target``.
        """
        moving = target is not None and not is_on(self.p, target)
        if moving and (not self.hibernated or self.waking):
            doing = "being woken" if self.hibernated else "running"
            raise HibernationStateError(
                f"{self.p.named} is {doing}, so it cannot wake on "
                f"{target_label(self.p.manager, str(target))}: switch its hardware instead"
            )
        self.p.operations.refuse_if_busy(WAKE)  # a wake under way is joined
        if not self.hibernated:
            return None
        if self._waking is None or self._waking.done():
            moved_from = None
            if target is not None and moving:
                moved_from = move(self.p, check_wake_target(self.p, target))
            self._waking = asyncio.ensure_future(self._wake(progress, moved_from))
            self.p.operations.begin(WAKE, self._waking)
            self._waking.add_done_callback(lambda _: self.p.operations.end(WAKE))
            self.p.manager.launches[self.p.kernel_id] = (
                self._waking,
                asyncio.get_running_loop(),
            )
        task = self._waking
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self.p.manager.launches.get(self.p.kernel_id, (None,))[0] is task:
                del self.p.manager.launches[self.p.kernel_id]

    async def _wake(self, progress: Progress | None, moved_from: Place | None) -> RestoreSummary:
        p, relay = self.p, self.relay
        assert relay is not None
        deleted = await deleted_state(self.store, p.kernel_id)
        if deleted is not None:  # no wake can succeed: say so at once, launch nothing
            if moved_from is not None:
                move_back(p, moved_from)
            self.wake_error = deleted
            p.log.warning("kernel %s cannot be woken: %s", p.kernel_id, deleted)
            await relay.refuse_held(deleted, retry=False)
            await self._record()
            raise WakeError(f"{p.named} cannot be woken: {deleted}")
        steps = p.manager.steps(p.target, p.kernel_id)
        p.run.launching(steps)
        # The disk reads the saved files while the hardware comes up: the restore then
        # finds them in memory.
        warming = asyncio.ensure_future(warm_state(p))
        try:
            async with asyncio.timeout(p.launch_timeout):
                await launch_waiting_for_host(p, steps, self.relaunch)
                with steps.step("restore state"):
                    summary = await restore(
                        self._kernel_manager(),
                        p.kernel_id,
                        self.store,
                        p.kernel_id,
                        None,  # tensors back on their devices where it has them, also
                        # on another target (moved_from); else on the CPU, with a note
                        restore_progress(steps, progress),
                        access_for(p),
                        restricted=self.run_by_others.restriction(),
                    )
        except BaseException as exc:
            reason = wake_failure(exc, steps, p.operations.ended("it was being woken"))
            self.wake_error = reason
            p.log.warning("kernel %s could not be woken: %s", p.kernel_id, reason)
            if moved_from is not None:  # it still hibernates where it was
                move_back(p, moved_from)
            await self._back_to_sleep()
            await relay.refuse_held(reason)
            await self._record()
            if isinstance(exc, asyncio.CancelledError):
                if not p.operations.ended_by:
                    raise
                raise HibernationStateError(f"{p.named} was not woken: {reason}") from None
            raise WakeError(
                f"{p.named} could not be woken: {reason}. Its saved state is "
                "kept and it still hibernates; run a cell or wake it to try again."
            ) from exc
        finally:
            warming.cancel()  # done by now, unless the restore read faster
        for note in summary.notes:
            steps.note(note)
        # While its clients are held (its own request): the saved state stays, where the
        # kernel reads it, as the base of its next save.
        self.base = await keep_as_base(p)
        # Awake before the held cell goes: once it is answered, no wake is left to refuse.
        self.relay, self.state, self.wake_error = None, None, None
        await self._record()
        await relay.release(wake_notice(summary))  # shown in the cell that woke it
        steps.log.info(
            "kernel %s woke on %s: %s; %s restored in %.1f s",
            p.kernel_id,
            p.target,
            steps.summary(),
            size_text(summary.total_bytes),
            summary.seconds,
        )
        return summary

    async def _back_to_sleep(self) -> None:
        """After a failed wake: stop what was started, keep the relay answering."""
        p, relay = self.p, self.relay
        assert relay is not None
        await relay.sleep()
        if p.run.host_connection is not None or p.run.machine is not None:  # even unconfirmed
            await self._stop_remote()
        await self._let_machine_go()

    # ------------------------------------------------------------------ reattach, shutdown

    async def resume_asleep(self, info: dict[str, Any]) -> KernelConnectionInfo:
        """Take over a kernel that hibernated under an earlier server: its relay is made
        again on its old local ports, asleep, with a new key (the old one was never
        written down), answering as before; the next cell wakes it.

        Raises:
            HibernationStateError: Its saved state is gone from the store.
        """
        p = self.p
        if not any(e.entry_id == p.kernel_id for e in await asyncio.to_thread(self.store.entries)):
            raise HibernationStateError(
                f"{p.named} hibernated, but its saved state is not in {self.store.path} any more"
            )
        kernel_info = info.get("kernel_info")
        self.relay, ports, connection_info = await sleeping_relay(
            p.kernel_id,
            p.run.local_ports,
            kernel_info if isinstance(kernel_info, str) else None,
            self._wake_requested,
            p.log,
        )
        p.run.asleep(ports, connection_info)  # asleep, it answers as an idle kernel
        self.state = dict(info)
        p.log.info("kernel %s: taken over hibernated (its state waits in the store)", p.kernel_id)
        return connection_info

    async def discard(self) -> None:
        """The kernel is shut down, or restarted afresh, while hibernated: delete its saved
        state and close its relay."""
        relay, self.relay, self.state = self.relay, None, None
        if relay is not None:
            await relay.close()
        try:
            await delete_state(self.p, running=False)
        except (OSError, KeyError) as exc:
            self.p.log.warning(
                "kernel %s: its saved state was not deleted: %s", self.p.kernel_id, exc
            )
        left_on, self.left_on = self.left_on, None
        if left_on is not None:
            await self._stop_left(left_on)

    async def _stop_left(self, target: str) -> None:
        """Stop the kernel that a failed stop left on ``target``'s host (a link cut as a
        wake failed), when this side still holds that machine; else its agent ends it
        once no one holds it."""
        p = self.p
        machine = p.manager.cached(target)
        if machine is None:
            return
        try:
            async with asyncio.timeout(3 * p.poll_timeout):
                client = await machine.agent()
                await client.call("shutdown_kernel", None, kernel_id=p.kernel_id, now=True)
        except (AgentError, AgentUnavailableError, TimeoutError, TransportError) as exc:
            p.log.info("kernel %s: not stopped on %s: %s", p.kernel_id, target, exc)
        await p.manager.release_if_idle(target)

    async def ended_awake(self) -> None:
        """The kernel was shut down awake: remove the base its last wake kept."""
        base, self.base = self.base, None
        if base is not None:
            await drop_base(self.p, base)

    async def leave_for_next_server(self) -> None:
        """The Jupyter server stops while the kernel hibernates: close its relay and keep
        its saved state and its ledger row, so that the next server takes it over."""
        relay, self.relay = self.relay, None
        if relay is not None:
            await relay.close()
        self.p.log.info(
            "kernel %s: left hibernated for the next server (its state stays in %s)",
            self.p.kernel_id,
            self.store.path,
        )

    async def restarted(self) -> None:
        """A hibernated kernel was restarted: the fresh kernel has its relay, and the saved
        state is dropped (a restart starts afresh)."""
        relay, self.relay, self.state, self.stopping = self.relay, None, None, False
        if relay is not None:
            await relay.release()
        await delete_state(self.p, running=False)
        await self._record()


async def _idle_within(p: KernelContext, seconds: float) -> bool:
    """Whether the kernel is idle, or becomes idle within ``seconds``: a request of the
    server's own (a variables listing, kernel info for a new websocket) reads as busy
    for a moment, and must not refuse a hibernation as a user's running cell does."""
    deadline = time.monotonic() + seconds
    while getattr(p.parent, "execution_state", None) == "busy":
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


__all__ = ["HibernationStateError", "KernelHibernation", "WakeError"]
