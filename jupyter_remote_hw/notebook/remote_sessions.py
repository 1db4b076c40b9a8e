"""The remote kernels of one local kernel: what ``%%remote`` runs cells on.

A local kernel's cells run on its main thread; SSH connections and remote
kernels' channels need an event loop that keeps running while a cell waits.
:class:`RemoteSessions` owns such a loop in a daemon thread. A call from a
cell schedules a coroutine there and waits for it, while events the
coroutine emits (outputs, launch steps, transfer progress) come back through
a queue and are handled on the cell's thread, as they arrive, so they show
in the cell that caused them.

Each target gets one remote kernel, started on first use through the same
provisioner as the kernels JupyterLab starts, and stopped when the local
kernel exits.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import re
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from ..ledger.records import magic_owner
from ..machines.manager import MachineManager, server_config
from ..providers import Target, UnknownHardwareError
from ..provisioner.kernelspecs import RemoteHWKernelSpecManager
from ..transfer.client import TransferClient
from ..transfer.kernel_link import KernelLink
from ..transfer.kernel_side.pickling import Pickled
from ..transfer.variables import stream_opener

T = TypeVar("T")
Emit = Callable[[tuple[str, Any]], None]
"""Sends an event ``(kind, payload)`` to the cell's thread."""

#: How often a cell that the remote kernel aborted unrun is sent again.
ABORTED_RETRIES = 10

#: Seconds a second wait for an interrupted remote cell may take before giving up on it.
INTERRUPT_GRACE = 10.0

#: Seconds between checks that a remote kernel still runs, while a cell or transfer waits on it.
WATCH_INTERVAL = 2.0


class RemoteKernelLostError(Exception):
    """The remote kernel ended while a cell or transfer was waiting on it."""


def _ended_note(target_name: str, when: str) -> str:
    """What a cell whose remote kernel has ended says."""
    return (
        f"the kernel on {target_name} ended {when} (shut down or terminated from "
        "the Remote hardware panel, crashed, or killed, for example for lack of memory). "
        "Its variables are gone; the next %%remote starts a new kernel there."
    )


def _quiet_logger() -> logging.Logger:
    """A logger that stays out of the cell: failures reach the user as exceptions."""
    log = logging.getLogger("jupyter_remote_hw.remote")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False
    return log


def find_target(machines: MachineManager, name: str) -> Target:
    """The target a user means by ``name``.

    ``name`` is a target's name (``ssh-gpu-box``), what it runs on as the
    kernel picker shows it (its SSH host ``gpu-box``) when only one target
    matches that, or a running machine's id in the ledger or at its cloud
    provider (``i-0abc...``).

    Raises:
        UnknownHardwareError: No such target (the message lists the others).
    """
    try:
        return machines.target(name)
    except UnknownHardwareError:
        targets = machines.targets()
        matches = [t for t in targets if name in (t.host, t.where)]
        machine = machines.ledger.find_machine(name)
        if machine is not None:
            matches += [t for t in targets if t.name == machine.name]
        if len(matches) == 1:
            return matches[0]
        raise


