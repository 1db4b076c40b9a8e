"""``%%ranks``: run a cell on every rank of the allocation (or some), outputs by rank;
``%ranks``: the ranks' state, ``%ranks restart``, ``%ranks stop``.

Registered in every kernel that runs in a SLURM job (see ``kernel_handler``).
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import sys
import time
from typing import Any

from . import SAVED_NAME, saving
from .controller import Controller, RanksError, engine_command
from .wire import Message
from .world import World, WorldError, read_world

#: The running engines of this kernel, once a ``%%ranks`` cell started them.
_controller: Controller | None = None


class RanksUsageError(Exception):
    """A ``%%ranks`` line that cannot be run as written."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise RanksUsageError(f"%%ranks: {message}")


def _parser() -> _Parser:
    parser = _Parser(prog="%%ranks", add_help=False)
    parser.add_argument("--ranks", default="", help="which ranks: 0,2-3 (default all)")
    parser.add_argument("--in", dest="inputs", default="", help="names sent to every rank")
    parser.add_argument("--scatter", default="", help="lists whose item i goes to rank i")
    parser.add_argument("--out", default="", help="names gathered from every rank")
    parser.add_argument("--blocked-after", type=float, default=60.0)
    return parser


def live_ranks() -> list[dict[str, Any]]:
    """The ranks whose engines run now, ``{"rank", "node"}`` each (their state is in
    their own processes, not the kernel's to save)."""
    if _controller is None:
        return []
    return [{"rank": e.rank.rank, "node": e.rank.node} for e in _controller.live()]


def _selection(text: str, world: World) -> list[int]:
    if not text:
        return [r.rank for r in world.ranks]
    chosen: list[int] = []
    for part in text.split(","):
        try:
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                chosen += list(range(low, high + 1))
            else:
                chosen.append(int(part))
        except ValueError:
            raise RanksUsageError(f"%%ranks: --ranks {text!r}: use numbers such as 0,2-3") from None
    wrong = [r for r in chosen if not 0 <= r < world.size]
    if wrong:
        raise RanksUsageError(
            f"%%ranks: --ranks names {wrong}, but this allocation has ranks 0 to {world.size - 1}"
        )
    return list(dict.fromkeys(chosen))


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise RanksUsageError(f"%%ranks: {bad[0]!r} is not a variable name")
    return names


def _show(number: int, message: Message) -> None:
    """One rank's output in this cell, labelled with its rank."""
    from IPython.display import display

    kind = message.get("ev")
    label = f"[rank {number}] "
    if kind == "stream":
        stream = sys.stderr if message.get("name") == "stderr" else sys.stdout
        text = str(message.get("text", ""))
        lines = text.splitlines(keepends=True)
        stream.write(
            "".join(label + line for line in lines) + ("" if text.endswith("\n") else "\n")
        )
        stream.flush()
    elif kind in ("display", "result"):
        data: dict[str, Any] = dict(message.get("data") or {})
        if set(data) - {"text/plain"}:
            sys.stdout.write(label + ("Out:" if kind == "result" else "display:") + "\n")
            sys.stdout.flush()
        if "text/plain" in data:
            data["text/plain"] = label + ("Out: " if kind == "result" else "") + data["text/plain"]
        metadata = dict(message.get("metadata") or {})
        metadata["jupyter_remote_hw"] = {"rank": number}
        display(data, raw=True, metadata=metadata)  # type: ignore[no-untyped-call]
    elif kind == "error":
        sys.stderr.write(f"{label}{message.get('ename')}: {message.get('evalue')}\n")
        sys.stderr.flush()


