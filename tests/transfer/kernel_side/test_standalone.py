"""The kernel side of transfers is carried to hosts alone (in the agent's zipapp), so
its modules import nothing of ours outside the package."""

from __future__ import annotations

import ast
from pathlib import Path

from jupyter_remote_hw.transfer import kernel_side

PACKAGE = Path(kernel_side.__file__).parent


def imports_outside(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (
            node.level > 1
            or (node.level == 0 and (node.module or "").startswith("jupyter_remote_hw"))
        ):
            found.append(f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module or ''}")
        if isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.startswith("jupyter_remote_hw")
            ]
    return found


def test_no_kernel_side_module_imports_ours_from_outside_the_package() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 5
    assert [line for path in modules for line in imports_outside(path)] == []


def test_the_check_sees_an_import_from_outside(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from ..client import TransferClient\nimport jupyter_remote_hw.ledger\n")
    assert imports_outside(module) == [
        "m.py:1: from ..client",
        "m.py:2: import jupyter_remote_hw.ledger",
    ]
