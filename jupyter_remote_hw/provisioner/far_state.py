"""Where a provisioner's kernel keeps its state while it hibernates, per provider: the
place its provider names (a SLURM cluster's shared home, an instance's disk; see
:meth:`..providers.base.Provider.hibernation_place`), or the server's store.

The store on our side holds every entry's manifest either way, so listing,
the cap and taking a kernel over after a server restart work alike; deleting
an entry removes its far directory too: through the woken kernel when it reads
the place, else through the provider that made it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..hibernation import EntryNotFoundError
from ..hibernation.errors import CorruptEntryError
from ..hibernation.far import FarAccess, FarPlace
from ..hibernation.warm import read_ahead
from ..transfer import TransferError
from ..transfer.variables import transfer_client
from .kernel_context import KernelContext

if TYPE_CHECKING:
    from ..providers.base import Provider


def _provider(p: KernelContext, name: str) -> Provider | None:
    provider: Provider | None = p.manager.providers.get(name)
    return provider


def _base(p: KernelContext) -> FarPlace | None:
    """The provider's place for the kernel's target now, or None (the store)."""
    target = p.resolved_target()
    provider = _provider(p, target.provider)
    return provider.hibernation_place(target) if provider is not None else None


def place_for(p: KernelContext) -> FarPlace | None:
    """Where the kernel writes its state when it hibernates now (a directory of its own
    in its provider's place), or None: into the store."""
    base = _base(p)
    return base.child(p.kernel_id) if base is not None else None


def access_for(p: KernelContext) -> FarAccess:
    """How a restore into the kernel (just started on its target) reaches state kept far:
    directly when its target's place is the same, else copied by the provider that
    made the place."""
    base = _base(p)

    async def read(place: FarPlace, path: str) -> memoryview:
        owner = _provider(p, place.provider)
        if owner is None:
            raise OSError(f"no {place.provider} provider here to read {place.label}")
        return await owner.read_hibernated(place, path)

    return FarAccess(base.host if base is not None else None, read)


async def warm_state(p: KernelContext) -> None:
    """Read the kernel's saved files ahead while it wakes (see
    :mod:`..hibernation.warm`): the store's here, else on the host of the place its
    provider made. Best effort: what fails is said in the log and changes nothing."""
    store = p.manager.hibernation_store
    try:
        entry = await asyncio.to_thread(store.entry, p.kernel_id)
    except EntryNotFoundError:
        return
    files = [
        str(v["file"])
        for v in entry.manifest.get("variables") or []
        if isinstance(v, dict) and isinstance(v.get("file"), str) and "/" not in v["file"]
    ]
    try:
        place = FarPlace.from_json(entry.far)
        if place is None:
            await read_ahead([entry.path / name for name in files])
            return
        owner = _provider(p, place.provider)
        if owner is not None:
            await owner.warm_hibernated(place, [f"{place.path.rstrip('/')}/{n}" for n in files])
    except (OSError, CorruptEntryError) as exc:
        p.log.info("kernel %s: its saved state was not read ahead: %s", p.kernel_id, exc)


async def delete_state(p: KernelContext, running: bool) -> None:
    """Delete the kernel's saved state: its directory where it is kept (through the kernel
    when ``running`` on a host that reads it, else through its provider), then the
    store's entry. A far directory that cannot be removed is said in the log."""
    store = p.manager.hibernation_store
    try:
        entry = await asyncio.to_thread(store.entry, p.kernel_id)
    except EntryNotFoundError:
        return
    place = FarPlace.from_json(entry.far)
    if place is not None:
        p.log.info("kernel %s: %s", p.kernel_id, await _remove(p, place, running))
    await asyncio.to_thread(store.delete, p.kernel_id)


async def keep_as_base(p: KernelContext) -> FarPlace | None:
    """After a wake: the store's entry goes; its directory, where the woken kernel reads
    it, stays as the base of the kernel's next save (which links what did not change
    from there); returns where, or None when it went too (kept elsewhere, or in the
    store)."""
    store = p.manager.hibernation_store
    try:
        entry = await asyncio.to_thread(store.entry, p.kernel_id)
    except EntryNotFoundError:
        return None
    place = FarPlace.from_json(entry.far)
    base = _base(p)
    if place is None or base is None or base.host != place.host or p.parent is None:
        await delete_state(p, running=True)
        return None
    try:
        async with transfer_client(p.parent, p.kernel_id) as client:
            await client.unstore(place.path, keep=True)
    except (TransferError, OSError, KeyError) as exc:
        p.log.info("kernel %s: its saved state was not kept as a base: %s", p.kernel_id, exc)
        await delete_state(p, running=True)
        return None
    await asyncio.to_thread(store.delete, p.kernel_id)
    return place.base()


async def drop_base(p: KernelContext, base: FarPlace) -> None:
    """The kernel ended awake: remove the base its last wake kept (best effort, said in
    the log), through the provider that made the place."""
    owner = _provider(p, base.provider)
    if owner is None:
        return
    try:
        p.log.info("kernel %s: %s", p.kernel_id, await owner.remove_hibernated(base))
    except OSError as exc:
        p.log.warning(
            "kernel %s: the base of its next save in %s on %s was not removed: %s",
            p.kernel_id,
            base.path,
            base.label,
            exc,
        )


async def _remove(p: KernelContext, place: FarPlace, running: bool) -> str:
    base = _base(p) if running else None
    if base is not None and base.host == place.host and p.parent is not None:
        try:
            async with transfer_client(p.parent, p.kernel_id) as client:
                await client.unstore(place.path)
            return f"its saved state in {place.path} on {place.label} removed"
        except (TransferError, OSError, KeyError) as exc:
            p.log.info("kernel %s: the kernel did not remove %s: %s", p.kernel_id, place.path, exc)
    owner = _provider(p, place.provider)
    if owner is None:
        return f"its saved state stays in {place.path} on {place.label} (no provider here)"
    try:
        return await owner.remove_hibernated(place)
    except OSError as exc:
        p.log.warning(
            "kernel %s: its saved state in %s on %s was not removed: %s",
            p.kernel_id,
            place.path,
            place.label,
            exc,
        )
        return f"its saved state stays in {place.path} on {place.label}"


__all__ = ["access_for", "delete_state", "drop_base", "keep_as_base", "place_for"]
