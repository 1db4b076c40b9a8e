"""Catalog rows: one instance type in one region, read from and written to CSV."""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

SHIPPED_CATALOG = Path(__file__).with_name("data") / "aws.csv"
"""The catalog that ships with the package (public list prices; see docs/catalog.md)."""

HEADER_COMMENT = (
    "# jupyter-remote-hw AWS hardware catalog: one row per instance type and region.\n"
    "# Columns are documented in docs/catalog.md. Rebuild with "
    "`jupyter remote-hw catalog refresh`.\n"
)


#: Makers of the accelerators that are not GPUs, by the first word of the accelerator's name.
ACCELERATOR_MAKERS = {"trainium": "AWS", "inferentia": "AWS", "gaudi": "Habana"}


class CatalogFileError(ValueError):
    """A catalog file that cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class CatalogEntry:
    """One instance type in one region.

    Attributes:
        instance_type: The EC2 instance type (``g5.xlarge``).
        region: The AWS region (``us-east-1``).
        vcpus: Virtual CPUs.
        memory_gib: Memory in GiB.
        gpu_name: GPU model as EC2 names it (``A10G``); empty for CPU-only types.
        gpu_count: GPUs per instance (0 for CPU-only types).
        gpu_memory_gib: Memory of one GPU in GiB, as EC2 reports it.
        on_demand_usd_per_hour: Linux on-demand list price in US dollars per
            hour, or None when unknown.
        spot_usd_per_hour: A recent spot price, or None when unknown.
        price_date: The date (``YYYY-MM-DD``) the on-demand price was read; empty
            when it is unknown.
        accelerator_name: An accelerator that is not a GPU (``Trainium``,
            ``Trainium2``, ``Inferentia2``, ``Gaudi``); empty when there is none.
        accelerator_count: Such accelerators per instance (0 when there is none).
        accelerator_memory_gib: Memory of one such accelerator in GiB.
        spot_price_date: The date the spot price was read; empty when it is unknown.
    """

    instance_type: str
    region: str
    vcpus: int
    memory_gib: float
    gpu_name: str
    gpu_count: int
    gpu_memory_gib: float
    on_demand_usd_per_hour: float | None
    spot_usd_per_hour: float | None
    price_date: str
    accelerator_name: str = ""
    accelerator_count: int = 0
    accelerator_memory_gib: float = 0.0
    spot_price_date: str = ""

    @property
    def family(self) -> str:
        """The instance family (``g5`` for ``g5.xlarge``)."""
        return self.instance_type.split(".", 1)[0]

    @property
    def gpu_memory_total_gib(self) -> float:
        """Memory of all GPUs together, in GiB."""
        return round(self.gpu_memory_gib * self.gpu_count, 1)

    @property
    def accelerator_memory_total_gib(self) -> float:
        """Memory of all accelerators that are not GPUs together, in GiB."""
        return round(self.accelerator_memory_gib * self.accelerator_count, 1)

    @property
    def accelerator_line(self) -> str:
        """The accelerator's name without its generation, lower-cased (``trainium`` for
        ``Trainium2``, ``gaudi`` for ``Gaudi HL-205``); empty when there is none."""
        if not self.accelerator_name:
            return ""
        return self.accelerator_name.split()[0].lower().rstrip("0123456789")

    @property
    def accelerator_maker(self) -> str:
        """Who makes the accelerator (``AWS``, ``Habana``); empty when unknown or none."""
        return ACCELERATOR_MAKERS.get(self.accelerator_line, "")

    @property
    def hardware(self) -> str:
        """A short label for people: ``A10G 22.4 GiB``, ``8 × A100 40 GiB``,
        ``16 × Trainium 32 GiB`` or ``4 vCPUs``."""
        if self.gpu_count:
            name, count, memory = self.gpu_name, self.gpu_count, self.gpu_memory_gib
        elif self.accelerator_count:
            name, count, memory = (
                self.accelerator_name,
                self.accelerator_count,
                self.accelerator_memory_gib,
            )
        else:
            return f"{self.vcpus} vCPUs"
        one = f"{name} {memory:g} GiB"
        return one if count == 1 else f"{count} × {one}"

    def price(self, spot: bool = False) -> float | None:
        """The hourly price of this entry: spot when asked and known, else on-demand."""
        if spot and self.spot_usd_per_hour is not None:
            return self.spot_usd_per_hour
        return self.on_demand_usd_per_hour


COLUMNS = [
    "instance_type",
    "region",
    "vcpus",
    "memory_gib",
    "gpu_name",
    "gpu_count",
    "gpu_memory_gib",
    "accelerator_name",
    "accelerator_count",
    "accelerator_memory_gib",
    "on_demand_usd_per_hour",
    "price_date",
    "spot_usd_per_hour",
    "spot_price_date",
]
"""The catalog file's columns, in order: every field of :class:`CatalogEntry`."""
assert sorted(COLUMNS) == sorted(f.name for f in fields(CatalogEntry))

