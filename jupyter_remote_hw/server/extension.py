"""The jupyter_server extension application."""

from __future__ import annotations

import asyncio
import os
from typing import Any, cast

from jupyter_server.extension.application import ExtensionApp
from tornado.ioloop import PeriodicCallback
from tornado.platform.asyncio import BaseAsyncIOLoop
from traitlets import Bool, Enum, Float

from .. import __version__
from ..config_check import (
    ConfigError,
    check_config,
    config_file_candidates,
    unloaded_config_file,
)
from ..ledger.store import SERVER_OWNER
from ..machines.manager import MachineManager
from ..providers import LocalProvider, SSHProvider
from ..providers.aws import AWSProvider
from ..providers.aws.upkeep import CloudUpkeep
from ..provisioner import RemoteHWProvisioner
from ..provisioner.kernelspecs import RemoteHWKernelSpecManager
from ..transport import TransportManager
from .ended_restart import KERNEL_ACTION_ROUTE, EndedKernelActionHandler
from .handlers import api_handlers
from .hardware_actions import HardwareActions
from .hardware_events import EventHub
from .hibernation.actions import HibernationActions
from .hibernation.timer import IdleHibernation
from .interrupt import stop_on_interrupt
from .launch_delete import cancel_launches_on_delete
from .orphans import reap_orphans
from .share_actions import ShareActions
from .stopping import leave_to_server, settle, shut_down
from .user_errors import install_filter, log_failure
from .websocket import NoDelayWebsocketConnection

#: Key under which the shared :class:`MachineManager` sits in the tornado settings.
MACHINES_SETTING = "jupyter_remote_hw_machines"


