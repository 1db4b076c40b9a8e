"""The package's shape, read from its source: no import circle, and no file or class too
big to read.

Imports are read with :mod:`ast`, at module level and inside functions alike, and those
under ``if TYPE_CHECKING:`` too: they never run, but a circle through them is a circle
of knowledge all the same (two modules that each need the other to be read). Importing
``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` too, so an import of a module
also counts as one of the packages above it that the importer is not part of. The
package's own ``__init__.py`` is left out as an importer: it only holds the hooks
Jupyter and IPython call (each imports its entry point when called).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "jupyter_remote_hw"
FRONT_END = REPO / "labextension" / "src"

#: The entries at the top of the package, by layer, bottom first (docs/architecture.md
#: says what each holds). Each imports only entries of the layers under it.
LAYERS: list[tuple[str, set[str]]] = [
    ("which failures are the user's", {"errors"}),
    (
        "input checks; what runs on a machine and inside kernels",
        {"validation", "processes", "agent", "transfer"},
    ),
    (
        "how we reach a machine; what machines cost and what we hold",
        {"transport", "catalog", "ledger", "hibernation"},
    ),
    ("the agent, from our side", {"agent_client"}),
    ("where machines come from", {"providers"}),
    ("the machines a user has; the configuration check", {"machines", "config_check"}),
    ("kernels; sharing", {"provisioner", "sharing"}),
    (
        "where users meet it: the server, the user's kernel, the command line",
        {"server", "notebook", "cli", "kernelspecs"},
    ),
]

#: Circles through imports under ``if TYPE_CHECKING:`` that are left for now, and why.
#: Shrink it; never grow it.
CIRCLE_EXCEPTIONS: dict[tuple[str, ...], str] = {}

#: The most lines in one source file (Python or TypeScript).
MAX_FILE_LINES = 600
#: The most lines in one class.
MAX_CLASS_LINES = 400

#: Files allowed over :data:`MAX_FILE_LINES` for now, and why. Shrink it; never grow it.
FILE_EXCEPTIONS: dict[str, str] = {}

#: Classes allowed over :data:`MAX_CLASS_LINES`, and why. The limit is a warning sign, not
#: a rule: a long class that holds one state and one concern stays whole, said here.
CLASS_EXCEPTIONS: dict[str, str] = {
    "jupyter_remote_hw/agent_client/relay.py:KernelRelayClient": (
        "one kernel's relay: its ports, the stream to the host, what is kept until "
        "acknowledged and what is held while the kernel sleeps are one state machine; "
        "its clients and stand-in are already their own classes"
    ),
    "jupyter_remote_hw/provisioner/hibernating.py:KernelHibernation": (
        "one kernel's hibernation: saving, sleeping, waking, the base kept for the next "
        "save, and what a restart, a shutdown or the next server does to them are one "
        "state machine; where the state is kept (far_state), the relay while asleep "
        "(asleep) and moving between targets (moving) are already their own modules"
    ),
}


def module_name(path: Path) -> str:
    """``jupyter_remote_hw.providers.aws`` for ``jupyter_remote_hw/providers/aws/__init__.py``."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:``."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _imported(name: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The package's modules that ``node`` in module ``name`` names."""
    known = modules()
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".")
            if modules()[name].name != "__init__.py":
                base.pop()
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        wanted = [
            f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
            for alias in node.names
        ]
    for target in wanted:
        while target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known:
            yield target


@cache
def import_graph(when_run: bool = False) -> dict[str, frozenset[str]]:
    """Which modules each module imports (see the module's docstring); with
    ``when_run``, only the imports that run (those under ``if TYPE_CHECKING:`` left out)."""
    root = PACKAGE.name
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))
        skipped = _type_checking_nodes(tree) if when_run else set()
        found: set[str] = set()
        if name != root:
            for node in ast.walk(tree):
                if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in skipped:
                    continue
                for target in _imported(name, node):
                    parts = target.split(".")
                    for depth in range(2, len(parts) + 1):
                        ancestor = ".".join(parts[:depth])
                        if ancestor != name and not (name + ".").startswith(ancestor + "."):
                            found.add(ancestor)
        graph[name] = frozenset(found)
    return graph


