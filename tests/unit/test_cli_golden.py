"""A golden record of today's ``lakeformat`` CLI, so that restructuring it changes nothing by accident.

``tests/fixtures/cli_golden.json`` holds two sections:

- ``parser``: every option of the top-level parser and of each sub-command, walked from
  ``cli.build_parser()`` (flags, default, whether it takes a value, nargs, choices, required, the action
  kind, whether its type is int, str or a custom parser, and the mutually exclusive groups). A new or
  removed command or option is a difference.
- ``cases``: commands run in-process (``cli.main(argv, out=...)``) on a pypaimon-written Paimon table (the
  ``sample_tables`` fixture), a Paimon table and a Hadoop-layout Iceberg table made by the CLI itself
  (``create-table``, ``write``, ``commit``), and paths with no table: every read command, every maintenance
  command dry-run and then for real, and the error cases (no table, a corrupt snapshot or metadata file, a
  missing snapshot or tag, a bad duration, negative retention, flags of the other format). Each case
  records its argv (``{T}`` and friends stand for paths and ids), its exit code, the kind of its stderr
  (``empty``, ``error-line``: one ``lakeformat: error:`` line, ``usage``: argparse's), and its stdout:
  ``empty``, ``text``, or for ``--json`` the document's *shape* (nested keys and value types, never the
  values: paths, ids and times vary). Read and dry-run cases also run without ``--json`` (``[text]``).

Without the variable below the test compares and fails with one line per difference, naming the case (the
command) and the key path. After an intended change, regenerate and review the file's diff::

    LAKEFORMAT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_cli_golden.py

``test_the_comparison_reports_a_dropped_key`` proves that the comparison can fail.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat import cli

GOLDEN = Path(__file__).parents[1] / "fixtures" / "cli_golden.json"
UPDATE_VARIABLE = "LAKEFORMAT_UPDATE_GOLDEN"
SEPARATOR = " › "
Shape = Any

# -- the parser ----------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
    except TypeError:
        return repr(value)
    return value


def _type_kind(kind: Any) -> str:
    if kind is None or kind is str:
        return "str"
    return "int" if kind is int else "custom"


def _action_kind(action: argparse.Action) -> str:
    return type(action).__name__.strip("_").removesuffix("Action").lower()


def _option(action: argparse.Action) -> dict[str, Any]:
    return {
        "flags": list(action.option_strings),
        "positional": not action.option_strings,
        "takesValue": action.nargs != 0,
        "nargs": action.nargs,
        "default": _json_safe(action.default),
        "choices": list(action.choices) if action.choices is not None else None,
        "required": action.required,
        "action": _action_kind(action),
        "type": _type_kind(action.type) if action.nargs != 0 else None,
    }


def _options(parser: argparse.ArgumentParser) -> dict[str, Any]:
    actions = [a for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]
    return {(a.option_strings[-1] if a.option_strings else a.dest): _option(a) for a in actions}


def _exclusive_groups(parser: argparse.ArgumentParser) -> list[list[str]]:
    return [sorted(a.option_strings[-1] for a in g._group_actions) for g in parser._mutually_exclusive_groups]


def parser_shape(parser: argparse.ArgumentParser) -> dict[str, Any]:
    commands = {
        name: {"options": _options(sub), "exclusive": _exclusive_groups(sub)}
        for name, sub in _subparsers(parser).choices.items()
    }
    return {"lakeformat": {"options": _options(parser)}, "commands": commands}


# -- shapes and the comparison -------------------------------------------------------------------------


def _merge(a: Shape, b: Shape) -> Shape:
    if a == b:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
    if isinstance(a, list) and isinstance(b, list):
        return [_merge(a[0], b[0])] if a and b else a or b
    if isinstance(a, str) and isinstance(b, str):
        return "|".join(sorted(set(a.split("|")) | set(b.split("|"))))
    return "mixed"


def shape(value: Any) -> Shape:
    """Keys and value types of a JSON value; a list's elements are merged into one shape."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes = [shape(v) for v in value]
        merged = shapes[0] if shapes else None
        for s in shapes[1:]:
            merged = _merge(merged, s)
        return [] if merged is None else [merged]
    names = {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}
    return names[type(value)]


