"""What users do with hardware from JupyterLab: see their machines, start, stop and
terminate them, start a kernel on hardware, and switch a notebook's kernel to other
hardware carrying its variables.

Free of HTTP: the REST handlers in :mod:`.handlers` parse requests, call
these, and turn :class:`HardwareRequestError` into the HTTP status it carries.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..agent_client import AgentError, AgentUnavailableError
from ..errors import detail_of
from ..ledger.records import MAGIC_OWNER, magic_owner
from ..ledger.store import ACTIVE_STATES, FINAL_STATES, MachineRecord
from ..machines.manager import MachineManager
from ..machines.view import (
    OWNED_PROVIDERS,
    KernelFacts,
    MachineView,
    link_states,
    nothing_to_stop_note,
    unstoppable_note,
)
from ..providers import KERNEL_NAME_PREFIX, Target, UnknownHardwareError
from ..providers.launch_steps import LaunchError
from ..provisioner import RemoteHWProvisioner
from ..sharing.roles import kernels_run_by_others
from .hardware_events import EventHub
from .hibernation.times import kernel_hibernate_after
from .orphans import shut_down_on_host
from .request_errors import HardwareRequestError
from .switching.actions import SessionSwitching
from .switching.carry import CARRY_ALL
from .user_errors import host_key_details

#: Seconds the machines listing waits for an agent's lifetime status.
LIFETIME_WAIT = 3.0


def _kept_reason(kernel: dict[str, Any]) -> str:
    """Why a terminate left a kernel on its machine, in words."""
    if kernel["owner"].startswith(MAGIC_OWNER):
        return "started by %%remote; its host could not be reached to shut it down"
    return "started by another Jupyter server of yours; shut it down from there"


def _launch_failure(exc: BaseException) -> HardwareRequestError | None:
    """The request error for a failed kernel launch (a LaunchError, raw or wrapped)."""
    error = exc if isinstance(exc, LaunchError) else getattr(exc, "launch_error", None)
    if not isinstance(error, LaunchError):
        return None
    return HardwareRequestError(
        error.status,
        str(error),
        step=error.step,
        hint=error.hint or None,
        host_key=host_key_details(exc),
        detail=detail_of(exc),
    )


@dataclass
class HardwareActions(SessionSwitching):
    """The actions, over the server's managers.

    Args:
        machines: The machine manager.
        kernel_manager: The server's (async) kernel manager.
        session_manager: The server's session manager.
        events: Where progress and state changes are published.
    """

    machines: MachineManager
    kernel_manager: Any
    session_manager: Any
    events: EventHub

    def link_changed(self, name: str, up: bool) -> None:
        """A machine's link went down or came back: say so to the UI at once."""
        self.events.publish("machine", machine=self.machine_model(name))

    # ------------------------------------------------------------------ lookups

    def target(self, name: Any, field: str = "hardware") -> Target:
        """The target called ``name``.

        Raises:
            HardwareRequestError: 400 when ``name`` is not a non-empty string,
                404 when no target has that name.
        """
        if not isinstance(name, str) or not name:
            raise HardwareRequestError(
                400, f"'{field}' must be the name of a hardware target, e.g. 'local'", field
            )
        try:
            return self.machines.target(name)
        except UnknownHardwareError as exc:
            raise HardwareRequestError(404, str(exc), field) from None

    def kernel_target(self, kernel_id: str) -> str | None:
        """The machine a kernel of this server runs on (its target, or the allocation it
        was placed in), or None for other kernels."""
        placed = self.machines.placements.get(kernel_id)
        if placed is not None:
            return placed
        name = str(getattr(self.kernel_manager.get_kernel(kernel_id), "kernel_name", "") or "")
        if name.lower().startswith(KERNEL_NAME_PREFIX):
            return name[len(KERNEL_NAME_PREFIX) :].lower()
        return None

    async def session(self, session_id: str) -> dict[str, Any]:
        """The session model.

        Raises:
            HardwareRequestError: 404 when there is no such session.
        """
        try:
            model: dict[str, Any] = await self.session_manager.get_session(session_id=session_id)
        except Exception as exc:
            if getattr(exc, "status_code", None) == 404:
                raise HardwareRequestError(
                    404, f"no session {session_id!r}: open the notebook again", "session_id"
                ) from None
            raise
        if not model.get("kernel"):
            raise HardwareRequestError(409, f"session {session_id!r} has no kernel", "session_id")
        return model

    # ------------------------------------------------------------------ machines

    def _record(self, name: str) -> MachineRecord | None:
        """The ledger's machine for a target (a cloud machine), unless it has ended."""
        record = self.machines.ledger.find_machine(name)
        if record is None or record.state in FINAL_STATES:
            return None
        return record

    async def _paths(self) -> dict[str, str]:
        """The notebook each kernel of a session serves, by kernel id."""
        sessions = await self.session_manager.list_sessions()
        return {s["kernel"]["id"]: s["path"] for s in sessions if s.get("kernel") and s.get("path")}

    def view(self, paths: dict[str, str] | None = None, also: Iterable[str] = ()) -> MachineView:
        """The machines as the panel and ``jupyter remote-hw list`` show them, now
        (with the targets of machines named in ``also``, listed now or not)."""
        paths = paths or {}
        kernels = []
        run_by_others = kernels_run_by_others(self.machines.ledger.shares(include_revoked=True))
        for kernel_id in self.kernel_manager.list_kernel_ids():
            target = self.kernel_target(kernel_id)
            if target is None:
                continue
            kernel = self.kernel_manager.get_kernel(kernel_id)
            provisioner = getattr(kernel, "provisioner", None)
            if isinstance(provisioner, RemoteHWProvisioner) and provisioner.run_by_others.marked:
                run_by_others.add(kernel_id)
            kernels.append(
                KernelFacts(
                    kernel_id,
                    target,
                    str(getattr(kernel, "kernel_name", "") or ""),
                    getattr(kernel, "execution_state", None),
                    paths.get(kernel_id),
                    hibernate_after=kernel_hibernate_after(kernel, self.machines.providers),
                )
            )
        targets = self.machines.known_targets(
            [*also, *(k.target for k in kernels), *self.machines.waiting.values()]
        )
        links = link_states(self.machines.open_machines())
        for record in self.machines.ledger.kernels() if self.machines.waiting else ():
            name = self.machines.waiting.get(record.kernel_id)
            if name is not None and record.kernel_id not in self.kernel_manager:
                where = targets[name].where if name in targets else name
                kernels.append(
                    KernelFacts(record.kernel_id, name, record.kernel_name, waiting_for=where)
                )
                links.setdefault(name, False)
        return MachineView(
            targets,
            self.machines.ledger,
            links,
            kernels,
            down_since=dict(self.machines.link_down_since),
            run_by_others=run_by_others,
            owner_paths=self._owner_paths(paths),
        )

    def _owner_paths(self, paths: dict[str, str]) -> dict[str, str]:
        """The notebook of each of this server's kernels that runs here as a process (a
        plain ``python3`` kernel, where ``%%remote`` runs), by the owner its ``%%remote``
        kernels are recorded with (``magic:<host>:<pid>``)."""
        host = socket.gethostname()
        owners = {}
        for kernel_id, path in paths.items():
            if kernel_id not in self.kernel_manager:
                continue
            kernel = self.kernel_manager.get_kernel(kernel_id)
            process = getattr(getattr(kernel, "provisioner", None), "process", None)
            pid = getattr(process, "pid", None)
            if isinstance(pid, int):
                owners[magic_owner(host, pid)] = path
        return owners

    def machine_model(self, name: str, target: Target | None = None) -> dict[str, Any]:
        """One machine as the machines panel shows it (see :class:`.MachineView`).

        ``target`` stands in for a target no provider lists any more.
        """
        view = self.view(also=[name])
        if target is not None:
            view.targets.setdefault(target.name, target)
        return view.model(name)

    async def idle_stop_in(self, name: str) -> float | None:
        """Seconds until the agent of an open machine stops it for idleness, when its
        lifetime policy has an idle stop (cloud machines); None otherwise."""
        machine = self.machines.cached(name)
        if machine is None or not machine.link_up:
            return None
        try:
            client = await machine.agent()
            status = await client.call("lifetime", wait=LIFETIME_WAIT)
        except (AgentError, AgentUnavailableError, TimeoutError) as exc:
            self.machines.log.debug("machine %s: no lifetime status: %s", name, exc)
            return None
        remaining = status.get("idle_stop_in")
        return float(remaining) if remaining is not None else None

    async def list_machines(self) -> list[dict[str, Any]]:
        """The machines this user has (open ones, cloud machines that have not
        ended, and targets with kernels), with their idle-stop countdowns."""
        models = self.view(await self._paths()).models()
        countdowns = await asyncio.gather(*(self.idle_stop_in(m["name"]) for m in models))
        for model, remaining in zip(models, countdowns, strict=True):
            model["idle_stop_in"] = remaining
        return models

    def _publish_machine(self, name: str, target: Target | None = None) -> dict[str, Any]:
        model = self.machine_model(name, target)
        self.events.publish("machine", machine=model)
        return model

    async def _cloud(self, action: str, record: MachineRecord, *args: Any, **kwargs: Any) -> None:
        """Run a provider's ``stop``, ``start`` or ``terminate`` on a cloud machine.

        Raises:
            HardwareRequestError: 502 with the provider's message when it fails.
        """
        provider = self.machines.providers.get(record.provider)
        try:
            await getattr(provider, action)(record, *args, **kwargs)
        except LaunchError as exc:
            failure = _launch_failure(exc)
            assert failure is not None
            raise failure from exc
        except Exception as exc:  # the provider's own errors say what failed
            raise HardwareRequestError(
                502,
                f"{action} {record.name} ({record.provider}) failed: {exc}",
                "name",
            ) from exc

    async def start_machine(self, name: Any) -> dict[str, Any]:
        """Start a stopped cloud machine, or connect to a target's host and start
        its agent (no kernel yet).

        Raises:
            HardwareRequestError: Unknown target, or the step that failed with its hint.
        """
        target = self.target(name, "name")
        steps = self.machines.steps(target.name, "")
        record = self._record(target.name)
        if record is not None and record.state not in ACTIVE_STATES:
            await self._cloud("start", record, steps=steps)
            return self._publish_machine(target.name, target)
        try:
            await self.machines.machine(target, steps)
        except LaunchError as exc:
            failure = _launch_failure(exc)
            assert failure is not None
            raise failure from exc
        return self._publish_machine(target.name, target)

    async def stop_machine(self, name: Any) -> dict[str, Any]:
        """Stop a cloud machine (its kernels end; its disk stays); on hardware the user
        owns (an SSH host, this machine), end its kernels and its agent, as a terminate
        does: the host itself keeps running. The answer is a terminate's, its state
        ``stopped``.

        Raises:
            HardwareRequestError: 409 for hardware that cannot be stopped from here.
        """
        target = self.target(name, "name")
        record = self._record(target.name)
        if record is None and target.provider in OWNED_PROVIDERS:
            return await self._end_everything(target, None, "stopped")
        if not hasattr(self.machines.providers.get(target.provider), "stop"):
            raise HardwareRequestError(409, unstoppable_note(target), "name")
        if record is None:
            raise HardwareRequestError(409, nothing_to_stop_note(target), "name")
        await self._cloud("stop", record)
        return self._publish_machine(target.name, target)

    async def terminate_machine(self, name: Any) -> dict[str, Any]:
        """End every kernel on a target that can be reached from here, then its agent
        (or, for a cloud machine, the machine itself).

        The kernels ended are this server's (hibernated ones with their saved state)
        and, on SSH hosts and this machine, those ``%%remote`` started from local
        kernels. What stays (a kernel another server started, one whose host could
        not be reached) is reported with why, and the machine's state is read after.

        Returns:
            The machine as it is now, with ``kernels_shut_down`` (ids),
            ``kernels_kept`` (``{"id", "reason"}`` each) and ``agent_stopped``.
        """
        target = self.target(name, "name")
        return await self._end_everything(target, self._record(target.name), "terminated")

    async def _end_everything(
        self, target: Target, record: MachineRecord | None, final: str
    ) -> dict[str, Any]:
        """End the kernels on ``target``, then its agent (or, with a ``record``, the
        cloud machine): the answer of a terminate, its state ``final`` when all ended."""
        ended = [
            k for k in self.kernel_manager.list_kernel_ids() if self.kernel_target(k) == target.name
        ]
        for kernel_id in ended:
            await self.kernel_manager.shutdown_kernel(kernel_id)
        if record is None and target.provider in OWNED_PROVIDERS:
            for remote in self.machines.ledger.kernels():
                if remote.target != target.name or not remote.owner.startswith(MAGIC_OWNER):
                    continue
                if await shut_down_on_host(self.machines, target, remote, self.machines.log):
                    ended.append(remote.kernel_id)
        if record is not None:
            await self._cloud("terminate", record)
        stopped = await self.machines.release_if_idle(target.name)
        model = self.machine_model(target.name, target)
        kept = [
            {"id": k["id"], "reason": _kept_reason(k)}
            for k in model["kernels"]
            if k["id"] not in ended
        ]
        if record is not None or stopped or not kept:
            model["state"] = final
        self.events.publish("machine", machine=model)
        return {**model, "kernels_shut_down": ended, "kernels_kept": kept, "agent_stopped": stopped}

    # ------------------------------------------------------------------ kernels

    def cancel_launch(self, kernel_id: str) -> None:
        """Cancel a kernel's launch under way: its start fails as cancelled, and what the
        launch started is undone (a SLURM job in the queue is cancelled).

        Raises:
            HardwareRequestError: 404 when no launch of that kernel is under way.
        """
        if not self.machines.cancel_launch(kernel_id):
            raise HardwareRequestError(
                404,
                f"no launch of kernel {kernel_id} is under way: it has started, "
                "failed or been cancelled already",
                "kernel_id",
            )

    async def start_kernel(self, name: Any, path: Any = None) -> str:
        """Start a kernel on a target; launch progress goes to the event hub.

        Returns:
            The new kernel's id.

        Raises:
            HardwareRequestError: Bad or unknown target, bad path, or the failed
                launch step with its hint.
        """
        target = self.target(name)
        if path is not None and not isinstance(path, str):
            raise HardwareRequestError(400, "'path' must be a string (the notebook's path)", "path")
        kwargs = {"path": path} if path else {}
        try:
            kernel_id: str = await self.kernel_manager.start_kernel(
                kernel_name=target.kernel_name, **kwargs
            )
        except Exception as exc:
            failure = _launch_failure(exc)
            if failure is None:
                raise
            raise failure from exc
        self._publish_machine(target.name, target)
        return kernel_id


__all__ = ["CARRY_ALL", "HardwareActions", "HardwareRequestError"]
