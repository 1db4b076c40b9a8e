"""Restoring saved state into a fresh kernel: every variable, or none.

Every part is read back and checked against its checksum before the kernel is
asked anything. The kernel then changes to the saved working directory (when
it exists there), imports the saved modules, and receives all the variables
in one transfer that it assigns whole or not at all. The store is never
changed here: the caller deletes the entry once it no longer needs it.

Tensors and modules go back to the device the save recorded for their
variable (``cuda:0`` ...) when the kernel has it; when it does not (woken on a
machine without CUDA, or with fewer GPUs), or the variable held tensors on
several devices, or moving it there fails, the variable stays on the CPU and
a note names it and the device: a missing device never fails a wake. A
``device`` given to :func:`restore` puts everything there instead. Open comms
the save left out (widgets) are said in a note too.
"""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..transfer import TransferError
from ..transfer.client import TransferClient
from ..transfer.kernel_side.devices import MIXED
from ..transfer.kernel_side.errors import RefusedVariableError
from ..transfer.kernel_side.restricted import restriction
from ..transfer.variables import Kernels, answering, kernel_manager_of, transfer_client
from .errors import EntryNotFoundError, HibernationError, RestoreError
from .far import FarAccess, FarPlace, read_through, unreadable
from .progress import Progress, Steps
from .store import HibernationStore, size_text

log = logging.getLogger(__name__)


@dataclass
class RestoreSummary:
    """What a restore put back.

    Attributes:
        entry_id: The entry restored (still in the store).
        assigned: ``{"name", "type"}`` of each variable assigned.
        imported: ``{"name", "module"}`` of each module imported.
        cwd: The kernel's working directory now.
        cwd_restored: Whether that is the saved one (false when it does not exist
            where the kernel runs; ``notes`` says so).
        left_out: What the save had left out, with the reasons (not restored).
        devices: Where the variables whose tensors or modules were on a device
            other than the CPU went (``{"t": "cuda:0"}``); those left on the CPU
            instead are named in ``notes``.
        notes: What the user should be told (the saved directory is missing, a
            variable stays on the CPU, widgets must be displayed again ...).
        total_bytes: Bytes of the variables sent.
        seconds: How long it took.
    """

    entry_id: str
    assigned: list[dict[str, Any]] = field(default_factory=list)
    imported: list[dict[str, str]] = field(default_factory=list)
    cwd: str = ""
    cwd_restored: bool = False
    left_out: list[dict[str, Any]] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    total_bytes: int = 0
    seconds: float = 0.0


async def _change_directory(client: TransferClient, saved: str) -> tuple[str, str | None]:
    """Make the kernel's working directory ``saved``; the directory it is in after, and
    a note when that is not ``saved``."""
    os_ = "__import__('os')"
    answer = await client.link.evaluate(
        {
            "cwd": f"{os_}.chdir({saved!r}) or {os_}.getcwd()",
            "here": f"{os_}.getcwd()",
        }
    )
    moved, here = answer.get("cwd") or {}, answer.get("here") or {}
    if moved.get("status") == "ok":
        return str(_literal(moved)), None
    where = str(_literal(here)) if here.get("status") == "ok" else "?"
    return where, (
        f"the saved working directory {saved} cannot be entered there "
        f"({moved.get('ename')}: {moved.get('evalue')}): the kernel stays in "
        f"{where}"
    )


def _literal(answer: dict[str, Any]) -> Any:
    return ast.literal_eval(answer["data"]["text/plain"])


#: How many CUDA devices a kernel has (an error where torch cannot be imported).
_CUDA_COUNT = (
    "(lambda t: t.cuda.device_count() if t.cuda.is_available() else 0)(__import__('torch'))"
)


async def _cuda_devices(client: TransferClient) -> tuple[int, str]:
    """How many CUDA devices the kernel has, and how to say that when it is too few."""
    answer = (await client.link.evaluate({"count": _CUDA_COUNT})).get("count") or {}
    if answer.get("status") != "ok":
        return 0, (
            f"torch cannot be imported there ({answer.get('ename')}: {answer.get('evalue')})"
        )
    count = int(_literal(answer))
    return count, (
        "the kernel has no CUDA device"
        if count == 0
        else f"the kernel has {count} CUDA device{'s' if count > 1 else ''}"
    )


def _on_cpu(name: str, device: str, why: str) -> str:
    return f"{name!r} was on {device} when it hibernated, and {why}: it is on the CPU now"