def _say(text: str) -> None:
    """A line in the running cell."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def save_ranks(namespace: dict[str, Any]) -> dict[str, Any]:
    """Gather every rank's variables into ``namespace[SAVED_NAME]`` (see
    :func:`.saving.save`).

    Raises:
        RanksError: No ranks run, or one did not answer; nothing was gathered.
    """
    if _controller is None or not _controller.live():
        raise RanksError("no %%ranks engines run in this kernel: there is nothing to save")
    return saving.save(_controller, namespace)


def _started(user_ns: dict[str, Any] | None = None, say: Any = _say) -> Controller:
    global _controller
    if _controller is not None and _controller.live():
        return _controller
    try:
        world = read_world()
    except WorldError as exc:
        saved = (user_ns or {}).get(SAVED_NAME)
        waiting = (
            f"; the variables of {saved.get('size')} ranks saved when the kernel hibernated "
            f"wait in `{SAVED_NAME}` for an allocation of as many ranks"
            if isinstance(saved, dict)
            else ""
        )
        raise RanksUsageError(f"{exc}{waiting}") from None
    began = time.monotonic()
    say(
        f"starting {world.size} rank{'s' if world.size != 1 else ''} on "
        f"{', '.join(world.nodes)} (SLURM job {world.job_id})"
    )
    controller = Controller(world, engine_command())
    try:
        controller.start(say)
    except BaseException:
        controller.stop()
        raise
    plural = "s" if world.size != 1 else ""
    say(f"{world.size} rank{plural} ready in {time.monotonic() - began:.1f} s")
    if controller.unlinked:
        say(f"large values go through SLURM's relay, which is slower ({controller.unlinked})")
    saved = user_ns.get(SAVED_NAME) if user_ns is not None else None
    if user_ns is not None and isinstance(saved, dict):
        try:
            saving.restore(controller, saved, say, _show)
        except BaseException:
            controller.stop()  # all ranks or none: the saved variables stay for a retry
            raise
        del user_ns[SAVED_NAME]
    _controller = controller
    return controller


def ranks_cell(line: str, cell: str, user_ns: dict[str, Any]) -> None:
    """Run ``cell`` on the ranks ``line`` chooses (see the module's description)."""
    args = _parser().parse_args(shlex.split(line))
    controller = _started(user_ns)
    chosen = _selection(args.ranks, controller.world)
    inputs: dict[str, Any] = {}
    for name in _names(args.inputs):
        if name not in user_ns:
            raise RanksUsageError(f"%%ranks --in {name}: {name!r} is not defined here")
        inputs[name] = user_ns[name]
    scatter: dict[str, list[Any]] = {}
    for name in _names(args.scatter):
        value: Any = user_ns.get(name)
        if not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
            raise RanksUsageError(f"%%ranks --scatter {name}: {name!r} is not a list")
        if len(value) != len(chosen):
            raise RanksUsageError(
                f"%%ranks --scatter {name}: it has {len(value)} items for "
                f"{len(chosen)} ranks; give one item per rank"
            )
        scatter[name] = list(value)
    gathered = controller.run(
        cell,
        chosen,
        _show,
        inputs=inputs,
        scatter=scatter,
        outputs=_names(args.out),
        blocked_after=args.blocked_after,
    )
    user_ns.update(gathered)


def ranks_line(line: str, user_ns: dict[str, Any] | None = None) -> Any:
    """``%ranks``: the ranks' state; ``%ranks restart``; ``%ranks stop``."""
    global _controller
    word = line.strip()
    if word == "stop":
        if _controller is not None:
            _controller.stop()
        _controller = None
        _say("ranks stopped")
        return None
    if word == "restart":
        if _controller is not None:
            _controller.stop()
        _controller = None
        _started(user_ns)
        return None
    if word:
        raise RanksUsageError(f"%ranks {word}: use %ranks, %ranks restart or %ranks stop")
    saved = (user_ns or {}).get(SAVED_NAME)
    if _controller is None and isinstance(saved, dict):
        _say(
            f"the variables of {saved.get('size')} ranks were saved when the kernel "
            "hibernated: the first %%ranks cell starts the ranks and gives them back"
        )
        return None
    if _controller is None:
        _say("no ranks run yet: the first %%ranks cell starts them")
        return None
    for engine in _controller.engines.values():
        ready = engine.ready or {}
        state = "running" if engine.ended is None else f"ended: {engine.ended}"
        devices = f" GPU {ready.get('devices')}" if ready.get("devices") else ""
        values = "large values over its link" if engine.link else "values over SLURM's relay"
        _say(
            f"rank {engine.rank.rank} on {engine.rank.node}{devices} pid {ready.get('pid')}: "
            f"{state}; {values}"
        )
    return None


def _stop_at_exit() -> None:
    if _controller is not None:
        _controller.stop()


def register(ipython: Any) -> None:
    """Make ``%%ranks`` and ``%ranks`` available in ``ipython``."""

    def ranks(line: str, cell: str | None = None) -> Any:
        try:
            if cell is None:
                return ranks_line(line, ipython.user_ns)
            ranks_cell(line, cell, ipython.user_ns)
        except (RanksError, RanksUsageError) as exc:
            exc.__traceback__ = None
            raise exc from None
        return None

    ipython.register_magic_function(ranks, magic_kind="line_cell", magic_name="ranks")
    atexit.register(_stop_at_exit)


__all__ = [
    "live_ranks",
    "ranks_cell",
    "ranks_line",
    "register",
    "save_ranks",
]
