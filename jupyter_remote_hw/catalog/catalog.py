"""The catalog: every known instance type and region, and queries over them."""

from __future__ import annotations

import difflib
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir

from .entries import SHIPPED_CATALOG, CatalogEntry, read_catalog
from .query import CatalogQueryError, search


def user_catalog_path() -> Path:
    """Where ``catalog refresh`` writes: ``<jupyter data dir>/jupyter_remote_hw/catalog/aws.csv``."""
    return Path(jupyter_data_dir()) / "jupyter_remote_hw" / "catalog" / "aws.csv"


class Catalog:
    """Catalog entries and the file they came from.

    Args:
        entries: The rows.
        source: Where they came from, for messages.
    """

    def __init__(self, entries: list[CatalogEntry], source: str) -> None:
        self.entries = entries
        self.source = source

    @classmethod
    def load(cls, path: Path | str | None = None) -> Catalog:
        """Read ``path``; by default the refreshed catalog when there is one, else the shipped one.

        Raises:
            CatalogFileError: The file is unreadable or malformed.
        """
        if path:
            chosen = Path(path).expanduser()
        else:
            user = user_catalog_path()
            chosen = user if user.exists() else SHIPPED_CATALOG
        return cls(read_catalog(chosen), str(chosen))

    @property
    def regions(self) -> list[str]:
        """The regions with at least one entry."""
        return sorted({e.region for e in self.entries})

    def search(self, query: str, region: str | None = None) -> list[CatalogEntry]:
        """Entries matching ``query`` (see :mod:`.query`), cheapest first.

        Raises:
            CatalogQueryError: The query is not understood.
        """
        return search(self.entries, query, region)

    def entry(self, instance_type: str, region: str) -> CatalogEntry:
        """The entry of one instance type in one region.

        Raises:
            CatalogQueryError: Unknown type, or not in that region (naming the regions it is in).
        """
        for entry in self.entries:
            if entry.instance_type == instance_type and entry.region == region:
                return entry
        elsewhere = sorted({e.region for e in self.entries if e.instance_type == instance_type})
        if elsewhere:
            raise CatalogQueryError(
                instance_type,
                f"{instance_type} is not in the catalog for {region}; it is "
                f"listed in {', '.join(elsewhere)} (or run `jupyter remote-hw catalog refresh`)",
            )
        known = sorted({e.instance_type for e in self.entries})
        raise CatalogQueryError(
            instance_type,
            f"unknown instance type {instance_type!r} in {self.source}",
            difflib.get_close_matches(instance_type, known, n=3, cutoff=0.6),
        )

    def resolve(self, query: str, region: str) -> CatalogEntry:
        """The cheapest entry in ``region`` that matches ``query`` (an instance type
        name matches itself).

        Raises:
            CatalogQueryError: Nothing matches, or the query is not understood.
        """
        if any(e.instance_type == query for e in self.entries):
            return self.entry(query, region)
        found = [e for e in self.search(query, region) if e.price() is not None] or self.search(
            query, region
        )
        if not found:
            anywhere = self.search(query)
            where = sorted({e.region for e in anywhere})
            hint = (
                f"; it is offered in {', '.join(where)}"
                if where
                else "; loosen the query (`jupyter remote-hw catalog` lists the hardware)"
            )
            raise CatalogQueryError(query, f"no instance type in {region} matches {query!r}{hint}")
        return found[0]
