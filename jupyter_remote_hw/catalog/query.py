"""Hardware queries: ``A10G``, ``a100:8``, ``trainium``, ``gpu_mem>=40``, ``cheapest``, ``<=2``.

A query is a list of terms (separated by spaces or commas); every term must hold:

- a GPU name (``A10G``, ``a100``, ``H100``), optionally with a count (``A100:8``),
  an accelerator that is not a GPU (``trainium`` for every Trainium generation,
  ``trainium2``, ``inferentia2``, ``gaudi``; ``trainium:16``), an instance type
  (``g5.xlarge``), a family (``g5``, ``inf2``), ``cpu`` (neither GPU nor
  accelerator), ``gpu`` (any GPU), ``accelerator`` (any accelerator that is not a
  GPU) or ``neuron`` (Trainium or Inferentia, the devices of AWS's Neuron SDK);
- a comparison on ``gpu_mem`` (GiB of one GPU), ``gpu_mem_total``, ``gpus``,
  ``accelerator_mem`` (GiB of one accelerator), ``accelerator_mem_total``,
  ``accelerators``, ``vcpus``, ``memory`` (GiB) or ``price`` ($/h):
  ``gpu_mem>=40``, ``accelerator_mem>=32``, ``vcpus>8``;
- a price limit: ``<=2.5``, ``$2.5``, ``max$=2.5``;
- ``spot`` (use spot prices where known), ``cheapest`` (only the cheapest
  match), ``region=us-west-2``.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import UserError
from .entries import CatalogEntry

_COMPARE = re.compile(r"^([a-z_$]+)\s*(>=|<=|==|=|>|<)\s*\$?([0-9]*\.?[0-9]+)$")
_PRICE_LIMIT = re.compile(r"^(?:<=|\$|max\$=|max=)\s*\$?([0-9]*\.?[0-9]+)$")
_NAME_COUNT = re.compile(r"^([a-z0-9.\-]+)(?::([0-9]+))?$")

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
    "==": operator.eq,
}
_FIELDS: dict[str, Callable[[CatalogEntry, bool], float | None]] = {
    "gpu_mem": lambda e, _spot: e.gpu_memory_gib,
    "gpu_mem_total": lambda e, _spot: e.gpu_memory_total_gib,
    "gpus": lambda e, _spot: e.gpu_count,
    "accelerator_mem": lambda e, _spot: e.accelerator_memory_gib,
    "accelerator_mem_total": lambda e, _spot: e.accelerator_memory_total_gib,
    "accelerators": lambda e, _spot: e.accelerator_count,
    "vcpus": lambda e, _spot: e.vcpus,
    "memory": lambda e, _spot: e.memory_gib,
    "price": lambda e, spot: e.price(spot),
}
#: Other spellings of the fields.
_FIELD_ALIASES = {
    "max$": "price",
    "$": "price",
    "gpu_memory": "gpu_mem",
    "mem": "memory",
    "cpus": "vcpus",
    "gpu_count": "gpus",
    "accel_mem": "accelerator_mem",
    "accelerator_memory": "accelerator_mem",
    "accel_mem_total": "accelerator_mem_total",
    "accelerator_memory_total": "accelerator_mem_total",
    "accelerator_count": "accelerators",
}
#: The accelerator lines that AWS's Neuron SDK drives.
_NEURON_LINES = ("trainium", "inferentia")


class CatalogQueryError(UserError, ValueError):
    """A query term the catalog does not understand; the message suggests what was meant.

    Attributes:
        term: The term at fault.
        suggestions: Close known names.
    """

    def __init__(self, term: str, message: str, suggestions: list[str] | None = None) -> None:
        self.term = term
        self.suggestions = suggestions or []
        if self.suggestions:
            message += f"; did you mean {' or '.join(repr(s) for s in self.suggestions)}?"
        super().__init__(message)


@dataclass
class Query:
    """A parsed query.

    Attributes:
        text: The query as given.
        filters: Conditions every entry must meet.
        spot: Prices are spot prices where known.
        cheapest: Keep only the cheapest match.
        region: Only this region, when set.
    """

    text: str
    filters: list[Callable[[CatalogEntry], bool]] = field(default_factory=list)
    spot: bool = False
    cheapest: bool = False
    region: str | None = None

    def matches(self, entry: CatalogEntry) -> bool:
        """Whether ``entry`` meets every condition."""
        if self.region is not None and entry.region != self.region:
            return False
        return all(check(entry) for check in self.filters)


def _names(entries: Iterable[CatalogEntry]) -> dict[str, str]:
    """Known names, lower-cased, to their spelling for people."""
    names: dict[str, str] = {}
    for entry in entries:
        if entry.gpu_name:
            names.setdefault(entry.gpu_name.lower(), entry.gpu_name)
        if entry.accelerator_name:
            names.setdefault(entry.accelerator_name.lower(), entry.accelerator_name)
            names.setdefault(entry.accelerator_line, entry.accelerator_line.capitalize())
        names.setdefault(entry.instance_type.lower(), entry.instance_type)
        names.setdefault(entry.family.lower(), entry.family)
    return names


def parse_query(text: str, entries: list[CatalogEntry]) -> Query:
    """Parse ``text`` against the names that ``entries`` know.

    Raises:
        CatalogQueryError: A term is not understood (with close matches).
    """
    query = Query(text)
    names = _names(entries)
    for raw in re.split(r"[\s,]+", text.strip()):
        term = raw.lower()
        if not term:
            continue
        if term == "cheapest":
            query.cheapest = True
        elif term in ("spot", "on-demand", "ondemand"):
            query.spot = term == "spot"
        elif term == "cpu":
            query.filters.append(lambda e: e.gpu_count == 0 and e.accelerator_count == 0)
        elif term in ("gpu", "any-gpu"):
            query.filters.append(lambda e: e.gpu_count > 0)
        elif term in ("accelerator", "accel"):
            query.filters.append(lambda e: e.accelerator_count > 0)
        elif term == "neuron":
            query.filters.append(lambda e: e.accelerator_line in _NEURON_LINES)
        elif term.startswith("region="):
            query.region = _region(raw, term.split("=", 1)[1], entries)
        elif match := _PRICE_LIMIT.match(term):
            query.filters.append(_price_limit(float(match.group(1)), query))
        elif match := _COMPARE.match(term):
            query.filters.append(_comparison(raw, *match.groups()))
        elif match := _NAME_COUNT.match(term):
            query.filters.append(_by_name(raw, match.group(1), match.group(2), names))
        else:
            raise CatalogQueryError(
                raw,
                f"cannot read the hardware query term {raw!r}: use a GPU or accelerator "
                "name ('A10G', 'A100:8', 'trainium'), 'gpu_mem>=40', 'accelerator_mem>=32', "
                "'<=2.5', 'spot' or 'cheapest'",
            )
    return query


def _region(raw: str, region: str, entries: list[CatalogEntry]) -> str:
    """A ``region=`` term's region, which the catalog must list.

    Raises:
        CatalogQueryError: A region the catalog does not list (with close ones).
    """
    known = sorted({e.region for e in entries})
    if entries and region not in known:
        raise CatalogQueryError(
            raw,
            f"unknown region {region!r} in {raw!r}: the catalog lists {len(known)} regions "
            "(`jupyter remote-hw catalog refresh --region R` adds one)",
            difflib.get_close_matches(region, known, n=3, cutoff=0.6),
        )
    return region


def _price_limit(limit: float, query: Query) -> Callable[[CatalogEntry], bool]:
    """At most ``limit`` $/h, in spot prices when the query (by its end) asks for spot."""

    def check(entry: CatalogEntry) -> bool:
        price = entry.price(query.spot)
        return price is not None and price <= limit

    return check


def _comparison(raw: str, name: str, op: str, value: str) -> Callable[[CatalogEntry], bool]:
    name = _FIELD_ALIASES.get(name, name)
    if name not in _FIELDS:
        close = difflib.get_close_matches(name, list(_FIELDS), n=2, cutoff=0.5)
        raise CatalogQueryError(
            raw, f"unknown field {name!r} in {raw!r}: the fields are {', '.join(_FIELDS)}", close
        )
    read, compare, limit = _FIELDS[name], _OPS[op], float(value)

    def check(entry: CatalogEntry) -> bool:
        got = read(entry, False)
        return got is not None and compare(got, limit)

    return check


def _by_name(
    raw: str, name: str, count: str | None, names: dict[str, str]
) -> Callable[[CatalogEntry], bool]:
    if name not in names:
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
        raise CatalogQueryError(
            raw,
            f"unknown hardware {raw!r}: no GPU, accelerator, instance type or family of "
            "that name in the catalog (`jupyter remote-hw catalog` lists them)",
            [names[c] for c in close],
        )
    wanted = int(count) if count is not None else None

    def check(entry: CatalogEntry) -> bool:
        if name in (entry.instance_type.lower(), entry.family.lower()):
            return wanted is None or wanted == (entry.gpu_count or entry.accelerator_count)
        if name == entry.gpu_name.lower():
            return wanted is None or entry.gpu_count == wanted
        if entry.accelerator_name and name in (
            entry.accelerator_name.lower(),
            entry.accelerator_line,
        ):
            return wanted is None or entry.accelerator_count == wanted
        return False

    return check


def search(entries: list[CatalogEntry], text: str, region: str | None = None) -> list[CatalogEntry]:
    """The entries that match ``text``, cheapest first (unknown prices last).

    Args:
        entries: The catalog.
        text: The query; empty matches everything.
        region: Only this region (a ``region=`` term in the query wins).

    Raises:
        CatalogQueryError: The query is not understood.
    """
    query = parse_query(text, entries)
    if query.region is None:
        query.region = region
    found = [e for e in entries if query.matches(e)]
    found.sort(
        key=lambda e: (
            e.price(query.spot) is None,
            e.price(query.spot) or 0.0,
            e.instance_type,
            e.region,
        )
    )
    if query.cheapest:
        found = [e for e in found if e.price(query.spot) is not None][:1]
    return found


def wants_spot(text: str) -> bool:
    """Whether a query asks for spot capacity."""
    return "spot" in re.split(r"[\s,]+", text.strip().lower())


__all__ = ["CatalogQueryError", "Query", "parse_query", "search", "wants_spot"]
