"""The house keeps its shape: imports point down the layers, across subpackages only through front doors.

The map (also drawn in ``rfcs/README.md``), lowest layer first. A module may import its own
subpackage's modules and anything in a *lower* row; never a higher row, never a sibling in the same
row. A subpackage is entered through its ``__init__`` (its front door), never through a module
inside it. Imports under ``if TYPE_CHECKING:`` count too: an annotation is a dependency of the
design even when it costs nothing at run time, so it may not point up a layer or close a cycle
(it may name a class in the module that defines it, behind the front door). No module is longer
than ``MAX_LINES``: past that, a module holds more than one concept. The deprecated module paths
(``plan_manager.py`` and friends) sit above everything: they only re-export.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "soothe_planner"

LAYERS: list[list[str]] = [
    ["errors"],
    ["concurrency"],
    ["deliverable"],
    ["models"],
    ["wire", "testing", "tracing", "tools", "events"],
    ["dag"],
    ["protocols"],
    ["parsing"],
    ["planner", "local"],
    ["execution"],
    ["graph"],
    ["config"],
    ["server", "cli"],
    ["plan_manager", "limited_model", "local_llm", "reflection"],  # deprecated paths: re-exports only
]
RANK = {unit: i for i, row in enumerate(LAYERS) for unit in row}
MAX_LINES = 500
# Modules still past MAX_LINES, each to be split by concept; an entry goes when its module is split.
OVER_MAX_LINES: set[str] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, runs)`` for every import of the package; ``runs`` is false under TYPE_CHECKING."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotation_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                annotation_only.update(id(n) for n in ast.walk(child))
    found: list[tuple[int, str, bool]] = []
    for node in ast.walk(tree):
        runs = id(node) not in annotation_only
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, runs) for a in node.names if a.name.startswith("soothe_planner")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("soothe_planner"):
            if node.module == "soothe_planner":  # `from soothe_planner import x`: x may be a module
                found += [(node.lineno, f"soothe_planner.{a.name}", runs) for a in node.names]
            else:
                found.append((node.lineno, node.module, runs))
    return found


def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _violations() -> list[str]:
    problems: list[str] = []
    modules = _all_modules()
    for name, path in modules.items():
        if name == "soothe_planner":
            continue  # the lazy root re-exports everything by name, at first use
        mine = _unit(name)
        for line, target, runs in _imports(path):
            theirs = _unit(target)
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if target == "soothe_planner.__version__":
                continue
            if theirs == mine:
                is_package = (PACKAGE / mine).is_dir()
                if is_package and target == f"soothe_planner.{mine}" and path.name != "__init__.py":
                    problems.append(f"{where}: imports its own front door {target}; import the module")
                continue
            if theirs not in RANK or mine not in RANK:
                problems.append(f"{where}: {mine or name} -> {theirs}: a unit missing from LAYERS")
                continue
            if RANK[theirs] >= RANK[mine]:
                kind = "points up" if RANK[theirs] > RANK[mine] else "crosses its own layer"
                problems.append(f"{where}: {mine} -> {target} {kind}")
            if runs and (PACKAGE / theirs).is_dir() and target != f"soothe_planner.{theirs}":
                problems.append(f"{where}: {target} bypasses the front door soothe_planner.{theirs}")
    return problems


def _module_graph() -> dict[str, set[str]]:
    modules = _all_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, target, _runs in _imports(path):
            parts = target.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            if parts and ".".join(parts) != name:
                graph[name].add(".".join(parts))
    return graph


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = defaultdict(set, edges)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_imports_point_down_the_layers_through_front_doors() -> None:
    assert _violations() == []


def test_no_module_import_cycle() -> None:
    # The root package is left out: it names every module lazily, by string, at first use.
    graph = {k: {v for v in vs if v != "soothe_planner"} for k, vs in _module_graph().items()}
    assert _cycles(graph) == []


def _over_max_lines() -> dict[str, int]:
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _all_modules().items()}
    return {name: n for name, n in lengths.items() if n > MAX_LINES}


def test_no_module_is_longer_than_max_lines() -> None:
    over = {name: n for name, n in _over_max_lines().items() if name not in OVER_MAX_LINES}
    assert over == {}, "split the module by concept"


def test_every_module_let_past_max_lines_still_is() -> None:
    assert set(_over_max_lines()) >= OVER_MAX_LINES, "the module was split: drop it from OVER_MAX_LINES"


def test_the_graph_reads_every_module() -> None:
    assert set(_module_graph()) >= set(_all_modules()) - {"soothe_planner"}


def test_every_unit_of_the_package_is_on_the_map() -> None:
    units = {_unit(name) for name in _all_modules()} - {""}
    assert units - set(RANK) == set(), "add the new unit to LAYERS (and to the map in rfcs/README.md)"


def test_no_private_helper_module_at_top_level() -> None:
    helpers = [p.name for p in PACKAGE.glob("_*.py") if p.name != "__init__.py"]
    assert helpers == [], "a helper lives inside the subpackage it serves"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from soothe_planner.graph import build_strange_loop\n", "points up"),
        ("from soothe_planner.dag.validation import find_cycle\n", "bypasses the front door"),
    ],
)
def test_the_checker_catches_what_it_forbids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             source: str, expected: str) -> None:
    fake = tmp_path / "soothe_planner"
    (fake / "dag").mkdir(parents=True)
    (fake / "graph").mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "dag" / "__init__.py").write_text("")
    (fake / "dag" / "validation.py").write_text("")
    (fake / "graph" / "__init__.py").write_text("")
    (fake / "models.py").write_text(source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert any(expected in problem for problem in _violations())


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_for_annotations_only_closes_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "soothe_planner"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "a.py").write_text("from soothe_planner.b import B\n")
    (fake / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from soothe_planner.a import A\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert _cycles(_module_graph()) == [["soothe_planner.a", "soothe_planner.b"]]