async def _placement(
    client: TransferClient, recorded: dict[str, Any], names: set[str]
) -> tuple[dict[str, str], list[str]]:
    """Where each restored variable goes (``{"t": "cuda:0"}``: the others stay on the
    CPU), and a note for each that cannot go where the save recorded it."""
    wanted = {
        name: str(device)
        for name, device in recorded.items()
        if name in names and device and device != "cpu"
    }
    placement: dict[str, str] = {}
    notes: list[str] = []
    count, why = 0, ""
    if any(device.startswith("cuda") for device in wanted.values()):
        count, why = await _cuda_devices(client)
    for name, device in sorted(wanted.items()):
        kind, _, index = device.partition(":")
        if device == MIXED:
            notes.append(
                f"{name!r} held tensors on several devices when it hibernated: it is on the CPU now"
            )
        elif kind != "cuda" or not (index or "0").isdigit():
            notes.append(_on_cpu(name, device, "only CUDA devices are put back"))
        elif int(index or 0) >= count:
            notes.append(_on_cpu(name, device, why))
        else:
            placement[name] = device
    return placement, notes


def _placed(summary: RestoreSummary, device: str | None, recorded: dict[str, Any]) -> None:
    """Record where the kernel put each variable holding tensors or modules (those in
    ``recorded``, the save's devices), and note those it could not put there."""
    for item in summary.assigned:
        name, went = str(item["name"]), item.get("device")
        if item.get("reason"):
            summary.notes.append(
                f"{name!r} could not be put back on its device ({item['reason']}): it is "
                "on the CPU now"
            )
        elif went and went != "cpu":
            summary.devices[name] = str(went)
        elif device and device != "cpu" and name in recorded:
            summary.devices[name] = device


async def _refused_left_out(
    summary: RestoreSummary,
    names: list[str],
    assign: Callable[[list[str]], Awaitable[list[dict[str, Any]]]],
) -> list[dict[str, Any]]:
    """``assign(names)``; where the restricted loader refuses a variable (one whose pickle
    calls more than data types, from a kernel that someone else could run code in), it is
    left out with the reason and the others are assigned: a wake never runs their code,
    and never fails for it."""
    remaining = list(names)
    while True:
        try:
            return await assign(remaining)
        except RefusedVariableError as exc:
            if exc.name not in remaining:
                raise
            remaining.remove(exc.name)
            summary.left_out.append({"name": exc.name, "reason": str(exc)})


