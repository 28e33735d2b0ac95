"""The house's rule that no import contract can check: above the core, code does not pick the format.

The facade (``core/tables.py``: ``open_table`` and ``table.maintenance``) is the one place that chooses between
Paimon and Iceberg. A branch on the format above the core (the CLI, the Airflow layer, the Spark jobs) is allowed
only where the user must see a difference, at most five of them, each marked ``# format branch: <why>`` on its
line or in the comment just above it. The scan reads the syntax trees: a comparison of something named ``format``/``fmt`` (or
an attribute ``.format``) with the literal ``"paimon"`` or ``"iceberg"``, and ``isinstance`` against a class whose
name contains ``Paimon`` or ``Iceberg``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lakeformat"
UPSTAIRS = ("cli", "hooks", "operators", "sensors", "triggers", "spark")
MAX_BRANCHES = 5
MARK = "# format branch:"
FORMATS = {"paimon", "iceberg"}


def _names_format(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in {"format", "fmt", "table_format"}
    if isinstance(node, ast.Attribute):
        return node.attr in {"format", "table_format"}
    if isinstance(node, ast.Subscript):  # args["format"], document["format"]
        key = node.slice
        return isinstance(key, ast.Constant) and key.value == "format"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "format"
    return False


def _is_format_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in FORMATS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_format_literal(e) for e in node.elts)
    return False


def _format_class(node: ast.expr) -> bool:
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    for name in names:
        text = name.id if isinstance(name, ast.Name) else getattr(name, "attr", "")
        if "Paimon" in text or "Iceberg" in text:
            return True
    return False


def format_branches(source: str) -> list[int]:
    """Line numbers of the branches on the format in one module's source."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_format(o) for o in operands) and any(_is_format_literal(o) for o in operands):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and _format_class(node.args[1])
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def upstairs_branches() -> list[tuple[str, int, bool]]:
    """Every branch above the core: (module, line, whether it is marked with its reason)."""
    found = []
    for layer in UPSTAIRS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            source = path.read_text()
            text = source.splitlines()
            for line in format_branches(source):
                # the reason on the branch's line or in the comment just above it (up to three lines)
                marked = any(MARK in text[n].lower() for n in range(max(0, line - 4), line))
                found.append((str(path.relative_to(PACKAGE.parent)), line, marked))
    return found


def test_the_scan_finds_the_branches_it_looks_for() -> None:
    source = (
        "if table.format == 'iceberg':\n    pass\n"
        'x = 1 if args.format != "paimon" else 2\n'
        "ok = fmt in ('paimon', 'iceberg')\n"
        "if isinstance(t, IcebergLakeTable):\n    pass\n"
        "if document['format'] == 'paimon':\n    pass\n"
        "if name == 'iceberg' or mode == 'full':\n    pass\n"
    )
    assert format_branches(source) == [1, 3, 4, 5, 7]


def test_at_most_five_format_branches_above_the_core_each_with_its_reason() -> None:
    branches = upstairs_branches()
    unmarked = [f"{module}:{line}" for module, line, marked in branches if not marked]
    assert not unmarked, f"format branches above the core without '{MARK} <why>': {unmarked}"
    assert len(branches) <= MAX_BRANCHES, [f"{m}:{n}" for m, n, _ in branches]


@pytest.mark.parametrize("layer", UPSTAIRS)
def test_each_layer_exists(layer: str) -> None:
    # a renamed layer would silently leave the scan with nothing to read
    assert any((PACKAGE / layer).rglob("*.py"))