class RemoteHWExtension(ExtensionApp):
    """Owns the server-wide managers, reattaches kernels on start, closes links on stop.

    Configured from the server's config files: ``c.MachineManager.*``,
    ``c.LocalProvider.*``, ``c.SSHProvider.*``, ``c.TransportManager.*`` and
    ``c.RemoteHWProvisioner.*``.
    """

    name = "jupyter_remote_hw"
    load_other_extensions = True
    classes = [  # noqa: RUF012 (a traitlets List on the base class)
        MachineManager,
        LocalProvider,
        SSHProvider,
        TransportManager,
        RemoteHWProvisioner,
    ]

    list_targets = Bool(
        True,
        config=True,
        help="List every hardware target in the kernel picker by using "
        "RemoteHWKernelSpecManager, unless ServerApp.kernel_spec_manager_class is set to "
        "another class.",
    )

    cloud_upkeep_interval = Float(
        300.0,
        config=True,
        help="Seconds between rounds of cloud upkeep while the server runs: machine states "
        "are read from the cloud (a machine that stopped itself stops accruing cost at the "
        "time it stopped) and machines stopped longer than "
        "AWSProvider.terminate_after_stopped are terminated. 0 turns it off. A round makes "
        "no cloud call while no machine was launched.",
    )

    orphan_reap_interval = Float(
        60.0,
        config=True,
        help="Seconds between looks for kernels that %%remote started on SSH hosts or this "
        "machine from a local kernel that was killed (its process is gone): they are shut "
        "down. 0 turns it off.",
    )

    hibernate_check_interval = Float(
        15.0,
        min=0.0,
        config=True,
        help="Seconds between looks for kernels idle past their target's hibernate_after "
        "(c.AWSProvider.hibernate_after, a SLURM cluster's 'hibernate_after'...), which are "
        "then hibernated. 0 turns hibernating by itself off.",
    )

    hibernate_policy = Enum(
        ["partial", "refuse"],
        "partial",
        config=True,
        help="What an idle kernel holding something that cannot be saved (an open file, a "
        "socket, a generator) does: 'partial' hibernates with the rest and says what was "
        "left out; 'refuse' stays awake and says why.",
    )

    reattach_retry_max = Float(
        60.0,
        config=True,
        help="Longest wait, in seconds, between tries to reattach kernels whose host could "
        "not be reached when the server started; waits double from 1 s up to this.",
    )

    stop_timeout = Float(
        30.0,
        min=0.0,
        config=True,
        help="Longest wait, in seconds, at the server's stop for a kernel being started, "
        "restarted or shut down at that moment to get there, before the server's kernels "
        "are shut down. A kernel still in between then is left, named in a warning.",
    )

    def _link_jupyter_server_extension(self, serverapp: Any) -> None:
        """Before the server builds its managers and web app: use our kernel spec
        manager and our kernel websocket connection.

        jupyter_server reads only ``jpserver_extensions`` from the installed
        ``jupyter_server_config.d`` files, so both classes are set here, and
        each only when nobody chose another one.

        First the configuration is checked: a configuration file the server could
        not load, or a setting of ours of the wrong type or out of range, is logged
        in one line (file and line, or setting and what it may be) and the server
        refuses to start, rather than starting with a limit ignored.
        """
        try:
            broken = unloaded_config_file(
                config_file_candidates(
                    ["jupyter_config", serverapp.config_file_name],
                    serverapp.config_file_paths,
                    serverapp.config_file,
                ),
                serverapp.loaded_config_files,
            )
            if broken is not None:
                raise broken
            check_config(serverapp.config, serverapp.loaded_config_files)
        except ConfigError as exc:
            self.log.critical("jupyter_remote_hw: %s. The server does not start.", exc)
            serverapp.exit(1)
        super()._link_jupyter_server_extension(serverapp)
        self._install_websocket_connection(serverapp)
        if not self.list_targets:
            return
        # Reading the trait before the server set it up would build its default
        # too early, so look at whether anyone set it instead.
        if not serverapp.trait_has_value("kernel_spec_manager_class"):
            if not _gateway_configured(serverapp):
                serverapp.kernel_spec_manager_class = RemoteHWKernelSpecManager
            return
        chosen = serverapp.kernel_spec_manager_class
        if not (isinstance(chosen, type) and issubclass(chosen, RemoteHWKernelSpecManager)):
            self.log.warning(
                "jupyter_remote_hw: ServerApp.kernel_spec_manager_class is %s, so hardware "
                "targets are not listed; install kernelspecs for them (see kernelspecs/ in "
                "the project) or subclass RemoteHWKernelSpecManager",
                chosen,
            )

    def _install_websocket_connection(self, serverapp: Any) -> None:
        """Send kernel websockets without Nagle delay (see :mod:`.websocket`).

        Sets ``ServerApp.kernel_websocket_connection_class`` to
        :class:`NoDelayWebsocketConnection` unless the user (or another
        extension) chose a class, which is then kept and named in one INFO
        line; or unless kernels run on a gateway, whose connection class is
        another one.
        """
        if not serverapp.trait_has_value("kernel_websocket_connection_class"):
            if not _gateway_configured(serverapp):
                serverapp.kernel_websocket_connection_class = NoDelayWebsocketConnection
            return
        chosen = serverapp.kernel_websocket_connection_class
        if not (isinstance(chosen, type) and issubclass(chosen, NoDelayWebsocketConnection)):
            name = (
                f"{chosen.__module__}.{chosen.__qualname__}"
                if isinstance(chosen, type)
                else str(chosen)
            )
            self.log.info(
                "jupyter_remote_hw: ServerApp.kernel_websocket_connection_class is %s, so "
                "kernel websockets are sent as that class sends them (with Nagle delay "
                "unless it turns it off)",
                name,
            )

    def initialize_settings(self) -> None:
        """Create (or take) the machine manager and publish it to handlers."""
        self.machines: MachineManager = MachineManager.instance(
            config=self.serverapp.config if self.serverapp else self.config
        )
        if self.serverapp is not None:  # SSH links live on the server's loop
            self.machines.bind_loop(cast(BaseAsyncIOLoop, self.serverapp.io_loop).asyncio_loop)
            # A user error (unknown host key, no credentials...) is one WARNING line,
            # also where jupyter_client logs a failed kernel start with its traceback.
            install_filter(self.serverapp.log)
            self._restore_sigint = stop_on_interrupt(self.serverapp, self.log)
        self.settings.update(
            {
                MACHINES_SETTING: self.machines,
                "jupyter_remote_hw_version": __version__,
            }
        )
        self.log.info("jupyter_remote_hw %s loaded", __version__)

    def initialize_handlers(self) -> None:
        """Register the hardware REST API and its event socket (see handlers.py)."""
        assert self.serverapp is not None
        events = EventHub(self.log)
        self.machines.launch_listeners.append(events.launch_listener)
        actions = HardwareActions(
            self.machines, self.serverapp.kernel_manager, self.serverapp.session_manager, events
        )
        self.machines.link_listeners.append(actions.link_changed)
        cancel_launches_on_delete(self.serverapp.kernel_manager, self.machines, self.log)
        self.idle_hibernation = IdleHibernation(
            HibernationActions(actions),
            self.machines,
            self.serverapp.kernel_manager,
            self.log,
            self.hibernate_policy,
        )
        # Jupyter's own kernel action route first, so that the restart of a kernel whose
        # machine ended answers 409 with the reason instead of a bare 500.
        self.handlers.append((KERNEL_ACTION_ROUTE, EndedKernelActionHandler))
        self.handlers.extend(
            api_handlers(
                actions,
                ShareActions(self.machines, self.serverapp.kernel_manager, events),
            )
        )

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """Reattach to the kernels a previous server on this data dir left running;
        start the cloud upkeep."""
        await self.reattach_kernels()
        aws = self.machines.providers["aws"]
        assert isinstance(aws, AWSProvider)
        self.upkeep = CloudUpkeep(aws, self.cloud_upkeep_interval, self.log)
        self.upkeep.start()
        self.orphan_reaper: PeriodicCallback | None = None
        if self.orphan_reap_interval > 0:
            self.orphan_reaper = PeriodicCallback(
                self.reap_orphans, self.orphan_reap_interval * 1000
            )
            self.orphan_reaper.start()
        self.hibernation_timer: PeriodicCallback | None = None
        if self.hibernate_check_interval > 0:
            self.hibernation_timer = PeriodicCallback(
                self.idle_hibernation.check, self.hibernate_check_interval * 1000
            )
            self.hibernation_timer.start()

    async def reap_orphans(self) -> list[str]:
        """Shut down the ``%%remote`` kernels whose local kernel was killed (see
        :mod:`.orphans`); never raises."""
        try:
            return await reap_orphans(self.machines, self.log)
        except Exception as exc:  # noqa: BLE001 (a host away: one line; a bug: traceback)
            log_failure(self.log, exc, "jupyter_remote_hw: looking for orphaned kernels failed")
            return []

    async def reattach_kernels(self) -> list[str]:
        """Bring every kernel in the ledger back into the server's kernel manager.

        A kernel that is gone from its host is dropped from the ledger (by the
        provisioner). One whose host cannot be reached now stays in the ledger
        and waits (the panel says for which host): it is tried again, with
        waits growing to ``reattach_retry_max``, until it is back or gone. The
        others keep their ids and their state.

        Returns:
            The ids of the kernels reattached now.
        """
        attached = await self._reattach_once()
        if self.machines.waiting and getattr(self, "_retrying", None) is None:
            self._retrying: asyncio.Task[None] | None = asyncio.create_task(self._reattach_later())
        return attached

    async def _reattach_later(self) -> None:
        delay = 1.0
        try:
            while self.machines.waiting:
                await asyncio.sleep(delay)
                delay = min(delay * 2, max(1.0, self.reattach_retry_max))
                await self._reattach_once()
        finally:
            self._retrying = None

    async def _reattach_once(self) -> list[str]:
        assert self.serverapp is not None
        kernel_manager = self.serverapp.kernel_manager
        attached = []
        records = {r.kernel_id: r for r in self.machines.ledger.kernels(owner=SERVER_OWNER)}
        for kernel_id in list(self.machines.waiting):
            if kernel_id not in records:
                self.machines.waiting.pop(kernel_id, None)  # gone meanwhile
        for record in records.values():
            if record.kernel_id in kernel_manager:
                self.machines.waiting.pop(record.kernel_id, None)
                continue
            retry = record.kernel_id in self.machines.waiting
            try:
                await kernel_manager.start_kernel(
                    kernel_id=record.kernel_id, kernel_name=record.kernel_name
                )
            except Exception as exc:  # noqa: BLE001 (one bad record must not stop the others)
                if any(
                    r.kernel_id == record.kernel_id
                    for r in self.machines.ledger.kernels(owner=SERVER_OWNER)
                ):
                    self.machines.waiting[record.kernel_id] = record.target
                    log = self.log.debug if retry else self.log.warning
                    log(
                        "jupyter_remote_hw: kernel %s on %s not reattached yet (tried again "
                        "until its host is back): %s",
                        record.kernel_id,
                        record.target,
                        exc,
                    )
                else:
                    self.machines.waiting.pop(record.kernel_id, None)
                    self.log.warning(
                        "jupyter_remote_hw: kernel %s on %s is gone: %s",
                        record.kernel_id,
                        record.target,
                        exc,
                    )
                continue
            self.machines.waiting.pop(record.kernel_id, None)
            attached.append(record.kernel_id)
            # jupyter_server marks every kernel it starts "starting" until its next
            # status message; a kernel taken over has long started: say what it does.
            kernel = kernel_manager.get_kernel(record.kernel_id)
            provisioner = kernel.provisioner
            state = (
                provisioner.run.reattached_state
                if isinstance(provisioner, RemoteHWProvisioner)
                else None
            )
            if state:
                kernel.execution_state = state  # type: ignore[attr-defined]  # set by jupyter_server
            self.log.info(
                "jupyter_remote_hw: reattached kernel %s on %s (%s)",
                record.kernel_id,
                record.target,
                state or "state unknown",
            )
        return attached

    async def stop_extension(self) -> None:
        """Shut down our kernels, then close every SSH connection and forward.

        jupyter_server stops extensions before it shuts kernels down; ours need their
        SSH connections for that, so they are shut down here. First nothing new
        starts: the timers stop, launches under way are cancelled, and a kernel being
        started, restarted or shut down at the signal gets up to ``stop_timeout``
        seconds to get there (see :mod:`.stopping`).

        Never raises, and leaves jupyter_server only kernels it can shut down: its own
        stop ends its event loop only when nothing failed, so a failure here would
        leave a server that serves nothing and never exits.
        """
        self.machines.server_stopping = True
        for what, step in (
            ("stopping its timers", self._stop_background),
            ("cancelling its launches", self._cancel_launches),
            ("shutting its kernels down", self._stop_kernels),
            ("closing its machines", self.machines.close),
        ):
            try:
                await step()
            except Exception as exc:  # noqa: BLE001 (the next steps run all the same)
                log_failure(self.log, exc, f"jupyter_remote_hw: {what} failed")
        MachineManager.clear_instance()
        restore_sigint = getattr(self, "_restore_sigint", None)
        if restore_sigint is not None:
            restore_sigint()

    async def _stop_background(self) -> None:
        """Stop what starts work by itself: reattaching, idle hibernation, the orphan
        reaper, cloud upkeep."""
        retrying = getattr(self, "_retrying", None)
        if retrying is not None:
            retrying.cancel()
            await asyncio.gather(retrying, return_exceptions=True)
        for name in ("hibernation_timer", "orphan_reaper"):
            timer = getattr(self, name, None)
            if timer is not None:
                timer.stop()
        upkeep = getattr(self, "upkeep", None)
        if upkeep is not None:
            await upkeep.stop()

    async def _cancel_launches(self) -> None:
        """Cancel the launches of new kernels under way (a job waiting in a SLURM queue:
        its kernel's shutdown would wait for it, and what it holds must not outlive this
        server). A restart's launch is left to end: the kernels' stop waits for it, and
        cancelling it would fail the restart request with a 500."""
        kernel_manager = getattr(self.serverapp, "kernel_manager", None)
        listed = set(kernel_manager.list_kernel_ids()) if kernel_manager is not None else set()
        cancelled = await self.machines.cancel_launches(keep=listed)
        if cancelled:
            self.log.info("jupyter_remote_hw: cancelled %d launch(es) under way", cancelled)

    async def _stop_kernels(self) -> None:
        """Let kernels between two states settle, shut ours down, and leave
        jupyter_server only kernels it can shut down."""
        kernel_manager = getattr(self.serverapp, "kernel_manager", None)
        if kernel_manager is None:
            return
        ours: list[str] = []
        try:
            if await settle(kernel_manager, self.stop_timeout, self.log):
                await self.machines.cancel_launches()  # a restart's, still under way
            ours = [
                kernel_id
                for kernel_id in kernel_manager.list_kernel_ids()
                if isinstance(
                    getattr(kernel_manager.get_kernel(kernel_id), "provisioner", None),
                    RemoteHWProvisioner,
                )
            ]
            if ours:
                self.log.info("jupyter_remote_hw: shutting down %d kernel(s)", len(ours))
            await shut_down(kernel_manager, ours, self.log)
            await settle(kernel_manager, self.stop_timeout, self.log)
        finally:
            leave_to_server(kernel_manager, ours, self.log)


def _gateway_configured(serverapp: Any) -> bool:
    """Whether the server's kernels run on a gateway (read from its config, before
    the server built its gateway client)."""
    return bool(serverapp.config.GatewayClient.get("url") or os.environ.get("JUPYTER_GATEWAY_URL"))


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """Point jupyter_server at the extension application."""
    return [{"module": __name__, "app": RemoteHWExtension}]
