"""Architecture rule: only ``core/maintenance/deletion.py`` deletes table files.

Every call that can remove a file or directory is found by walking the package's syntax trees; the
few places allowed to remove their *own* temporary files are listed with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lakeformat"
DELETING_CALLS = {
    "delete",
    "delete_existing",
    "delete_objects",
    "remove_empty_dir",
    "rm",
    "rm_file",
    "rmdir",
    "rmtree",
    "unlink",
    "remove",
    "removedirs",
}
ALLOWED = {
    # the storage primitives themselves, and their hidden temp files
    "core/io.py",
    # the one module that deletes table files
    "core/maintenance/deletion.py",
    # temporary files of the job runner and the --py-files zip builder, outside any table
    "spark/runtime.py",
    "spark/locate.py",
    # avro_guard's FileIO wrapper must implement FileIO.delete: it hands pyiceberg's removal of its own
    # uncommitted manifests and manifest lists (a failed commit attempt) to the wrapped FileIO, as before
    "core/iceberg/metadata/avro_guard.py",
    # the sort compaction's spilled runs: a private tempfile.mkdtemp() directory outside any table, removed
    # when the merge ends (also on error)
    "core/iceberg/maintenance/data_compaction_sort.py",
}


def _deleting_calls(path: Path, base: Path = PACKAGE) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name in DELETING_CALLS:
                # list.remove / set.remove / dict methods are not file deletions; they take one
                # positional argument too, so tell them apart by the receiver's name.
                receiver = func.value if isinstance(func, ast.Attribute) else None
                if isinstance(receiver, ast.Name) and receiver.id == "deleter":
                    continue  # FileDeleter's own API: going through the deletion module is the rule
                if name == "remove" and not (
                    isinstance(receiver, ast.Name) and receiver.id in {"os", "fs", "io"}
                ):
                    continue
                found.append(f"{path.relative_to(base)}:{node.lineno} {name}()")
    return found


def test_only_the_deletion_module_deletes_files() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if str(path.relative_to(PACKAGE)) in ALLOWED:
            continue
        offenders += _deleting_calls(path)
    assert offenders == []


def test_the_rule_detects_a_deleting_call(tmp_path: Path) -> None:
    sample = PACKAGE / "core" / "paimon" / "table.py"
    assert _deleting_calls(sample) == []
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nos.remove('x')\nfs.rm_file('y')\nitems.remove(1)\n")
    assert _deleting_calls(bad, tmp_path) == ["bad.py:2 remove()", "bad.py:3 rm_file()"]
