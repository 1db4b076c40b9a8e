"""RemoteHWProvisioner: a jupyter_client kernel provisioner for hardware targets.

Each kernel runs under the host agent of its target (``local``: this machine;
``ssh``: a host reached over SSH). The provisioner asks the agent to start,
signal, restart and stop the kernel, and makes the kernel's ports reachable
on 127.0.0.1 here. What it needs to find the kernel again is kept in the
ledger, so a restarted Jupyter server reattaches to the running kernel.

Everything that talks to the machine runs on the machine manager's home loop
(see :mod:`..machines`), whichever loop jupyter_client calls from: the
synchronous ``KernelManager`` runs a loop only during each of its calls, and
the kernel's SSH forwards must keep running in between.
"""

from __future__ import annotations

import asyncio
import functools
import signal
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, cast

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase
from traitlets import Float, Unicode

from ..agent_client import AgentError, AgentUnavailableError
from ..hibernation import Policy, Progress, RestoreSummary, SaveSummary
from ..hibernation.far import FarPlace
from ..ledger.store import SERVER_OWNER
from ..machines.manager import MachineManager, server_config, target_label
from ..providers import Target
from ..providers.base import PORT_NAMES
from ..providers.launch_steps import LaunchError, LaunchSteps
from ..transport import TransportError
from .errors import KernelLaunchError
from .hibernating import KernelHibernation
from .kernel_end import report_end
from .kernel_run import KernelRun
from .launching import KernelLauncher, keep_ports, listable
from .operations import HIBERNATION, RESTART, SHUTDOWN, WAKE, KernelOperations
from .run_by_others import RunByOthers

#: Version of what get_provisioner_info returns.
INFO_VERSION = 1

P = ParamSpec("P")
R = TypeVar("R")


