"""Hibernated state kept on the kernel's side: on a disk its host reaches (a SLURM
cluster's shared home, an instance's own disk) rather than on the Jupyter server's.

The kernel writes its variables there itself (the transfer handler's ``store``
op: the same pickles and out-of-band buffers a transfer sends, written into a
temporary directory, flushed and renamed into place), so the bytes never cross
the network. The store on our side keeps only the entry's manifest, whose
``far`` says where the data lives (:class:`FarPlace`) and whose
``variables`` carry each file's sizes and digest.

A kernel whose host reads the place (the same ``host`` key: the same instance,
or any allocation of the same cluster) reads the files itself (the ``load``
op); any other kernel gets them copied through our side, read by the provider
that made the place (:class:`FarAccess`), each checked before it is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..transfer import Pickled, TransferError
from ..transfer.client import TransferClient
from ..transfer.kernel_side.state_files import matches, unreadable_because
from .errors import CorruptEntryError, RestoreError

log = logging.getLogger(__name__)

#: Seconds given to removing a place's files through a kernel after a failed save.
CLEANUP_WAIT = 30.0


@dataclass(frozen=True)
class FarPlace:
    """A directory on a kernel's host side where its hibernated state is kept.

    Attributes:
        provider: The provider that made it, and that reads or removes it from here.
        host: Who can read it: kernels whose place has the same ``host`` read it
            directly (``slurm:<cluster>``, ``aws:<instance id>``).
        path: The directory (``~`` is the host user's home).
        label: Where it is, for people (``the home of SLURM cluster dev``).
    """

    provider: str
    host: str
    path: str
    label: str

    def child(self, name: str) -> FarPlace:
        """The place of one entry in this directory."""
        return FarPlace(self.provider, self.host, f"{self.path.rstrip('/')}/{name}", self.label)

    def base(self) -> FarPlace:
        """Where this entry is kept, once its kernel woke, as the base of its next save
        (see :mod:`..transfer.kernel_side.state_files`)."""
        parent, _, name = self.path.rstrip("/").rpartition("/")
        return FarPlace(self.provider, self.host, f"{parent}/.base-{name}", self.label)

    def to_json(self) -> dict[str, str]:
        """As kept in a manifest's ``far``."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> FarPlace | None:
        """A manifest's ``far``, or None when it has none (the data is in the store)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                str(data["provider"]), str(data["host"]), str(data["path"]), str(data["label"])
            )
        except KeyError as exc:
            raise CorruptEntryError(f"the saved state's place lacks its {exc}") from None


#: Reads one file of a place from our side: (place, absolute or ~ path) -> its bytes.
ReadFile = Callable[[FarPlace, str], Awaitable[memoryview]]


@dataclass
class FarAccess:
    """What a restore may use to reach state kept far from our side.

    Attributes:
        here: The ``host`` key of the place the kernel restored into reads, or None.
        read: Reads a place's file through our side (its provider's), or None when
            none can.
    """

    here: str | None = None
    read: ReadFile | None = None


async def write(
    client: TransferClient,
    place: FarPlace,
    names: list[str],
    max_bytes: int,
    min_free: int,
) -> dict[str, Any]:
    """Have the kernel write ``names`` into ``place``; what it wrote (see
    :meth:`.queries.KernelQueries.store`).

    Raises:
        TransferError: As the kernel raised it (a variable named, or no room).
    """
    return await client.store(names, place.path, max_bytes, min_free)


async def unwrite(client: TransferClient, place: FarPlace) -> None:
    """Remove what a save wrote into ``place`` through its kernel, after the save failed
    on our side or was cancelled (best effort: said in the log when it fails)."""
    try:
        async with asyncio.timeout(CLEANUP_WAIT):
            await asyncio.shield(client.unstore(place.path))
    except (TransferError, TimeoutError, OSError) as exc:
        log.warning(
            "saved state in %s (%s) was not removed after a failed save: %s",
            place.path,
            place.label,
            exc,
        )


async def read_through(
    place: FarPlace, variables: list[dict[str, Any]], read: ReadFile
) -> list[Pickled]:
    """Read an entry's files from ``place`` through our side, each checked against its
    SHA-256, as variables to send.

    Raises:
        CorruptEntryError: A file is missing there, cut short or changed.
    """
    pickled = []
    for variable in variables:
        name, kind = str(variable["name"]), str(variable["type"])
        where = f"{place.path.rstrip('/')}/{variable['file']}"
        sizes = [int(size) for size in variable["segments"]]
        what = f"the saved {name!r} ({kind}, file {variable['file']}) on {place.label}"
        try:
            data = await read(place, where)
        except OSError as exc:
            raise CorruptEntryError(f"{what} {unreadable_because(exc)}") from None
        if len(data) != sum(sizes):
            raise CorruptEntryError(f"{what} has {len(data)} bytes, not {sum(sizes)}")
        if not matches(variable, [data]):
            raise CorruptEntryError(f"{what} was changed after it was saved (its checksum differs)")
        view = memoryview(data)
        parts: list[Any] = []
        position = 0
        for size in sizes:
            parts.append(view[position : position + size])
            position += size
        pickled.append(Pickled(name, kind, parts[0], parts[1:]))
    return pickled


def unreadable(place: FarPlace, what: str) -> RestoreError:
    """The error of a restore whose kernel cannot read ``place`` and whose data no one
    can copy here."""
    return RestoreError(
        f"{what} failed: its saved state is on {place.label} ({place.path}), which the "
        "new kernel cannot read and which cannot be copied from here. Nothing was "
        "restored; the saved state is as it was. Wake it on the target it hibernated on.",
        "reading saved state",
    )


__all__ = ["FarAccess", "FarPlace", "ReadFile", "read_through", "unreadable", "unwrite", "write"]