def find_shaped_target(
    machines: MachineManager, name: str, nodes: int | None, gpus_per_node: int | None
) -> Target:
    """The target of an allocation of ``nodes`` nodes (with ``gpus_per_node`` GPUs each)
    of the cluster target ``name`` (``slurm-dev-gpu-a100``, or ``slurm-dev-gpu-gpu`` for
    any GPU type): ``slurm-dev-gpu-a100-2x1``; ``name`` itself for one node.

    Raises:
        UnknownHardwareError: ``name`` is not a target (and no shape was asked).
        ValueError: No target of that shape is offered (the message lists those that are).
    """
    if not nodes or nodes == 1:
        if gpus_per_node:
            raise ValueError(
                "--gpus-per-node goes with --nodes: one node's kernel gets the GPUs of "
                "its cluster's 'gpus' (c.SLURMProvider.clusters)"
            )
        return find_target(machines, name)
    if nodes < 1 or (gpus_per_node is not None and gpus_per_node < 1):
        raise ValueError("--nodes and --gpus-per-node are counts of 1 or more")
    gpus = str(gpus_per_node) if gpus_per_node else r"\d+"
    shape = rf"-{nodes}(x{gpus}|nodes)"
    targets = machines.targets()
    found = [t for t in targets if re.fullmatch(re.escape(name) + shape, t.name)]
    if len(found) == 1:
        return found[0]
    offered = sorted(t.name for t in targets if re.search(r"-\d+(x\d+|nodes)$", t.name))
    asked = f"{nodes} nodes" + (f" × {gpus_per_node} GPUs" if gpus_per_node else "")
    raise ValueError(
        f"no allocation of {asked} of {name} is offered; the allocations of several "
        f"nodes offered are: {', '.join(offered) or 'none'}. A cluster offers the node "
        "counts of its 'nodes', with its 'gpus' GPUs per node (c.SLURMProvider.clusters)."
    )


@dataclass
class RemoteKernel:
    """One remote kernel of this local kernel."""

    target: Target
    manager: AsyncKernelManager
    link: KernelLink
    transfer: TransferClient
    run_by_others: bool = False
    """Someone else could run code in it (once true, true until it ends)."""

    @property
    def kernel_id(self) -> str:
        """The kernel's id (the same in the ledger and on the host)."""
        return str(self.manager.kernel_id)