def on_home_loop(
    method: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """Run a provisioner method's coroutine on the machine manager's home loop."""

    @functools.wraps(method)
    async def on_home(*args: P.args, **kwargs: P.kwargs) -> R:
        provisioner = cast(RemoteHWProvisioner, args[0])
        return await provisioner.manager.on_home(method(*args, **kwargs))

    return on_home


class RemoteHWProvisioner(KernelProvisionerBase):
    """Starts and drives a kernel through the agent of its hardware target.

    Selected by a kernelspec's metadata::

        "kernel_provisioner": {"provisioner_name": "remote-hw",
                               "config": {"target": "ssh-gpu-box"}}
    """

    target = Unicode(
        "",
        config=True,
        help="Name of the hardware target the kernel runs on (set by the "
        "kernelspec's provisioner config).",
    )
    owner = Unicode(
        SERVER_OWNER,
        config=True,
        help="Who the kernel belongs to in the ledger; only kernels of the server are "
        "reattached when a Jupyter server starts (``%%remote`` sets its own).",
    )
    launch_timeout = Float(
        180.0,
        config=True,
        help="Seconds a launch may take, from connecting to the host to the kernel answering.",
    )
    orphan_grace = Float(
        600.0,
        min=0.0,
        config=True,
        help="Seconds a kernel whose starting process died (a killed Jupyter server, "
        "%%remote kernel or `jupyter run`) keeps running on its host, for a Jupyter server "
        "to reattach it; its agent then shuts it down. 0: it runs until shut down.",
    )
    poll_timeout = Float(
        5.0,
        config=True,
        help="Seconds a liveness check waits for the host; a host that does not answer in "
        "time (or whose link is down) is taken to still run the kernel.",
    )

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._resolved: Target | None = None
        self._steps: LaunchSteps | None = None
        self.run = KernelRun()
        """Where the kernel runs and how it is reached (see :mod:`.kernel_run`)."""
        self.launch_kwargs: dict[str, Any] = {}
        """The arguments of the last launch; a wake from hibernation launches with them."""
        self.operations = KernelOperations(lambda: self.named)
        """The operation under way on the kernel: one at a time (see :mod:`.operations`)."""
        self.run_by_others = RunByOthers(self)
        """Whether someone else could run code in the kernel (see :mod:`.run_by_others`)."""
        self.hibernation = KernelHibernation(
            self, self.run_by_others, lambda *launch: self.launcher.launch(*launch)
        )
        """Hibernates the kernel and wakes it (see :mod:`.hibernating`)."""
        self.launcher = KernelLauncher(self, self.hibernation)
        """Starts, restarts and adopts the kernel on its machine (see :mod:`.launching`)."""
        self.hibernate_after: float | None = None
        """Seconds idle before the kernel hibernates, as its notebook asked (0: never);
        None: its target's ``hibernate_after``. Kept in the ledger with the kernel."""
        self.dead: str | None = None
        """Why the kernel is dead, once its machine ended under it (see :mod:`.kernel_end`)."""

    # ------------------------------------------------------------------ where it runs

    @property
    def connection_info(self) -> KernelConnectionInfo:
        """What clients here connect to (jupyter_client's; its base class sets it too)."""
        return self.run.connection_info

    @connection_info.setter
    def connection_info(self, info: KernelConnectionInfo) -> None:
        self.run.recorded(info=info)

    # ------------------------------------------------------------------ helpers

    @property
    def manager(self) -> MachineManager:
        """The process's machine manager.

        Outside a Jupyter server (``jupyter run``, nbclient, papermill) this
        provisioner creates it, from the server's configuration files
        overridden by the client's own configuration.
        """
        if not MachineManager.initialized():
            config = server_config()
            config.merge(self.config)
            MachineManager.instance(config=config)
        manager: MachineManager = MachineManager.instance()
        return manager

    def resolved_target(self) -> Target:
        """The target, resolved once (listing targets reads the SSH config files)."""
        if self._resolved is None or self._resolved.name != self.target:
            self._resolved = self.manager.target(self.target)
        return self._resolved

    @property
    def named(self) -> str:
        """The kernel as messages name it, by its machine: ``the kernel on A10G · gpu-box``."""
        return f"the kernel on {target_label(self.manager, self.target)}"

    def place_on(self, target: Target) -> None:
        """Make ``target`` the kernel's (where :meth:`..machines.manager.MachineManager.place`
        placed it)."""
        self.target, self._resolved = target.name, target

    async def agent_call(self, op: str, wait: float | None = 30.0, **args: Any) -> dict[str, Any]:
        if self.run.machine is None:
            raise AgentUnavailableError(f"{self.named} is not running")
        client = await self.run.machine.agent()
        return await client.call(op, wait, kernel_id=self.kernel_id, **args)

    @on_home_loop
    async def open_stream(self, where: int | str) -> tuple[Any, Any]:
        """Open a byte stream to a port on the kernel's host's 127.0.0.1, or to a UNIX
        socket there (its path).

        Transfers use it for their bulk streams (see ``transfer/kernel_side/bulk.py``).

        Raises:
            AgentUnavailableError: The kernel has no machine.
            NotImplementedError: Its machine cannot open streams.
        """
        if self.run.machine is None:
            raise AgentUnavailableError(f"{self.named} is not running")
        return await self.run.machine.open_stream(where)

    # ------------------------------------------------------------------ process-like API

    @property
    def has_process(self) -> bool:
        """Whether a kernel was launched (or attached) and not cleaned up; a hibernated
        kernel counts (Jupyter must neither restart it nor take it as dead)."""
        return self.run.host_connection is not None or self.hibernation.hibernated

    @on_home_loop
    async def poll(self) -> int | None:
        """None while the kernel runs; its exit code once it has ended.

        While the host cannot be reached the kernel counts as running, so a
        dropped link never triggers an automatic restart. A hibernated kernel runs
        (until it is shut down). A kernel whose machine ended is dead: the first check
        that finds it stops the restarter and says so (see :mod:`.kernel_end`), and
        answers None, so that the restarter that asked does not restart; later ones
        answer -1.
        """
        if self.operations.running == WAKE:
            return None  # the wake says whether the kernel came up; a restart would drop its state
        if self.run.host_connection is None:
            hibernation = self.hibernation
            return None if hibernation.hibernated and not hibernation.stopping else 0
        machine = self.run.machine
        ended = machine.end_reason() if machine is not None else None
        if ended:
            if self.dead is None:
                self.dead = ended
                await report_end(self, ended)
                return None  # the restarter that asked is stopped now: it must not restart
            return -1
        if machine is None or not machine.link_up:
            return None
        if self.run.fresh():
            return None  # the host has just answered that it runs
        try:
            async with asyncio.timeout(self.poll_timeout):
                status = await self.agent_call("kernel_status", wait=None)
        except AgentError as exc:
            return -1 if exc.kind == "unknown_kernel" else None
        except (AgentUnavailableError, TimeoutError, TransportError):
            return None
        if status.get("alive"):
            return None
        code = status.get("exit_code")
        return int(code) if code is not None else -1

    @on_home_loop
    async def others_can_run_code(self) -> bool:
        """Whether someone else can run code in this kernel, or could at any time in its
        life: the host's agent says, and the mark is kept (see :mod:`.run_by_others`)."""
        return await self.run_by_others.ask()

    async def wait(self) -> int | None:
        """Wait until the kernel has ended; return its exit code."""
        while (code := await self.poll()) is None:
            await asyncio.sleep(0.1)
        return code

    @on_home_loop
    async def send_signal(self, signum: int) -> None:
        """Signal the kernel's process group on its host (SIGINT interrupts)."""
        if self.run.host_connection is None:
            return
        if signum == 0:
            await self.poll()
            return
        if self.run.machine is not None and self.run.machine.end_reason():
            return  # its machine ended, and the kernel with it: nothing to signal
        if signum == signal.SIGINT and self.operations.running in (HIBERNATION, WAKE):
            return  # no cell runs, only our save or restore, which an interrupt would break
        self.run.signalled()
        try:
            if signum == signal.SIGINT:
                await self.agent_call("interrupt_kernel")
            else:
                await self.agent_call("signal_kernel", signal=signal.Signals(signum).name)
        except AgentError as exc:
            if exc.kind not in ("kernel_died", "unknown_kernel"):
                raise
            self.log.debug("kernel %s: signal %d not sent: %s", self.kernel_id, signum, exc)
        except (AgentUnavailableError, TransportError):
            # Its machine may have ended while we asked (a job cancelled from outside,
            # before the server noticed), the kernel with it: the machine says.
            if self.run.machine is None or not await self.run.machine.confirm_end():
                raise

    @on_home_loop
    async def shutdown_requested(self, restart: bool = False) -> None:
        """The kernel was asked to stop (or restart): until it is gone (or back), its
        clients' reconnects fail, as expected, so they are not logged as warnings. A save
        or a wake under way ends first (see :mod:`.operations`)."""
        await self.operations.stop(RESTART if restart else SHUTDOWN)
        self.run.signalled()
        self.hibernation.stopping = self.hibernation.hibernated
        if self.run.machine is not None:
            self.run.machine.expect_drops(self.kernel_id)

    async def kill(self, restart: bool = False) -> None:
        """SIGKILL the kernel's process group (once a save or a wake under way ended)."""
        await self.manager.on_home(self.operations.stop(RESTART if restart else SHUTDOWN))
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        """SIGTERM the kernel's process group."""
        await self.send_signal(signal.SIGTERM)

    # ------------------------------------------------------------------ launch

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Check the target exists and prepare the launch arguments.

        Raises:
            KernelLaunchError: 404 for unknown hardware.
        """
        keep_ports(self.parent, self.run.local_ports)  # before anything awaits
        listable(self.parent)
        self._steps = self.manager.steps(self.target or "?", self.kernel_id)
        try:
            with self._steps.step("resolve hardware"):
                # The machine it runs on: the target's, or on a scheduler an allocation.
                placed = self.manager.place(self.kernel_id, self.manager.target(self.target))
                self.place_on(placed)
        except LaunchError as exc:
            self.operations.stopped()  # a restart ends here
            raise KernelLaunchError(exc) from exc.__cause__
        kwargs = await super().pre_launch(**kwargs)
        # The kernelspec's argv is not used: the agent runs ipykernel with the
        # target's Python. jupyter_client still expects a command here.
        kwargs["cmd"] = list(self.kernel_spec.argv)
        return kwargs

    @on_home_loop
    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        """Start the kernel on its target (or reattach, or restart it) and connect its ports.

        Raises:
            KernelLaunchError: A step failed; nothing is left running then.
        """
        steps = self._steps or self.manager.steps(self.target, self.kernel_id)
        self._steps = None
        self.run.launching(steps)
        self.launch_kwargs = dict(kwargs)
        try:
            info = await self.launcher.run(steps, kwargs)
            if self.hibernation.hibernated and self.run.host_connection is not None:
                await self.hibernation.restarted()  # restarted while hibernated: afresh
        finally:
            self.operations.stopped()  # a restart ends once its kernel runs, or failed
        steps.log.info("kernel %s ready on %s: %s", self.kernel_id, self.target, steps.summary())
        return info

    # ------------------------------------------------------------------ hibernation

    @on_home_loop
    async def hibernate(
        self, policy: Policy = "partial", progress: Progress | None = None
    ) -> SaveSummary:
        """Save the kernel's state, stop it on its host, and let its machine go; the kernel
        keeps its id and ports (see :mod:`.hibernating`)."""
        return await self.hibernation.hibernate(policy, progress)

    @on_home_loop
    async def wake(
        self, progress: Progress | None = None, target: str | None = None
    ) -> RestoreSummary | None:
        """Bring a hibernated kernel back, on its target or on ``target`` (which then
        becomes its target); None when it was not hibernated."""
        return await self.hibernation.wake(progress, target)

    # ------------------------------------------------------------------ shutdown

    @on_home_loop
    async def cleanup(self, restart: bool = False) -> None:
        """After the kernel ended: keep everything for a restart, else release it all
        (a hibernated kernel's saved state included)."""
        try:
            await self._cleanup(restart)
        finally:
            if not restart:
                self.operations.stopped()

    async def _cleanup(self, restart: bool) -> None:
        if not restart and self.hibernation.hibernated:
            if self.manager.server_stopping:
                # Only the server stops: the next one takes the kernel over, asleep.
                await self.hibernation.leave_for_next_server()
                return
            await self.hibernation.discard()
            self.manager.ledger.remove_kernel(self.kernel_id)
            self.manager.unplace(self.kernel_id)
        if not restart:
            await self.hibernation.ended_awake()
        if restart or self.run.host_connection is None:
            return
        machine = self.run.machine
        try:
            if machine is None or not machine.end_reason():  # else it ended with its machine
                await self.agent_call("shutdown_kernel", now=True)
        except AgentError as exc:
            if exc.kind != "unknown_kernel":
                self.log.warning(
                    "kernel %s: shutdown on %s failed: %s", self.kernel_id, self.target, exc
                )
        except (AgentUnavailableError, TimeoutError, TransportError) as exc:
            self.log.warning(
                "kernel %s: %s cannot be reached to stop it (%s); its agent stops it "
                "when the host is next reached",
                self.kernel_id,
                self.target,
                exc,
            )
        self.run.stopped()
        self.manager.ledger.remove_kernel(self.kernel_id)
        self.manager.unplace(self.kernel_id)
        if machine is not None:
            # The agent stays while this server is connected, for the next
            # kernel; it exits by itself once idle and left alone.
            await machine.unexpose(self.kernel_id)

    def get_shutdown_wait_time(self, recommended: float = 5.0) -> float:
        """Allow for the round trips to the host on top of the recommended time."""
        remote = self._resolved is not None and self._resolved.provider != "local"
        return recommended + 2 * self.poll_timeout if remote else recommended

    def get_stable_start_time(self, recommended: float = 10.0) -> float:
        """How long a restarted kernel must live before its restart counts as done:
        ``recommended`` plus what its last launch took (a slow host's crash loop still
        reaches the restart limit; a kernel killed now and then does not add up to it,
        as it did when this was the whole launch timeout)."""
        steps = self.run.steps
        took = sum(r.seconds for r in steps.records) if steps is not None else 0.0
        return recommended + min(took, self.launch_timeout)

    # ------------------------------------------------------------------ persistence

    async def get_provisioner_info(self) -> dict[str, Any]:
        """What a later server needs to reattach: target, ports here and on the host.

        The kernel's key is left out; it is read from the host's agent when
        reattaching, so it is never written to the ledger.
        """
        info: dict[str, Any] = await super().get_provisioner_info()
        info["connection_info"] = {
            k: v for k, v in dict(info.get("connection_info") or {}).items() if k != "key"
        }
        info["version"] = INFO_VERSION
        info["target"] = self.target
        info["local_ports"] = dict(self.run.local_ports)
        remote = self.run.host_connection
        info["remote_ports"] = {n: int(remote[n]) for n in PORT_NAMES} if remote else {}
        info["hibernated"] = self.hibernation.summary()
        info["save_base"] = self.hibernation.base.to_json() if self.hibernation.base else None
        info["hibernate_after"] = self.hibernate_after
        info["run_by_others"] = self.run_by_others.marked
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        """Take over a kernel described by :meth:`get_provisioner_info`."""
        await super().load_provisioner_info(provisioner_info)
        self.target = str(provisioner_info["target"])
        self.manager.placements.put(self.kernel_id, self.target)
        self.hibernate_after = provisioner_info.get("hibernate_after")  # as written above
        self.run_by_others.marked = provisioner_info.get("run_by_others") is True
        # Where its last wake kept its state (the next server removes it at shutdown).
        self.hibernation.base = FarPlace.from_json(provisioner_info.get("save_base"))
        self.run.recorded(ports=dict(provisioner_info.get("local_ports") or {}))
