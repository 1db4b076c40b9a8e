"""Saving a kernel's state into the store: all of it that can be saved, or nothing.

The kernel is only read: its variables are pickled there and pulled here with
the transfer machinery (out-of-band buffers, cloudpickle for notebook-defined
code), so a failure at any step leaves it running as it was, and the store as
it was (see :meth:`.store.HibernationStore.write`).

Where each variable's tensors and modules lived (``cpu``, ``cuda:0``, or
``mixed`` across devices) is recorded in the manifest's ``devices``, read from
the tensors' ``device`` there (nothing is copied for it); a wake puts them
back there (see :mod:`.restore`). The kernel's open comms (widgets) are
listed as left out, by target, and never block a save: see :func:`open_comms`.
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ..transfer import TransferError
from ..transfer.client import TransferClient
from ..transfer.kernel_side.errors import NotSerializableError
from ..transfer.kernel_side.ranks import SAVED_NAME
from ..transfer.variables import (
    Kernels,
    is_busy,
    kernel_manager_of,
    listing,
    others_could_run_code,
    ranks_phrase,
    transfer_client,
)
from . import far as far_side
from .errors import HibernationError, SaveError, UnsavableStateError
from .progress import Progress, Steps
from .store import EntryInfo, HibernationStore, size_text

log = logging.getLogger(__name__)
_Pulled = TypeVar("_Pulled")

#: What to do with variables or modules that cannot be saved: save the rest and
#: say what was left (``partial``), or save nothing and say why (``refuse``).
Policy = Literal["partial", "refuse"]
POLICIES: tuple[Policy, ...] = ("partial", "refuse")

#: The expression that gives a kernel's working directory.
_CWD = "__import__('os').getcwd()"


@dataclass
class SaveSummary:
    """What a save stored.

    Attributes:
        entry: The stored entry (its id, directory, bytes on disk, manifest).
        saved: ``{"name", "type", "nbytes"}`` of each variable saved.
        modules: ``{"name", "module"}`` of each module to import again.
        left_out: ``{"name", "type" or "module", "reason"}`` of what was not saved,
            and ``{"name", "comm", "count", "reason"}`` per target of the open
            comms (widgets), which are never saved (see :func:`open_comms`).
        cwd: The kernel's working directory.
        seconds: How long the save took.
    """

    entry: EntryInfo
    saved: list[dict[str, Any]] = field(default_factory=list)
    modules: list[dict[str, str]] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    cwd: str = ""
    seconds: float = 0.0

    @property
    def total_bytes(self) -> int:
        """Bytes of the saved variables (pickle streams and buffers)."""
        return sum(int(v["nbytes"]) for v in self.saved)


def _named(entries: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"{e['name']!r} ({e.get('type') or e.get('module')}): {e['reason']}" for e in entries
    )


def unsaved(found: dict[str, Any]) -> list[dict[str, Any]]:
    """What a kernel's listing says cannot be saved, each with its reason."""
    left: list[dict[str, Any]] = [
        {"name": v["name"], "type": v["type"], "reason": v.get("reason") or "it cannot be pickled"}
        for v in found["variables"]
        if not v.get("carriable", True)
    ]
    left.extend(
        {
            "name": m["name"],
            "module": m["module"],
            "reason": m.get("reason") or "it cannot be imported by name",
        }
        for m in found["modules"]
        if not m.get("importable", True)
    )
    return left


#: Why open comms of a target do not come along, by target; others get :data:`_COMMS`.
_COMM_REASONS = {
    "jupyter.widget": "open widgets must be displayed again after waking (run the cells "
    "that display them)",
}
_COMMS = "open comms do not survive a wake: what opened them must open them again"


#: How the kernel's hidden variable that holds its ``%%ranks`` engines' variables
#: (:data:`.kernel_side.ranks.SAVED_NAME`) is named to the user.
RANKS_TYPE = "every rank's variables"


def open_comms(found: dict[str, Any]) -> list[dict[str, Any]]:
    """The open comms of a kernel's listing (widgets and other comm targets), one
    entry per target name: ``{"name", "comm", "count", "reason"}``.

    They are left out of every save, and never block one (not even under
    ``refuse``): a kernel that merely displayed a widget would otherwise never
    hibernate, and what a comm showed is, for the notebook, one cell away.
    """
    return [
        {
            "name": str(comm["target"]),
            "comm": str(comm["target"]),
            "count": int(comm.get("count") or 1),
            "reason": _COMM_REASONS.get(str(comm["target"]), _COMMS),
        }
        for comm in found.get("comms") or []
    ]