OPTIONAL_COLUMNS = (
    "accelerator_name",
    "accelerator_count",
    "accelerator_memory_gib",
    "spot_price_date",
)
"""Columns a catalog written before they existed lacks (its rows read as having none)."""


def _optional_float(text: str | None) -> float | None:
    return float(text) if text and text.strip() else None


def _date(text: str | None, source: str) -> str:
    """A ``YYYY-MM-DD`` date, or empty.

    Raises:
        ValueError: Anything else.
    """
    text = (text or "").strip()
    if text:
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{source} {text!r} is not a date (YYYY-MM-DD)") from None
    return text


def parse_catalog(text: str, source: str = "catalog") -> list[CatalogEntry]:
    """Read catalog CSV (lines starting with ``#`` are comments).

    Raises:
        CatalogFileError: A missing column or a value that is not a number.
    """
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    reader = csv.DictReader(lines)
    missing = set(COLUMNS) - set(OPTIONAL_COLUMNS) - set(reader.fieldnames or [])
    if missing:
        raise CatalogFileError(f"{source}: missing columns {sorted(missing)}; expected {COLUMNS}")
    entries = []
    for number, row in enumerate(reader, start=2):
        try:
            entries.append(
                CatalogEntry(
                    instance_type=row["instance_type"].strip(),
                    region=row["region"].strip(),
                    vcpus=int(row["vcpus"]),
                    memory_gib=float(row["memory_gib"]),
                    gpu_name=row["gpu_name"].strip(),
                    gpu_count=int(row["gpu_count"] or 0),
                    gpu_memory_gib=float(row["gpu_memory_gib"] or 0),
                    on_demand_usd_per_hour=_optional_float(row["on_demand_usd_per_hour"]),
                    spot_usd_per_hour=_optional_float(row["spot_usd_per_hour"]),
                    price_date=_date(row["price_date"], "price_date"),
                    accelerator_name=(row.get("accelerator_name") or "").strip(),
                    accelerator_count=int(row.get("accelerator_count") or 0),
                    accelerator_memory_gib=float(row.get("accelerator_memory_gib") or 0),
                    # A file from before spot prices had their own date: its one date
                    # was when all its prices were taken.
                    spot_price_date=_date(
                        row.get("spot_price_date")
                        if "spot_price_date" in row
                        else (row["price_date"] if row["spot_usd_per_hour"] else ""),
                        "spot_price_date",
                    ),
                )
            )
        except (TypeError, ValueError) as exc:
            raise CatalogFileError(f"{source}: data row {number - 1}: {exc}") from None
    return entries


def read_catalog(path: Path) -> list[CatalogEntry]:
    """Read a catalog file.

    Raises:
        CatalogFileError: The file is unreadable or malformed.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise CatalogFileError(f"cannot read the catalog {path}: {exc}") from None
    return parse_catalog(text, str(path))


def format_catalog(entries: Iterable[CatalogEntry]) -> str:
    """Catalog CSV for ``entries``, sorted by instance type and region, with its comment."""
    out = io.StringIO()
    out.write(HEADER_COMMENT)
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for entry in sorted(entries, key=lambda e: (e.family, e.vcpus, e.instance_type, e.region)):
        row = asdict(entry)
        for key in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
            row[key] = "" if row[key] is None else str(row[key])
        writer.writerow(row)
    return out.getvalue()


def write_catalog(path: Path, entries: Iterable[CatalogEntry]) -> None:
    """Write a catalog file atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(format_catalog(entries))
    tmp.replace(path)