def _brief(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def compare(expected: Any, actual: Any, path: tuple[str, ...] = ()) -> list[str]:
    """One line per difference: the key path (case, then keys) and what was expected and found."""
    where = SEPARATOR.join(path) or "(root)"
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = [
            f"{where}{SEPARATOR}{k}: missing (expected {_brief(expected[k])})"
            for k in expected
            if k not in actual
        ]
        lines += [
            f"{where}{SEPARATOR}{k}: unexpected (found {_brief(actual[k])})"
            for k in actual
            if k not in expected
        ]
        for k in expected:
            if k in actual:
                lines += compare(expected[k], actual[k], (*path, k))
        return lines
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual) == 1:
        return compare(expected[0], actual[0], (*path, "[]"))
    return [] if expected == actual else [f"{where}: expected {_brief(expected)}, found {_brief(actual)}"]


# -- running the CLI in-process ------------------------------------------------------------------------


def _call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv, out=out)
        except SystemExit as exc:  # argparse: usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _stderr_kind(err: str) -> str:
    if not err:
        return "empty"
    if err.startswith("lakeformat: error:") and err.count("\n") == 1:
        return "error-line"
    return "usage" if err.startswith("usage:") else "other"


def _stdout_kind(out: str, as_json: bool) -> Shape:
    if not out:
        return "empty"
    return shape(json.loads(out)) if as_json else "text"


