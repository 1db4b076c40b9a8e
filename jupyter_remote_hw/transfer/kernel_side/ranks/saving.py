"""What a hibernation keeps of a kernel's ranks, and giving it back to new ranks.

A save gathers every rank's variables, as pickles (never loaded in the notebook's
kernel), and the modules bound to names, into one hidden variable of the notebook's
kernel, :data:`SAVED_NAME`, which the kernel's own save stores with the rest. After
the wake, the first ``%%ranks`` cell starts the ranks and gives each its own back,
all ranks or none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import SAVED_NAME
from . import link as keyed
from .controller import Controller, RanksError
from .wire import Message, dumps, raw_pickle

#: Run on each rank when its variables are given back: binds its modules again.
RESTORE_IMPORTS = """\
def _ranks_import(modules, into):
    import importlib
    for name, module in modules:
        try:
            into[name] = importlib.import_module(module)
        except Exception as error:
            print(f"{name} ({module}) was not imported again: {error!r}")
_ranks_import(_ranks_modules, globals())
del _ranks_import, _ranks_modules
"""


def gather(controller: Controller, timeout: float = 600.0) -> dict[int, dict[str, Any]]:
    """Every rank's variables as pickles, its modules, and what it cannot keep:
    ``{rank: {"values": {name: bytes}, "types", "modules", "left_out"}}`` (see
    :meth:`.engine.Engine.save`); a rank that had ended before has ``ended``, its
    cause, and nothing else (its variables went with it).

    Raises:
        RanksError: A rank did not answer within ``timeout`` seconds, or ended
            while it was asked; nothing was kept.
    """
    live = {engine.rank.rank for engine in controller.live()}
    answers = controller.request(live, {"op": "save"}, "saved", "their variables", timeout)
    state: dict[int, dict[str, Any]] = {
        number: {"values": {}, "types": {}, "modules": [], "left_out": [], "ended": ended}
        for number, engine in controller.engines.items()
        if (ended := engine.ended) is not None
    }
    try:
        for number, message in answers.items():
            link = controller.engines[number].link
            state[number] = {
                "values": {
                    name: raw_pickle(field, link)
                    for name, field in dict(message.get("values") or {}).items()
                },
                "types": dict(message.get("types") or {}),
                "modules": list(message.get("modules") or []),
                "left_out": list(message.get("left_out") or []),
            }
    except keyed.BulkError as exc:
        raise RanksError(f"the ranks were not saved: {exc}") from None
    return dict(sorted(state.items()))


def save(controller: Controller, namespace: dict[str, Any]) -> dict[str, Any]:
    """Gather every rank's variables into ``namespace[SAVED_NAME]``, for a hibernation
    to save with the kernel's own; a wake gives them back to new ranks at the first
    ``%%ranks`` cell (all ranks or none).

    Returns:
        ``name``, how many ``ranks``, ``variables`` and ``nbytes`` were gathered, and
        ``left_out`` (``{"name": "rank R: NAME", "type" or "module", "reason"}``).

    Raises:
        RanksError: A rank did not answer, or ended while it was asked; nothing
            was gathered.
    """
    state = gather(controller)
    namespace[SAVED_NAME] = {"size": controller.world.size, "ranks": state}
    left_out = [
        {**entry, "name": f"rank {number}: {entry['name']}"}
        for number, rank in state.items()
        for entry in rank["left_out"]
    ]
    left_out.extend(
        {
            "name": f"rank {number}",
            "type": "%%ranks engine",
            "reason": f"it had ended before the save ({rank['ended']}), and its variables "
            "with it; the wake starts it anew",
        }
        for number, rank in state.items()
        if rank.get("ended")
    )
    return {
        "name": SAVED_NAME,
        "ranks": len(state),
        "variables": sum(len(rank["values"]) for rank in state.values()),
        "nbytes": sum(len(data) for rank in state.values() for data in rank["values"].values()),
        "left_out": left_out,
    }


def drop(namespace: dict[str, Any]) -> None:
    """Drop what :func:`save` gathered (after the kernel's save, or when it failed)."""
    namespace.pop(SAVED_NAME, None)


def restore(
    controller: Controller,
    saved: dict[str, Any],
    say: Callable[[str], None],
    show: Callable[[int, Message], None],
) -> None:
    """Give every rank the variables a hibernation saved (see :func:`save`).

    Raises:
        RanksError: This allocation has another number of ranks, or a rank could not
            take its variables back.
    """
    if int(saved.get("size") or 0) != controller.world.size:
        raise RanksError(
            f"the ranks' variables were saved from {saved.get('size')} ranks, and this "
            f"allocation has {controller.world.size}: they were not given back. They "
            f"are kept in `{SAVED_NAME}`; `del {SAVED_NAME}` drops them"
        )
    ranks: dict[int, dict[str, Any]] = {int(n): r for n, r in dict(saved["ranks"]).items()}
    say(
        f"giving the {len(ranks)} ranks the variables saved when the kernel hibernated "
        f"({sum(len(r['values']) for r in ranks.values())} variables)"
    )
    pickled = {
        number: {
            **rank["values"],
            "_ranks_modules": dumps([(m["name"], m["module"]) for m in rank["modules"]]),
        }
        for number, rank in ranks.items()
    }
    controller.run(RESTORE_IMPORTS, sorted(ranks), show, pickled=pickled)
    for number, rank in sorted(ranks.items()):
        given = sorted(
            [f"{n} ({rank['types'].get(n, '?')})" for n in rank["values"]]
            + [f"{m['name']} (module {m['module']})" for m in rank["modules"]]
        )
        say(f"rank {number}: {', '.join(given) or 'nothing to give back'}")


__all__ = ["RESTORE_IMPORTS", "SAVED_NAME", "drop", "gather", "restore", "save"]