def circles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def top_level(name: str) -> str:
    """The entry at the top of the package a module belongs to (``providers``, ``cli``)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph() -> dict[str, frozenset[str]]:
    """Which entries at the top of the package import which others."""
    graph: dict[str, set[str]] = {}
    for name, targets in import_graph().items():
        if name == PACKAGE.name:
            continue
        edges = graph.setdefault(top_level(name), set())
        edges.update(top_level(t) for t in targets if top_level(t) != top_level(name))
    return {name: frozenset(edges) for name, edges in graph.items()}


def floors(graph: dict[str, frozenset[str]]) -> dict[str, int]:
    """Each node's floor: 1 for one that imports nothing here, else one above the
    highest floor it imports (``graph`` has no circle)."""
    found: dict[str, int] = {}

    def floor(node: str) -> int:
        if node not in found:
            found[node] = 1 + max((floor(n) for n in graph.get(node, ())), default=0)
        return found[node]

    for node in graph:
        floor(node)
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert circles(import_graph(when_run=True)) == []


def test_no_module_needs_itself_through_others_counting_type_hints() -> None:
    assert [set(circle) for circle in circles(import_graph())] == [
        set(circle) for circle in CIRCLE_EXCEPTIONS
    ]


#: ``import ... from './x'`` and ``export ... from './x'`` in the front end (type-only too).
TS_IMPORT = re.compile(r"^\s*(?:import|export)\b[^;]*?\bfrom\s+'\./([\w.-]+)'", re.MULTILINE)


def front_end_graph() -> dict[str, frozenset[str]]:
    """Which front-end modules each one imports, by file stem."""
    sources = {path.stem: path for path in FRONT_END.glob("*.ts")}
    return {
        stem: frozenset(name for name in TS_IMPORT.findall(path.read_text()) if name in sources)
        for stem, path in sources.items()
    }


def test_no_circle_in_the_front_end() -> None:
    graph = front_end_graph()
    assert len(graph) > 10 and graph["index"]
    assert circles(graph) == []


def test_no_circle_between_the_packages_at_the_top() -> None:
    assert circles(package_graph()) == []


def test_every_entry_at_the_top_has_a_layer() -> None:
    placed = [name for _, names in LAYERS for name in names]
    assert len(placed) == len(set(placed)), "an entry is in two layers"
    entries = set(package_graph())
    assert entries - set(placed) == set(), "put these in a layer (LAYERS)"
    assert set(placed) - entries == set(), "gone: drop them from LAYERS"


def test_each_layer_imports_only_the_layers_under_it() -> None:
    layer = {name: index for index, (_, names) in enumerate(LAYERS) for name in names}
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in package_graph().items()
        for target in targets
        if layer.get(target, -1) >= layer.get(name, -1)
    )
    assert upward == []


def test_the_graph_sees_an_import_circle() -> None:
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a"}),
        "d": frozenset({"a"}),
    }
    assert circles(graph) == [["a", "b", "c"]]
    assert floors({"a": frozenset({"b"}), "b": frozenset(), "c": frozenset({"a", "b"})}) == {
        "a": 2,
        "b": 1,
        "c": 3,
    }


def _sources() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))
    yield from sorted(p for p in FRONT_END.rglob("*.ts*") if p.suffix in (".ts", ".tsx"))


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(REPO)))
def test_no_file_over_the_limit(path: Path) -> None:
    where = str(path.relative_to(REPO))
    lines = len(path.read_text().splitlines())
    if where in FILE_EXCEPTIONS:
        assert lines > MAX_FILE_LINES, f"{where} is small enough now: drop its exception"
    else:
        assert lines <= MAX_FILE_LINES, f"{where} has {lines} lines (at most {MAX_FILE_LINES})"


def _classes() -> Iterator[tuple[str, int]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text(), where)):
            if isinstance(node, ast.ClassDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                yield f"{where}:{node.name}", (node.end_lineno or node.lineno) - first + 1


def test_no_class_over_the_limit() -> None:
    sizes = dict(_classes())
    too_big = {
        name: lines
        for name, lines in sizes.items()
        if lines > MAX_CLASS_LINES and name not in CLASS_EXCEPTIONS
    }
    assert too_big == {}, f"classes over {MAX_CLASS_LINES} lines"
    small_now = [name for name in CLASS_EXCEPTIONS if sizes.get(name, 0) <= MAX_CLASS_LINES]
    assert small_now == [], "small enough now (or gone): drop their exceptions"


def test_the_exceptions_name_real_files() -> None:
    for where in FILE_EXCEPTIONS:
        assert (REPO / where).is_file(), where