async def _cwd(client: TransferClient) -> str:
    answer = (await client.link.evaluate({"cwd": _CWD})).get("cwd") or {}
    if answer.get("status") != "ok":
        raise SaveError(
            f"the kernel on {client.where} did not say its working directory "
            f"({answer.get('ename')}: {answer.get('evalue')})"
        )
    return str(ast.literal_eval(answer["data"]["text/plain"]))


async def _pull(
    pull: Callable[[list[str]], Awaitable[_Pulled]],
    names: list[str],
    policy: Policy,
    left: list[dict[str, Any]],
    types: dict[str, str],
) -> _Pulled:
    """Pull ``names`` (here, or into files on the kernel's host); under ``partial``, one
    that fails to pickle there (which the listing's trial did not foresee) is left out,
    named in ``left``, and the rest pulled again."""
    remaining = list(names)
    while True:
        try:
            return await pull(remaining)
        except NotSerializableError as exc:
            entry = {"name": exc.name, "type": exc.type_name, "reason": exc.reason}
        except TransferError as exc:
            if exc.name is None or exc.name not in remaining:
                raise
            entry = {"name": exc.name, "type": types.get(exc.name, "?"), "reason": str(exc)}
        if policy == "refuse" or entry["name"] not in remaining:
            raise UnsavableStateError(
                f"kernel state cannot be saved whole: {_named([entry])}. Nothing was saved "
                "and the kernel keeps running as it was.",
                [entry],
            )
        log.info("hibernation: %r left out: %s", entry["name"], entry["reason"])
        remaining.remove(str(entry["name"]))
        left.append(entry)


