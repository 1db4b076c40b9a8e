"""Which machine each kernel runs on: :class:`Placements`, read as a mapping and changed
only through its methods."""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class Placements(Mapping[str, str]):
    """The machine each kernel of this process runs on (or will, or did before it
    hibernated), by kernel id: its target's name, or an allocation's. Read it as a
    mapping; :meth:`put` and :meth:`drop` change it (the machine manager places kernels,
    see :meth:`.manager.MachineManager.place`)."""

    def __init__(self) -> None:
        self._placed: dict[str, str] = {}

    def __getitem__(self, kernel_id: str) -> str:
        return self._placed[kernel_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._placed)

    def __len__(self) -> int:
        return len(self._placed)

    def put(self, kernel_id: str, placement: str) -> None:
        """The kernel runs on the machine called ``placement``: as placed, as its ledger
        row says after a takeover, or back where it was after a wake elsewhere failed."""
        self._placed[kernel_id] = placement

    def drop(self, kernel_id: str) -> None:
        """Forget where the kernel ran (it was shut down, or its launch failed)."""
        self._placed.pop(kernel_id, None)


__all__ = ["Placements"]