async def restore(
    kernel_manager: Kernels,
    kernel_id: str,
    store: HibernationStore,
    entry_id: str,
    device: str | None = None,
    progress: Progress | None = None,
    far: FarAccess | None = None,
    restricted: dict[str, Any] | None = None,
) -> RestoreSummary:
    """Put saved state back into a kernel: working directory, modules, variables.

    Meant for a freshly started kernel (a restore into a kernel that already
    has variables overwrites those of the same names and keeps the others).

    Args:
        kernel_manager: The server's kernel manager, or the kernel's own manager
            (a provisioner's parent); an async one.
        kernel_id: The kernel to restore into.
        store: Where the state is.
        entry_id: The entry (the hibernated kernel's id).
        device: Where every arriving tensor and module goes (``cuda``), for a
            wake on a target other than the saved one; a device the kernel
            lacks then fails the restore. None: each variable goes back to
            the device the save recorded for it, where the kernel has it, and
            stays on the CPU with a note where it has not.
        progress: Called with (step, bytes done, bytes in all): see :mod:`.progress`.
        far: For an entry kept on a kernel's host (see :mod:`.far`): which place the
            kernel reads itself, and how to copy the files through here otherwise.
        restricted: The state comes from a kernel that someone else could run code in:
            the kernel rebuilds the variables with the restricted loader (see
            ``transfer.restricted.restriction``); None: with plain pickle.

    Returns:
        What was restored, and what the user should be told.

    Raises:
        EntryNotFoundError: No entry with that id.
        RestoreError: A step failed (named, with what failed: a part that does
            not match what was written, a module the kernel cannot import, a
            variable it cannot rebuild). No variable was assigned; the kernel
            may have changed directory and imported modules, so a retry into
            the same kernel is safe. The entry is untouched either way.
        KeyError: No kernel with that id.
    """
    began = time.monotonic()
    steps = Steps(progress)
    what = (
        "restoring the kernel's saved state"
        if entry_id == kernel_id
        else "restoring another kernel's saved state into this one"
    )
    kernel_manager_of(kernel_manager, kernel_id)
    try:
        info = await steps.in_thread(store.entry, entry_id)
        if info.problem:
            raise RestoreError(
                f"{what} failed: {info.problem}. Nothing was restored; the "
                "saved state is as it was.",
                "reading saved state",
            )
        total = int(info.manifest.get("total_bytes") or 0)
        place = FarPlace.from_json(info.far)
        direct = place is not None and far is not None and far.here == place.host
        if place is None:
            manifest, pickled = await steps.in_thread(
                store.read, entry_id, steps.from_thread("reading saved state", total)
            )
        else:
            manifest, pickled = info.manifest, []
            if not direct:
                if far is None or far.read is None:
                    raise unreadable(place, what)
                steps.step(f"copying saved state from {place.label}")
                pickled = await read_through(place, list(manifest["variables"]), far.read)
        if restricted is None and manifest.get("run_by_others"):  # saved marked: the mark holds
            restricted = restriction("the kernel as it was saved (others could run code in it)")
        summary = RestoreSummary(
            entry_id,
            left_out=list(manifest.get("left_out") or []),
            total_bytes=total if direct else sum(item.nbytes for item in pickled),
        )
        steps.step("reaching the kernel")
        async with transfer_client(kernel_manager, kernel_id) as client:
            client.restricted = restricted
            hello = await answering(client)
            saved_python, python = manifest.get("python"), hello.get("python_version")
            if saved_python and python and saved_python != python:
                summary.notes.append(
                    f"the state was saved from Python {saved_python} and "
                    f"is restored into Python {python}"
                )
            steps.step("changing directory")
            summary.cwd, note = await _change_directory(client, str(manifest.get("cwd") or "."))
            summary.cwd_restored = note is None
            if note:
                summary.notes.append(note)
            modules = list(manifest.get("modules") or [])
            steps.step("importing modules")
            answer = await client.import_modules(modules)
            if answer["failed"]:
                raise RestoreError(
                    f"{what} failed: "
                    + "; ".join(
                        f"module {f['module']} (as {f['name']}) cannot be imported "
                        f"there: {f['reason']}"
                        for f in answer["failed"]
                    )
                    + ". No variable was assigned and the saved state is as it was; install "
                    "the module there and try again.",
                    steps.current,
                )
            summary.imported = list(answer["imported"])
            recorded = dict(manifest.get("devices") or {})
            placement: str | dict[str, str] | None = device
            if device is None:
                placement, notes = await _placement(
                    client, recorded, {str(v["name"]) for v in manifest.get("variables") or []}
                )
                summary.notes.extend(notes)
            if direct and place is not None:
                steps.step(f"reading saved state on {place.label}")
                saved = list(manifest["variables"])
                summary.assigned = await _refused_left_out(
                    summary,
                    [str(v["name"]) for v in saved],
                    lambda names: client.load(
                        place.path, [v for v in saved if v["name"] in names], placement
                    ),
                )
            elif pickled:
                sent = steps.bytes("sending variables", summary.total_bytes)
                summary.assigned = await _refused_left_out(
                    summary,
                    [item.name for item in pickled],
                    lambda names, items=pickled: client.push(  # type: ignore[misc]
                        [item for item in items if item.name in names], placement, sent
                    ),
                )
            _placed(summary, device, recorded)
            del pickled
    except (EntryNotFoundError, RestoreError):
        raise
    except Exception as exc:
        why = (
            str(exc)
            if isinstance(exc, HibernationError | TransferError)
            else f"{type(exc).__name__}: {exc}"
        )
        raise RestoreError(
            f"{what} failed while {steps.current}: {why}. No variable was "
            "assigned and the saved state is as it was; try again.",
            steps.current,
        ) from exc
    summary.notes.extend(
        f"not restored: {e['name']} ({e['reason']})" for e in summary.left_out if e.get("comm")
    )
    summary.seconds = time.monotonic() - began
    steps.step("restored", summary.total_bytes, summary.total_bytes)
    log.info(
        "kernel %s restored into %s: %d variables, %s, %d modules, in %.1f s%s",
        entry_id,
        kernel_id,
        len(summary.assigned),
        size_text(summary.total_bytes),
        len(summary.imported),
        summary.seconds,
        "".join(f"; {n}" for n in summary.notes),
    )
    return summary


def wake_notice(summary: RestoreSummary) -> str | None:
    """What the user of a woken kernel must know, for its notebook: what the save left
    out and why (those names are not defined in it), and where variables were not
    put back as saved; None when everything came back as it was."""
    lines = []
    for left in summary.left_out:
        what = left.get("type") or left.get("module") or ""
        kind = "open comms of" if left.get("comm") else ""
        name = f"{kind} {left.get('name')}".strip()
        lines.append(f"  {name}{f' ({what})' if what else ''}: {left.get('reason')}")
    others = [n for n in summary.notes if not n.startswith("not restored: ")]
    if not lines and not others:
        return None
    text = "[jupyter-remote-hw] This kernel woke from hibernation."
    if lines:
        text += " Not restored, because its save left them out:\n" + "\n".join(lines)
    if others:
        text += "\n" + "\n".join(f"  {n}" for n in others)
    return text + "\n"


__all__ = ["RestoreSummary", "restore", "wake_notice"]