async def save(
    kernel_manager: Kernels,
    kernel_id: str,
    store: HibernationStore,
    policy: Policy = "partial",
    progress: Progress | None = None,
    entry_id: str | None = None,
    far: far_side.FarPlace | None = None,
) -> SaveSummary:
    """Save a kernel's variables, the modules bound to names, and its working directory.

    Call it while the kernel is idle; the kernel is only read, never changed
    (a plain IPython kernel gets the transfer handler loaded, which adds nothing
    to its namespace). The caller releases the kernel's hardware afterwards, or
    not: this does not stop anything.

    Args:
        kernel_manager: The server's kernel manager, or the kernel's own manager
            (a provisioner's parent); an async one.
        kernel_id: The kernel.
        store: Where the state goes.
        policy: ``partial``: save what can be saved and list what was left out;
            ``refuse``: when a variable or module cannot be saved, save nothing
            and raise (open comms never count: they are listed as left out).
        progress: Called with (step, bytes done, bytes in all): see :mod:`.progress`.
        entry_id: The entry's id (default: ``kernel_id``); an older entry of that
            id is replaced once the new one is stored whole.
        far: Where on the kernel's side the kernel writes its variables itself (see
            :mod:`.far`; the store keeps the manifest); None: into the store.

    Returns:
        What was saved, what was left out and why, and the stored entry.

    Raises:
        UnsavableStateError: ``refuse``, and something cannot be saved (named,
            with the reason).
        StoreFullError: It would take the store beyond its cap (sizes named).
        SaveError: Any other failure (the kernel died, the link broke, the disk
            filled up), naming the step and chaining the cause. In every case nothing
            was stored and the kernel runs on as it was.
        asyncio.CancelledError: The caller was cancelled (the user came back
            while it saved): it returns once nothing more is written, and
            nothing was stored (an older entry of the id is kept).
        KeyError: No kernel with that id.
    """
    if policy not in POLICIES:
        raise ValueError(f"hibernation policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    began = time.monotonic()
    entry_id = entry_id or kernel_id
    store.entry_path(entry_id)  # a bad id fails before the kernel is asked anything
    manager = kernel_manager_of(kernel_manager, kernel_id)
    steps = Steps(progress)
    try:
        steps.step("listing variables")
        async with transfer_client(kernel_manager, kernel_id) as client:
            found = await listing(client, is_busy(kernel_manager, kernel_id))
            ranks: dict[str, Any] | None = None
            if found.get("ranks"):
                steps.step(f"gathering the variables of {ranks_phrase(found['ranks'])}")
                ranks = await client.save_ranks()
            try:
                left = unsaved(found)
                if ranks is not None:
                    left.extend(ranks["left_out"])
                if left and policy == "refuse":
                    raise UnsavableStateError(
                        f"the kernel holds what cannot be saved: {_named(left)}. Nothing "
                        "was saved and the kernel keeps running as it was.",
                        left,
                    )
                left.extend(open_comms(found))
                carried = [v for v in found["variables"] if v.get("carriable", True)]
                devices = {v["name"]: str(v["device"]) for v in carried if v.get("device")}
                estimate = sum(int(v.get("nbytes") or 0) for v in carried)
                estimate += int(ranks["nbytes"]) if ranks is not None else 0
                await steps.in_thread(store.check_room, entry_id, estimate, 0 if far else None)
                steps.step("asking the working directory")
                cwd = await _cwd(client)
                python = (await client.hello()).get("python_version")
                modules = [
                    {"name": m["name"], "module": m["module"]}
                    for m in found["modules"]
                    if m.get("importable", True)
                ]
                manifest = {
                    "kernel_id": kernel_id,
                    "kernel_name": manager.kernel_name,
                    "target": _target(manager),
                    "cwd": cwd,
                    "modules": modules,
                    "left_out": left,
                    "python": python,
                    # One left out while pulling keeps its device here: a restore looks
                    # only at the variables it restores.
                    "devices": devices,
                    # Someone else could run code in it: a wake rebuilds it restricted.
                    "run_by_others": await others_could_run_code(kernel_manager, kernel_id),
                }
                names = [v["name"] for v in carried]
                types = {v["name"]: v["type"] for v in carried}
                # Gathered now, or gathered by an earlier save and not given back yet
                # (woken, idle again before a %%ranks cell): hidden, so not listed.
                held = ranks if ranks is not None else found.get("ranks_saved")
                if held:
                    names.append(str(held["name"]))
                    types[str(held["name"])] = RANKS_TYPE
                if far is not None:
                    entry = await _save_far(
                        client, store, entry_id, manifest, far, steps, names, policy, types
                    )
                else:
                    pickled = await _pull(
                        lambda names: client.pull(
                            names, steps.bytes("reading variables", estimate)
                        ),
                        names,
                        policy,
                        left,
                        types,
                    )
            finally:
                if ranks is not None:
                    await client.unsave_ranks()  # the kernel is as it was
        if far is None:
            total = sum(item.nbytes for item in pickled)
            moved = steps.from_thread("writing", total)
            entry = await steps.in_thread(store.write, entry_id, manifest, pickled, moved)
            del pickled
    except HibernationError:
        raise
    except Exception as exc:
        raise SaveError(
            f"saving the kernel's state failed while {steps.current}: "
            f"{type(exc).__name__}: {exc}. Nothing was saved and the kernel "
            "keeps running as it was.",
            steps.current,
        ) from exc
    saved = [
        {"name": v["name"], "type": v["type"], "nbytes": v["nbytes"]}
        if v["name"] != SAVED_NAME
        else {"name": "%%ranks", "type": RANKS_TYPE, "nbytes": v["nbytes"]}
        for v in entry.manifest["variables"]
    ]
    summary = SaveSummary(entry, saved, modules, left, cwd, time.monotonic() - began)
    steps.step("saved", summary.total_bytes, summary.total_bytes)
    log.info(
        "kernel %s saved: %d variables, %s, %d modules, %d left out, in %.1f s",
        kernel_id,
        len(saved),
        size_text(summary.total_bytes),
        len(modules),
        len(left),
        summary.seconds,
    )
    return summary


async def _save_far(
    client: TransferClient,
    store: HibernationStore,
    entry_id: str,
    manifest: dict[str, Any],
    far: far_side.FarPlace,
    steps: Steps,
    names: list[str],
    policy: Policy,
    types: dict[str, str],
) -> EntryInfo:
    """Have the kernel write its variables into ``far``, then store the manifest; on any
    failure (or cancellation) what the kernel wrote is removed again."""
    steps.step(f"writing on {far.label}")
    room = await steps.in_thread(store.room, entry_id)
    try:
        written = await _pull(
            lambda names: far_side.write(client, far, names, room, store.min_free_bytes),
            names,
            policy,
            manifest["left_out"],
            types,
        )
        return await steps.in_thread(
            store.write_far,
            entry_id,
            {**manifest, "far": far.to_json()},
            list(written["variables"]),
            int(written["total_bytes"]),
        )
    except BaseException:
        await far_side.unwrite(client, far)
        raise


def _target(manager: Any) -> str | None:
    """The hardware target of a kernel our provisioner started, or None."""
    target = getattr(getattr(manager, "provisioner", None), "target", None)
    return target if isinstance(target, str) else None


__all__ = ["POLICIES", "Policy", "SaveSummary", "open_comms", "save", "unsaved"]