class RemoteSessions:
    """Remote kernels per target, driven from a private event loop.

    Args:
        config: Configuration for the machine manager, providers and transport.
        log: Where to log.
    """

    def __init__(self, config: Config | None = None, log: logging.Logger | None = None) -> None:
        self.config = Config(config if config is not None else server_config())
        self.log = log or _quiet_logger()
        self.owner = magic_owner(socket.gethostname(), os.getpid())
        # Kernels started here are this process's: a Jupyter server does not reattach them.
        self.config.RemoteHWProvisioner.owner = self.owner
        self.default_target: str | None = None
        self._kernels: dict[str, RemoteKernel] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="jupyter-remote-hw", daemon=True
        )
        self._thread.start()
        self._manager: MachineManager | None = None
        atexit.register(self.shutdown)

    # ------------------------------------------------------------------ plumbing

    @property
    def machines(self) -> MachineManager:
        """This process's machine manager."""
        if self._manager is None:
            manager: MachineManager = MachineManager.instance(config=self.config)
            manager.bind_loop(self._loop)
            self._manager = manager
        return self._manager

    def run(
        self,
        work: Callable[[Emit], Coroutine[Any, Any, T]],
        on_event: Callable[[str, Any], None] | None = None,
        on_interrupt: Callable[[Future[T]], bool] | None = None,
    ) -> T:
        """Run ``work(emit)`` on the loop; handle its events here until it is done.

        Args:
            work: Makes the coroutine; ``emit((kind, payload))`` reaches ``on_event``.
            on_event: Called on this thread with each event, in order.
            on_interrupt: Called on this thread on Ctrl-C (KeyboardInterrupt)
                with the running future; return True to keep waiting for it
                (it was asked to stop), False to cancel it and re-raise.
        """
        events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        finished = threading.Event()

        async def runner() -> T:
            try:
                return await work(events.put)
            finally:
                finished.set()
                events.put(("finished", None))  # wakes the wait below at once

        future = asyncio.run_coroutine_threadsafe(runner(), self._loop)
        interrupted = False

        def drain(block: bool) -> bool:
            """Handle waiting events; whether the coroutine has finished."""
            try:
                kind, payload = events.get(timeout=0.5) if block else events.get_nowait()
            except queue.Empty:
                return False
            while True:
                if kind == "finished":
                    return True
                if on_event is not None:
                    on_event(kind, payload)
                try:
                    kind, payload = events.get_nowait()
                except queue.Empty:
                    return False

        done = False
        while not done:
            try:
                done = drain(block=True)
            except KeyboardInterrupt:
                if not interrupted and on_interrupt is not None and on_interrupt(future):
                    interrupted = True
                    continue
                # Cancelling runs the coroutine's cleanup (aborting a transfer
                # on the other side) on the loop; wait for it.
                future.cancel()
                finished.wait(INTERRUPT_GRACE)
                drain(block=False)
                raise
        result = future.result()
        if interrupted:
            raise KeyboardInterrupt
        return result

    def call(self, coroutine: Awaitable[T]) -> T:
        """Run one coroutine on the loop and return its result (no events)."""

        async def wrapped(emit: Emit) -> T:
            return await coroutine

        return self.run(wrapped)

    # ------------------------------------------------------------------ targets

    def targets(self) -> list[Target]:
        """Every configured hardware target."""
        return self.machines.targets()

    def target(
        self, name: str | None, nodes: int | None = None, gpus_per_node: int | None = None
    ) -> Target:
        """The target called ``name`` (or the default); see :func:`find_target`, and
        :func:`find_shaped_target` for ``nodes`` and ``gpus_per_node``.

        Raises:
            UnknownHardwareError: No such target (the message lists the others).
            ValueError: No name and no default, or no target of that shape.
        """
        name = name or self.default_target
        if not name:
            raise ValueError(
                "no hardware given: name it (%%remote gpu-box) or set a default "
                "with %remote_hw gpu-box"
            )
        return find_shaped_target(self.machines, name, nodes, gpus_per_node)

    def running(self) -> dict[str, RemoteKernel]:
        """The remote kernels of this local kernel, by target name."""
        return dict(self._kernels)

    # ------------------------------------------------------------------ kernels

    async def kernel(self, target: Target, emit: Emit) -> RemoteKernel:
        """This local kernel's kernel on ``target``, started on first use (with progress).

        Raises:
            RemoteKernelLostError: The kernel it had there has ended since (shut down
                from the panel, a terminate, a crash): the cell does not run on a new
                kernel without the earlier variables; it is forgotten, so running the
                cell again starts a new one.
        """
        lock = self._starting.setdefault(target.name, asyncio.Lock())
        async with lock:
            existing = self._kernels.get(target.name)
            if existing is not None:
                if await existing.manager.is_alive():
                    return existing
                del self._kernels[target.name]
                await self._stop(existing)
                raise RemoteKernelLostError(
                    _ended_note(target.name, "since the last %%remote cell")
                )
            kernel = await self._start(target, emit)
            self._kernels[target.name] = kernel
            return kernel

    async def _start(self, target: Target, emit: Emit) -> RemoteKernel:
        kernel_id = str(uuid.uuid4())

        def listener(event: dict[str, Any]) -> None:
            if event.get("kernel_id") == kernel_id:
                emit(("launch", event))

        manager = AsyncKernelManager(
            kernel_id=kernel_id,
            kernel_name=target.kernel_name,
            config=self.config,
            kernel_spec_manager=RemoteHWKernelSpecManager(config=self.config),
            log=self.log,
        )
        self.machines.launch_listeners.append(listener)
        try:
            await manager.start_kernel()
        finally:
            self.machines.launch_listeners.remove(listener)
        client = manager.client()
        # No heartbeat: the manager says whether the kernel lives (see transfer_client).
        client.start_channels(hb=False)
        try:
            await client.wait_for_ready(timeout=60)
        except BaseException:
            client.stop_channels()
            await manager.shutdown_kernel(now=True)
            raise
        link = KernelLink(client, self.log)
        link.start()
        return RemoteKernel(
            target, manager, link, TransferClient(link, target.name, opener=stream_opener(manager))
        )

    async def _stop(self, kernel: RemoteKernel) -> None:
        await kernel.link.close()
        kernel.link.client.stop_channels()
        try:
            await kernel.manager.shutdown_kernel(now=True)
        except Exception as exc:  # noqa: BLE001 (stopping the others matters more)
            self.log.warning("stopping the kernel on %s failed: %s", kernel.target.name, exc)

    async def interrupt(self, target_name: str) -> None:
        """Interrupt the running cell of the kernel on ``target_name``."""
        kernel = self._kernels.get(target_name)
        if kernel is not None:
            await kernel.manager.interrupt_kernel()

    async def stop(self, target_name: str) -> bool:
        """Stop the kernel on ``target_name``; whether there was one."""
        kernel = self._kernels.pop(target_name, None)
        if kernel is None:
            return False
        await self._stop(kernel)
        return True

    def shutdown(self) -> None:
        """Stop every remote kernel and close the connections (at exit)."""
        if not self._thread.is_alive():
            return

        async def stop_all() -> None:
            for name in list(self._kernels):
                await self.stop(name)
            if self._manager is not None:
                await self._manager.close()

        try:
            asyncio.run_coroutine_threadsafe(stop_all(), self._loop).result(30)
        except Exception as exc:  # noqa: BLE001 (at exit: report, do not raise)
            self.log.warning("stopping remote kernels failed: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        atexit.unregister(self.shutdown)

    # ------------------------------------------------------------------ cells and variables

    async def _watched(self, kernel: RemoteKernel, work: Awaitable[T]) -> T:
        """Await ``work`` while checking that ``kernel`` still runs.

        Raises:
            RemoteKernelLostError: The kernel ended first; it is forgotten, so
                the next use starts a new one.
        """
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WATCH_INTERVAL)
                if done:
                    return task.result()
                if await kernel.manager.is_alive():
                    continue
                task.cancel()
                if self._kernels.get(kernel.target.name) is kernel:
                    del self._kernels[kernel.target.name]
                    await self._stop(kernel)
                raise RemoteKernelLostError(
                    _ended_note(kernel.target.name, "while this cell was waiting on it")
                )
        finally:
            if not task.done():
                task.cancel()

    async def others_can_run_code(self, kernel: RemoteKernel) -> bool:
        """Whether someone else can run code in ``kernel``, or could since it started.

        Asked of its provisioner (the host's agent knows which kernels were
        shared with a role that runs code; a joined kernel always counts);
        a provisioner that cannot say counts as yes.
        """
        if not kernel.run_by_others:
            ask = getattr(kernel.manager.provisioner, "others_can_run_code", None)
            kernel.run_by_others = True if ask is None else bool(await ask())
        return kernel.run_by_others

    async def push(
        self, kernel: RemoteKernel, pickled: list[Pickled], device: str | None, emit: Emit
    ) -> list[dict[str, Any]]:
        """Send serialized variables to ``kernel``; all are assigned there, or none."""
        return await self._watched(
            kernel,
            kernel.transfer.push(
                pickled, device, lambda done, total: emit(("progress", (done, total)))
            ),
        )

    async def pull(self, kernel: RemoteKernel, names: list[str], emit: Emit) -> list[Pickled]:
        """Fetch the named variables of ``kernel``, serialized."""
        return await self._watched(
            kernel,
            kernel.transfer.pull(names, lambda done, total: emit(("progress", (done, total)))),
        )

    async def execute(self, kernel: RemoteKernel, code: str, emit: Emit) -> dict[str, Any]:
        """Run ``code`` on ``kernel``; its outputs are emitted as ``("output", msg)``.

        A request ipykernel aborted without running it (it drops requests that
        arrive just after a cell failed, such as an interrupted one) is sent again.
        """
        for _ in range(ABORTED_RETRIES):
            reply = await self._watched(
                kernel, kernel.link.execute(code, lambda msg: emit(("output", msg)))
            )
            if reply.get("status") != "aborted":
                break
            await asyncio.sleep(0.1)
        return reply
