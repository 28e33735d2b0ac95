"""The house's size rules (issue 25, "Size"), checked on the source: modules under 600 lines, functions under 80,
and no import cycle among the benchmarks.

Measured with ``ast`` on ``bench/`` and ``airflow_lakeformat/``: a module's length is its line count, a function's
is from its ``def`` (decorators excluded) to its last line, docstring included; nested functions count on their own
too. The benchmarks' import graph has an edge for every ``import``/``from ... import`` of another benchmark module,
at module level or inside a function (``bench_planning`` imported as ``bench_planning`` or ``bench.bench_planning``,
``bench/support/x.py`` as ``bench.support.x``); it must have no cycle. What is over a limit today and has not been
split yet is in :data:`ALLOWED`, each with the reason; the list only shrinks (an entry that is no longer over its
limit fails the test, so that it is removed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TREES = ("bench", "airflow_lakeformat")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# "path" (a module) or "path::qualified.name" (a function) -> why it is still over its limit. Empty: everything
# measured is within the limits (an entry needs a reason a reviewer accepts, e.g. one literal table).
ALLOWED: dict[str, str] = {}


def _python_files() -> Iterator[Path]:
    for tree in TREES:
        for path in sorted((REPO_ROOT / tree).rglob("*.py")):
            if not any(part.startswith(".") for part in path.relative_to(REPO_ROOT).parts):
                yield path


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            assert node.end_lineno is not None
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def oversized() -> dict[str, int]:
    """Every module over 600 lines and function over 80 lines: key (as in :data:`ALLOWED`) -> lines."""
    found: dict[str, int] = {}
    for path in _python_files():
        rel = path.relative_to(REPO_ROOT).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n") + (0 if source.endswith("\n") else 1)
        if lines > MAX_MODULE_LINES:
            found[rel] = lines
        for name, length in _functions(ast.parse(source)):
            if length > MAX_FUNCTION_LINES:
                found[f"{rel}::{name}"] = length
    return found


def bench_import_graph(bench: Path = REPO_ROOT / "bench") -> dict[str, set[str]]:
    """Benchmark module (``bench_x`` or ``support.x``) -> the benchmark modules it imports."""
    names = {
        p.relative_to(bench).with_suffix("").as_posix().replace("/", "."): p for p in bench.rglob("*.py")
    }
    names = {n.removesuffix(".__init__"): p for n, p in names.items() if ".work" not in n}

    def resolve(module: str) -> str | None:
        module = module.removeprefix("bench.")
        return module if module in names else None

    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges.update(t for t in map(resolve, targets) if t is not None and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its nodes, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_module_over_600_lines_and_no_function_over_80_beyond_the_allow_list() -> None:
    found = oversized()
    unexpected = {key: lines for key, lines in found.items() if key not in ALLOWED}
    assert not unexpected, (
        f"over the size limits (split them by step, or allow them with a reason): {unexpected}"
    )


def test_the_allow_list_only_holds_what_is_still_oversized() -> None:
    found = oversized()
    stale = sorted(key for key in ALLOWED if key not in found)
    assert not stale, f"no longer over the limit: remove from ALLOWED: {stale}"


def test_the_benchmarks_import_each_other_without_a_cycle() -> None:
    graph = bench_import_graph()
    assert "support.runs" in graph and "bench_orphans" in graph, "the graph covers bench/ and bench/support/"
    assert find_cycle(graph) is None, (
        f"import cycle among the benchmarks: {' -> '.join(find_cycle(graph) or [])}"
    )


def test_benchmarks_share_through_bench_support_only() -> None:
    """bench/support/ imports no benchmark; a benchmark imports another only as a declared variant."""
    graph = bench_import_graph()
    variants = {("bench_orphans_snapshots", "bench_orphans")}  # the orphan benchmark on pypaimon's table
    for name, targets in graph.items():
        for target in targets:
            if name.startswith("support"):
                assert target.startswith("support"), f"{name} imports the benchmark {target}"
            elif not target.startswith("support"):
                assert (name, target) in variants, (
                    f"{name} imports the benchmark {target}: share via bench/support"
                )


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"a"}}, ["a", "a"]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


def test_the_import_graph_finds_the_cycle_the_issue_found(tmp_path: Path) -> None:
    """bench_orphans -> bench_planning -> pypaimon_table -> bench_orphans, made of a module-level import, a
    function-level one and the package style; and the graph of the fix has no cycle."""
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "__init__.py").write_text("")
    (tmp_path / "bench_orphans.py").write_text("from bench_planning import machine_facts\n")
    (tmp_path / "bench_planning.py").write_text("def main():\n    from bench.pypaimon_table import ensure\n")
    (tmp_path / "pypaimon_table.py").write_text("def facts():\n    from bench_orphans import tree_digest\n")
    graph = bench_import_graph(tmp_path)
    assert graph["bench_planning"] == {"pypaimon_table"}
    assert find_cycle(graph) == ["bench_orphans", "bench_planning", "pypaimon_table", "bench_orphans"]
    (tmp_path / "pypaimon_table.py").write_text("def facts():\n    from bench.support.runs import digest\n")
    (tmp_path / "support" / "runs.py").write_text("import os\n")
    graph = bench_import_graph(tmp_path)
    assert graph["pypaimon_table"] == {"support.runs"} and find_cycle(graph) is None
