"""Starting, restarting or finding a provisioner's kernel on its machine, and cleaning up
after a launch that failed.

A launch takes one of four paths, each a method of :class:`KernelLauncher`:
:meth:`~KernelLauncher.take_over` (a kernel a previous server started),
:meth:`~KernelLauncher.wake_here` (a hibernated kernel started again behind its kept
relay), a restart (:meth:`~KernelLauncher.restart_remote`) and a new kernel
(:meth:`~KernelLauncher.start_remote`); all but a kernel resumed asleep end in
:meth:`~KernelLauncher.connect`, which records the kernel's ports, its connection
and its ledger row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import KernelConnectionInfo

from ..agent.holds import process_identity
from ..agent_client import AgentError, AgentUnavailableError
from ..providers.base import PORT_NAMES
from ..providers.launch_steps import LaunchError, LaunchSteps
from .errors import KernelGoneError, KernelLaunchError, MachineEndedError
from .hibernating import KernelHibernation
from .kernel_context import KernelContext
from .kernel_end import restart_refusal

if TYPE_CHECKING:
    from ..agent_client.relay import KernelRelayClient
    from ..providers.target import Target

#: Variables (``fnmatch`` patterns) of the launch environment that a kernel on another
#: machine gets besides the kernelspec's env and those the launch set or changed over
#: this process's environment; see :meth:`KernelLauncher.kernel_env`.
PASSED_ENV = ("JPY_SESSION_NAME", "LANG", "LANGUAGE", "LC_*")


def keep_ports(kernel_manager: Any, ports: Mapping[str, Any]) -> None:
    """Give the kernel manager back the kernel's ports as a restart begins.

    jupyter_client takes the ports of a kernel's first connection info for random ones,
    and its restarter, restarting a kernel that died within its first seconds, zeroes
    them (``newports``) before the start. A client that connects in that moment
    (JupyterLab reconnecting as the kernel died) connects to port 0 and never hears
    from the kernel again. Ours stay the same across restarts, so the manager has them
    again before anything else runs.
    """
    for name in PORT_NAMES:
        port = ports.get(name)
        if isinstance(port, int) and port > 0 and hasattr(kernel_manager, name):
            setattr(kernel_manager, name, port)


def listable(kernel_manager: Any) -> None:
    """Give a kernel that Jupyter is about to list its time of last activity.

    jupyter_server lists a kernel as soon as its start returns, and sets its activity
    only after that; a listing in between (``GET /api/kernels`` while a restarted server
    takes its kernels over, or while a notebook starts one) failed with a 500 on the
    missing time.
    """
    has_trait = getattr(kernel_manager, "has_trait", None)
    if has_trait is None or not has_trait("last_activity"):
        return
    if not kernel_manager.trait_has_value("last_activity"):
        kernel_manager.last_activity = datetime.now(UTC)


class KernelLauncher:
    """The launch of one provisioner's kernel. Where the kernel runs it reports to the
    provisioner's :class:`~.kernel_run.KernelRun`; it assigns nothing of the provisioner's.

    Args:
        provisioner: The provisioner whose kernel it launches.
        hibernation: The kernel's hibernation: a hibernated kernel's relay, kept while
            it was away, makes a launch a wake.
    """

    def __init__(self, provisioner: KernelContext, hibernation: KernelHibernation) -> None:
        self.p = provisioner
        self.hibernation = hibernation

    def kernel_env(self, env: dict[str, str] | None, local: bool) -> dict[str, str]:
        """The part of the launch environment that goes to the kernel.

        jupyter_client's launch environment is this process's environment with
        the kernelspec's env and the caller's ``start_kernel(env=...)`` over it.
        A kernel on this machine gets all of it and nothing else, as with
        jupyter_client's own kernels. A kernel on another machine gets the
        kernelspec's env, what the launch set or changed (``JPY_SESSION_NAME``,
        the caller's env), and the locale (:data:`PASSED_ENV`), over the host's
        login environment: this process's PATH, HOME, credentials (``AWS_*``)
        and Jupyter paths and token mean nothing there or must not leave here.
        The agent drops the parent-link variables (``JPY_PARENT_PID``...) from
        every kernel's environment: it, not a parent process, decides when a
        kernel ends (see ``orphan_grace``).

        Args:
            env: The launch environment (None: this process's).
            local: Whether the kernel runs on this machine.
        """
        launch = dict(os.environ if env is None else env)
        if local:
            return launch
        spec = set(self.p.kernel_spec.env or {}) if self.p.kernel_spec is not None else set()
        return {
            key: value
            for key, value in launch.items()
            if key in spec
            or os.environ.get(key) != value
            or any(fnmatchcase(key, pattern) for pattern in PASSED_ENV)
        }

    async def run(self, steps: LaunchSteps, kwargs: dict[str, Any]) -> KernelConnectionInfo:
        """Launch the kernel within the launch timeout, as a task of its own that the user
        can cancel (:meth:`..machines.manager.MachineManager.cancel_launch`).

        Raises:
            KernelLaunchError: A step failed, the launch timed out or was cancelled;
                nothing is left running then.
        """
        p = self.p
        remaining = max(1.0, p.launch_timeout - steps.elapsed)
        launch = asyncio.ensure_future(self.launch(steps, kwargs, remaining))
        p.manager.launches[p.kernel_id] = (launch, asyncio.get_running_loop())
        try:
            async with asyncio.timeout(remaining):
                return await launch
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the caller itself was cancelled, not only its launch
            await self.abandon(maybe_starting=True)
            raise KernelLaunchError(steps.cancelled("the user")) from None
        except TimeoutError:
            error = steps.timed_out(p.launch_timeout, "c.RemoteHWProvisioner.launch_timeout")
            await self.abandon(maybe_starting=True)
            raise KernelLaunchError(error) from None
        except LaunchError as exc:
            await self.abandon(maybe_starting=False)
            p.manager.unplace(p.kernel_id)
            raise KernelLaunchError(exc) from exc.__cause__
        finally:
            if p.manager.launches.get(p.kernel_id, (None,))[0] is launch:
                del p.manager.launches[p.kernel_id]

    async def launch(
        self, steps: LaunchSteps, kwargs: dict[str, Any], timeout: float
    ) -> KernelConnectionInfo:
        """Launch the kernel by the one path its state calls for: take over a kernel a
        previous server started, wake a hibernated kernel, restart a running one, or
        start a new one; then connect its channels here."""
        p = self.p
        record = p.manager.ledger.get_kernel(p.kernel_id)
        relay = self.hibernation.relay  # a hibernated kernel's, kept while it was away
        if relay is None and p.run.host_connection is None and record is not None:
            return await self.take_over(steps, record.info)
        target = await self.reach_machine(steps)
        if relay is not None:
            remote = await self.wake_here(steps, kwargs, timeout, relay)
        elif p.run.host_connection is not None:
            with steps.step("start kernel"):
                remote = await self.restart_remote(steps, kwargs, timeout)
        else:
            with steps.step("start kernel"):
                remote = await self.start_remote(steps, kwargs, timeout)
        return await self.connect(steps, target, remote)

    async def take_over(self, steps: LaunchSteps, info: dict[str, Any]) -> KernelConnectionInfo:
        """A kernel a previous Jupyter server started (its ledger row says so): resume it
        asleep when it hibernated, else find it on its host and connect to it."""
        p = self.p
        await p.load_provisioner_info(info)
        hibernated = info.get("hibernated")
        if isinstance(hibernated, dict):
            with steps.step("find kernel"):
                return await self.hibernation.resume_asleep(hibernated)
        # The previous server's connection file for this kernel id is stale:
        # jupyter_client would trust it instead of what is returned here.
        connection_file = getattr(p.parent, "connection_file", "")
        if connection_file:
            with contextlib.suppress(FileNotFoundError):
                os.remove(connection_file)
        target = await self.reach_machine(steps)
        with steps.step("find kernel"):
            remote = await self.find_remote()
        return await self.connect(steps, target, remote)

    async def reach_machine(self, steps: LaunchSteps) -> Target:
        """Reach the kernel's machine (preparing it when needed) and return its target.

        Raises:
            MachineEndedError: The kernel's machine ended under it: a restart does not
                quietly take new hardware in its place.
        """
        p = self.p
        target = p.resolved_target()
        refused = restart_refusal(p)
        if refused:
            with steps.step("restart kernel"):
                raise MachineEndedError(refused)
        p.run.reached(await p.manager.machine(target, steps))
        return target

    async def wake_here(
        self, steps: LaunchSteps, kwargs: dict[str, Any], timeout: float, relay: KernelRelayClient
    ) -> dict[str, Any]:
        """Start a hibernated kernel again behind the relay its clients kept: with the key
        they sign with."""
        p = self.p
        machine = p.run.machine
        assert machine is not None
        with steps.step("start kernel"):
            key: Any = p.run.connection_info["key"]  # bytes, its TypedDict says str
            key = key.decode() if isinstance(key, bytes) else str(key)
            remote = await self.start_remote(steps, kwargs, timeout, key)
            p.run.started(remote)
            machine.adopt(p.kernel_id, relay)
        return remote

    async def connect(
        self, steps: LaunchSteps, target: Target, remote: dict[str, Any]
    ) -> KernelConnectionInfo:
        """Make the kernel that runs on the host (``remote``: its connection there)
        reachable here, record it in the ledger, and return what clients connect to."""
        p = self.p
        machine = p.run.machine
        assert machine is not None
        p.run.started(remote)
        with steps.step("connect channels"):
            local = await machine.expose(p.kernel_id, remote, p.run.local_ports)
        info = p.run.connected(remote, local)
        p.manager.ledger.put_kernel(
            p.kernel_id,
            str(getattr(p.parent, "kernel_name", "") or target.kernel_name),
            target.name,
            await p.get_provisioner_info(),
            owner=p.owner,
        )
        return info

    async def start_remote(
        self, steps: LaunchSteps, kwargs: dict[str, Any], timeout: float, key: str | None = None
    ) -> dict[str, Any]:
        """Start the kernel: in the notebook's directory when the host has it (else in
        the target's working directory), with its environment and its orphan grace
        (and ``key``, for a kernel woken from hibernation: no kernel of its id runs then,
        so the host replaces one that an earlier wake, cut off, left behind)."""
        target = self.p.resolved_target()
        local = target.provider == "local"
        requested = kwargs.get("cwd")
        cwd = os.path.abspath(os.path.expanduser(str(requested or os.getcwd())))
        started = await self.p.agent_call(
            "start_kernel",
            wait=timeout + 5,
            env=self.kernel_env(kwargs.get("env"), local),
            inherit_env=not local,
            cwd=cwd,
            cwd_fallback=target.workdir or "~",
            owner=process_identity(),
            orphan_grace=self.p.orphan_grace,
            timeout=timeout,
            **({"key": key, "replace": True} if key is not None else {}),
        )
        used = started.get("cwd")
        if used:
            whose = "the notebook's" if requested else "this process's"
            where = "this machine" if local else target.where
            steps.note(
                f"working directory {used} ({whose})"
                if used == cwd
                else f"working directory {used} ({whose} {cwd} does not exist on {where})"
            )
        return dict(started["connection"])

    async def restart_remote(
        self, steps: LaunchSteps, kwargs: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        try:
            restarted = await self.p.agent_call(
                "restart_kernel", wait=timeout + 5, now=True, timeout=timeout
            )
        except AgentError as exc:
            if exc.kind != "unknown_kernel":
                raise
            # The host forgot the kernel (its agent was replaced, or it was shut down
            # there): start it afresh, with the key its clients sign with.
            key: Any = (self.p.run.connection_info or {}).get("key")
            key = key.decode() if isinstance(key, bytes) else key
            return await self.start_remote(steps, kwargs, timeout, str(key) if key else None)
        return dict(restarted["connection"])

    async def find_remote(self) -> dict[str, Any]:
        """The connection of the kernel a previous server started, which its host still
        runs.

        Raises:
            KernelGoneError: The host no longer runs it (it ended while no server
                watched it): its ledger row is dropped.
        """
        try:
            status = await self.p.agent_call("kernel_status")
        except AgentError as exc:
            if exc.kind != "unknown_kernel":
                raise
            await self._forget_gone()
            raise KernelGoneError(
                f"{self.p.named} is no longer there: it ended while "
                "no Jupyter server watched it; start a new kernel"
            ) from exc
        if not status.get("alive"):
            await self._forget_gone()
            raise KernelGoneError(
                f"{self.p.named} is no longer running (exit "
                f"code {status.get('exit_code')}): it ended while no Jupyter server watched "
                "it; start a new kernel"
            )
        self.p.run.found(status.get("execution_state"))
        return dict(status["connection"])

    async def _forget_gone(self) -> None:
        """A kernel that ended while no server watched it: its ledger row goes, and the
        base of its next save that its last wake kept."""
        self.p.manager.ledger.remove_kernel(self.p.kernel_id)
        await self.hibernation.ended_awake()

    async def abandon(self, maybe_starting: bool) -> None:
        """After a failed launch: stop what was started and let an idle host agent go.

        Args:
            maybe_starting: The launch was cut off, perhaps while the agent was
                starting the kernel, so stop it even if no answer came back.
        """
        machine = self.p.run.machine
        if machine is None:
            return
        if maybe_starting or self.p.run.host_connection is not None:
            try:
                await self.p.agent_call("shutdown_kernel", now=True)
            except (AgentError, AgentUnavailableError, TimeoutError) as exc:
                self.p.log.debug("kernel %s: nothing to stop: %s", self.p.kernel_id, exc)
            await machine.unexpose(self.p.kernel_id)
            self.p.manager.ledger.remove_kernel(self.p.kernel_id)
        self.p.run.stopped()
        await self.p.manager.release_if_idle(machine.target.name)