class Recorder:
    """Runs argv templates (``{T}`` etc. filled from ``values``) and records each outcome under a name."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.cases: dict[str, Any] = {}

    def run(self, label: str, *template: str, text_too: bool = False) -> Any:
        argv = [part.format(**self.values) for part in template]
        code, out, err = _call(argv)
        self.cases[f"{label}: {' '.join(template)}"] = {
            "exit": code,
            "stderr": _stderr_kind(err),
            "stdout": _stdout_kind(out, "--json" in argv),
        }
        if text_too:
            self.run(f"{label} [text]", *[p for p in template if p != "--json"])
        return json.loads(out) if out and "--json" in argv else None


# -- the tables and the cases --------------------------------------------------------------------------


def _write_inputs(tmp: Path) -> None:
    (tmp / "schema.json").write_text('[{"name": "id", "type": "BIGINT"}, {"name": "cat", "type": "STRING"}]')
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "cat": ["a", "b"]}), tmp / "rows.parquet")
    pq.write_table(pa.table({"id": pa.array([3], pa.int64()), "cat": ["a"]}), tmp / "one.parquet")


def _plant_stray(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"stray-{uuid.uuid4()}.parquet").write_bytes(b"not referenced")


READS = (
    ("snapshots",),
    ("files",),
    ("files", "--snapshot", "{S1}"),
    ("files", "--tag", "{TAG}"),
    ("files", "--ref", "{TAG}"),
    ("manifests",),
    ("manifests", "--snapshot", "{S1}"),
    ("inspect",),
)
DRY_RUNS = (
    ("compact-manifests", "--dry-run"),
    ("compact-manifests", "--minor", "--dry-run"),
    ("compact-data", "--dry-run"),
    ("compact-data", "--min-input-files", "2", "--dry-run"),
    ("expire",),  # a deleting command without --apply is a dry run
    ("expire", "--dry-run"),
    ("expire", "--dry-run", "--retain-min", "1", "--older-than", "0 ms"),
    ("remove-orphans",),
    ("remove-orphans", "--dry-run"),
    ("remove-orphans", "--dry-run", "--older-than", "0 ms", "--allow-short-older-than"),
)
REFUSALS = (
    ("files", "--snapshot", "999"),
    ("files", "--tag", "nope"),
    ("manifests", "--snapshot", "999"),
    ("expire", "--dry-run", "--older-than", "soon"),
    ("remove-orphans", "--dry-run", "--older-than", "soon"),
    ("expire", "--dry-run", "--older-than", "2024-01-01T00:00:00Z"),
    ("expire", "--dry-run", "--retain-min", "-1"),
    ("expire", "--dry-run", "--retain-max", "-1"),
    ("expire", "--dry-run", "--retain-last", "-1"),
    ("expire", "--dry-run", "--max-deletes", "-1"),
    ("expire", "--dry-run", "--retain-last", "1"),
    ("expire", "--dry-run", "--snapshot-id", "{S1}"),
    ("remove-orphans", "--dry-run", "--older-than", "-1 d"),
    ("remove-orphans", "--dry-run", "--older-than", "1 s"),
    ("remove-orphans", "--dry-run", "--report", "{TMP}/report.jsonl"),
    ("remove-orphans", "--dry-run", "--max-listed", "-1"),
    ("compact-manifests", "--full", "--minor"),
    ("compact-data", "--option", "nosuch=1", "--dry-run"),
    ("compact-deletes", "--dry-run"),
    ("expire", "--apply", "--dry-run"),
    ("remove-orphans", "--apply", "--dry-run"),
)
MUTATIONS = (
    ("compact-manifests",),
    ("expire", "--retain-min", "1", "--older-than", "0 ms", "--apply"),
    ("remove-orphans", "--older-than", "0 ms", "--allow-short-older-than", "--apply"),
)
AFTER_CORRUPTION = (
    ("snapshots",),
    ("files",),
    ("manifests",),
    ("inspect",),
    ("compact-manifests", "--dry-run"),
    ("compact-data", "--dry-run"),
    ("expire", "--dry-run"),
    ("remove-orphans", "--dry-run"),
)


def _table_cases(rec: Recorder, fmt: str, corrupt: Any) -> None:
    for args in READS + DRY_RUNS:
        rec.run(fmt, args[0], "{T}", *args[1:], "--json", text_too=True)
    for args in REFUSALS + MUTATIONS:
        rec.run(fmt, args[0], "{T}", *args[1:], "--json")
    corrupt()
    for args in AFTER_CORRUPTION:
        rec.run(f"{fmt} corrupt", args[0], "{T}", *args[1:], "--json")


def _corrupt_paimon_snapshot(root: Path) -> None:
    latest = (root / "snapshot" / "LATEST").read_text().strip()
    (root / "snapshot" / f"snapshot-{latest}").write_text("{not json")


def _corrupt_iceberg_metadata(root: Path) -> None:
    latest = max((root / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    latest.write_text("{not json")


def paimon_cases(rec: Recorder, sample: Path) -> None:
    """The pypaimon-written ``append_ovw_tbl`` (4 snapshots, a tag, a consumer): reads and maintenance."""
    root = sample / "append_ovw_tbl"
    rec.values.update(T=str(root), S1="1", TAG="before_overwrite")
    _plant_stray(root / "dt=2024-01-01" / "bucket-0")
    _table_cases(rec, "paimon", lambda: _corrupt_paimon_snapshot(root))


def paimon_write_cases(rec: Recorder, tmp: Path) -> None:
    """A Paimon table made by ``create-table``, then ``write``, ``commit --add`` and an overwrite."""
    rec.values.update(T=str(tmp / "new-paimon"))
    rec.run(
        "paimon", "create-table", "{T}", "--schema", "{TMP}/schema.json", "--partition-keys", "cat", "--json"
    )
    rec.run("paimon", "create-table", "{T}", "--schema", "{TMP}/schema.json", "--json")
    rec.run("paimon", "write", "{T}", "--from", "{TMP}/rows.parquet", "--dry-run", "--json", text_too=True)
    rec.run("paimon", "write", "{T}", "--from", "{TMP}/rows.parquet", "--json")
    placed = tmp / "new-paimon" / "cat=a" / "bucket-0" / f"data-{uuid.uuid4()}-0.parquet"
    shutil.copy(tmp / "one.parquet", placed)
    rec.values["ADD"] = str(placed.relative_to(tmp / "new-paimon"))
    rec.run("paimon", "commit", "{T}", "--add", "{ADD}", "--json")
    rec.run("paimon", "write", "{T}", "--from", "{TMP}/one.parquet", "--overwrite", "cat=a", "--json")
    rec.run("paimon", "write", "{T}", "--from", "{TMP}/missing.parquet", "--json")


def iceberg_cases(rec: Recorder, tmp: Path) -> None:
    """A Hadoop-layout Iceberg table made by ``create-table`` and two ``write``s, tagged with pyiceberg."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table

    root = tmp / "iceberg"
    rec.values.update(T=str(root), TAG="t1")
    create = ("create-table", "{T}", "--format", "iceberg", "--schema", "{TMP}/schema.json")
    rec.run("iceberg", *create, "--partition-keys", "cat", "--json")
    rec.run("iceberg", *create, "--json")
    first = rec.run("iceberg", "write", "{T}", "--from", "{TMP}/rows.parquet", "--json")
    rec.values["S1"] = str(first["snapshotId"])
    rec.run("iceberg", "write", "{T}", "--from", "{TMP}/one.parquet", "--dry-run", "--json", text_too=True)
    rec.run("iceberg", "commit", "{T}", "--add", "{TMP}/one.parquet", "--dry-run", "--json", text_too=True)
    rec.run("iceberg", "commit", "{T}", "--add", "{TMP}/one.parquet", "--json")
    # overwrites change nothing here (a dry run, a refusal): the cases after them see the same table
    overwrite = ("write", "{T}", "--from", "{TMP}/one.parquet", "--json")
    rec.run("iceberg", *overwrite, "--overwrite", "cat=a", "--dry-run", text_too=True)
    rec.run("iceberg", *overwrite, "--overwrite-filter", "cat = 'b'")
    open_path_table(str(root)).table.manage_snapshots().create_tag(int(rec.values["S1"]), "t1").commit()
    _plant_stray(root / "data" / "cat=a")
    _table_cases(rec, "iceberg", lambda: _corrupt_iceberg_metadata(root))


