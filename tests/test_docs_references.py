"""The docs name tests and source files that exist: a moved or renamed test does not
leave a claim in the docs pointing at nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
#: ``tests/x/test_y.py`` or ``tests/x/test_y.py::test_z`` (also ``jupyter_remote_hw/...py``).
REFERENCE = re.compile(r"\b((?:tests|jupyter_remote_hw|benchmarks)/[\w/.-]+\.py)(?:::(\w+))?")


def references() -> list[tuple[str, str, str | None]]:
    found = []
    for doc in DOCS:
        for match in REFERENCE.finditer(doc.read_text()):
            found.append((doc.name, match.group(1), match.group(2)))
    return found


@pytest.mark.parametrize(("doc", "path", "name"), references())
def test_a_named_file_and_test_exist(doc: str, path: str, name: str | None) -> None:
    target = REPO / path
    assert target.is_file(), f"{doc} names {path}, which does not exist"
    if name is not None:
        assert re.search(
            rf"^(async )?def {re.escape(name)}\b|^class {re.escape(name)}\b",
            target.read_text(),
            re.MULTILINE,
        ), f"{doc} names {path}::{name}, which does not exist"
