"""``jupyter remote-hw reap`` for SLURM: cancel the allocations whose kernels are gone."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..providers.slurm.provider import SLURMProvider

if TYPE_CHECKING:
    from ..machines import MachineManager


async def reap_slurm(
    manager: MachineManager,
    say: Callable[[str], None],
    confirm: Callable[[str, bool], bool],
    yes: bool,
) -> list[str]:
    """List our jobs whose kernels are gone (the agent in each running job is asked),
    and cancel them once confirmed.

    Args:
        manager: The process's machine manager (its ledger says which kernels live).
        say: Prints a line for people.
        confirm: Asks a yes/no question (``yes`` answers it ahead).
        yes: Do not ask.

    Returns:
        The cancelled job ids.
    """
    provider = manager.providers.get("slurm")
    if not isinstance(provider, SLURMProvider) or not provider.clusters:
        return []
    live = {record.target for record in manager.ledger.kernels()}
    # With ``yes`` nothing is asked: one look at the cluster cancels at once. Otherwise
    # the jobs are looked at again once confirmed (a kernel may have come meanwhile).
    doomed, unknown = await provider.reap(live, dry_run=not yes)
    if unknown:
        say(
            f"left running: SLURM jobs {', '.join(unknown)}: tagged as yours, but not "
            "submitted from this ledger (another Jupyter server's?). Check them, and "
            "scancel them yourself if they are yours."
        )
    if not doomed:
        say("nothing to reap on SLURM: no job of this ledger is left without a live kernel")
        return []
    if yes:
        say(f"cancelled SLURM jobs {', '.join(doomed)}")
        return doomed
    if not confirm(
        f"Cancel SLURM jobs {', '.join(doomed)} (no kernel lives in them, asked on the cluster)?",
        yes,
    ):
        say("nothing cancelled")
        return []
    cancelled, _ = await provider.reap(live)
    say(f"cancelled SLURM jobs {', '.join(cancelled) or 'none'}")
    return cancelled


__all__ = ["reap_slurm"]