def no_table_cases(rec: Recorder, tmp: Path) -> None:
    """Every command but create-table on a missing path (required options get a dummy), and two more."""
    (tmp / "empty").mkdir()
    for name, sub in _subparsers(cli.build_parser()).choices.items():
        if name in ("create-table", "completion"):
            continue
        required = [a.option_strings[-1] for a in sub._actions if a.required and a.option_strings]
        dummies = [part for flag in required for part in (flag, "{TMP}/rows.parquet")]
        rec.run("no table", name, "{TMP}/missing", *dummies, "--json")
    rec.run("no table", "snapshots", "{TMP}/missing", "--format", "iceberg", "--json")
    rec.run("no table", "snapshots", "{TMP}/empty", "--json")
    rec.run("completion", "completion", "bash")
    rec.run("completion", "completion", "fish")


def record_everything(sample: Path, tmp: Path) -> dict[str, Any]:
    _write_inputs(tmp)
    rec = Recorder({"TMP": str(tmp)})
    paimon_cases(rec, sample)
    paimon_write_cases(rec, tmp)
    iceberg_cases(rec, tmp)
    no_table_cases(rec, tmp)
    return {"parser": parser_shape(cli.build_parser()), "cases": rec.cases}


@contextlib.contextmanager
def _in_directory(tmp: Path) -> Iterator[None]:
    """Relative paths a command might write resolve under the test's directory."""
    old = os.getcwd()
    os.chdir(tmp)
    try:
        yield
    finally:
        os.chdir(old)


def test_cli_matches_the_golden_record(sample_tables: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with _in_directory(work):
        actual = record_everything(sample_tables, work)
    if os.environ.get(UPDATE_VARIABLE) == "1":
        GOLDEN.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
        return
    assert GOLDEN.exists(), f"no {GOLDEN}: run with {UPDATE_VARIABLE}=1 to record it"
    differences = compare(json.loads(GOLDEN.read_text()), actual)
    assert not differences, (
        f"the CLI differs from {GOLDEN.name} ({len(differences)} difference(s); if intended, regenerate "
        f"with {UPDATE_VARIABLE}=1 and review the diff):\n" + "\n".join(differences)
    )


def test_the_comparison_reports_a_dropped_key() -> None:
    golden = json.loads(GOLDEN.read_text())
    changed = copy.deepcopy(golden)
    case = "paimon: expire {T} --dry-run --json"
    del changed["cases"][case]["stdout"]["decisions"]
    changed["parser"]["commands"]["files"]["options"]["--tag"]["required"] = True

    assert compare(golden, changed) == [
        "parser › commands › files › options › --tag › required: expected false, found true",
        f'cases › {case} › stdout › decisions: missing (expected ["str"])',
    ]
    assert compare(golden, golden) == []
