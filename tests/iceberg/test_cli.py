"""The ``lakeformat`` CLI on Iceberg tables: detection, the read documents, appends, and typed refusals."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.snapshots import snapshots_document
from tests.iceberg.scenarios import build, create_table, rows
from tests.unit.test_cli import run

DAY = datetime.date(2024, 1, 1)


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_read_commands_print_the_core_documents(tmp_path: Path, kind: str) -> None:
    scenario = build(kind, 2, tmp_path)
    table = scenario.table
    if kind == "hadoop":
        target = [str(tmp_path / "t")]  # detected from metadata/*.metadata.json
    else:
        # The SQL catalog keys its rows by catalog name: the same name the writer used ("test").
        target = [
            "db.t",
            "--catalog=test",
            "--catalog-property=type=sql",
            f"--catalog-property=uri=sqlite:///{tmp_path}/catalog.db",
            f"--catalog-property=warehouse=file://{tmp_path}/warehouse",
        ]

    code, out, err = run("snapshots", *target, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["format"] == "iceberg"
    assert document["snapshots"] == snapshots_document(table)["snapshots"]
    assert set(document["refs"]) == {"main", "t1", "b1"}

    for snapshot_id in scenario.snapshots:
        code, out, err = run("files", *target, "--snapshot", str(snapshot_id), "--json")
        assert code == 0, err
        assert json.loads(out)["files"] == files_document(table, snapshot_id=snapshot_id)["files"]
    for ref in ("t1", "b1"):
        code, out, _ = run("files", *target, "--ref", ref, "--json")
        assert json.loads(out)["files"] == files_document(table, ref=ref)["files"]

    code, out, _ = run("manifests", *target, "--json")
    assert code == 0 and json.loads(out)["manifests"]
    code, out, _ = run("inspect", *target, "--json")
    assert code == 0 and json.loads(out)["details"]["formatVersion"] == 2
    code, text, _ = run("files", *target)
    assert code == 0 and text.splitlines()[0].split()[:2] == ["path", "content"]


def test_write_and_commit_append_to_a_hadoop_table(tmp_path: Path) -> None:
    table = create_table("hadoop", 2, tmp_path)
    source = tmp_path / "rows.parquet"
    pq.write_table(rows([1, 2, 3], "a", DAY), source)

    code, out, err = run("write", str(tmp_path / "t"), "--from", str(source), "--json")

    assert code == 0, err
    written = json.loads(out)
    assert (written["format"], written["rowsAdded"]) == ("iceberg", 3)
    table = open_path_table(str(tmp_path / "t"))
    assert table.metadata.current_snapshot_id == written["snapshotId"]
    assert table.table.scan().to_arrow().num_rows == 3
    assert sorted(p.name for p in (tmp_path / "t" / "metadata").glob("v*.metadata.json")) == [
        "v1.metadata.json",
        "v2.metadata.json",
    ]


def test_maintenance_dry_runs_on_iceberg_change_nothing(tmp_path: Path) -> None:
    build("hadoop", 2, tmp_path)
    before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    for argv in (["expire", "--older-than", "0 ms", "--dry-run"], ["remove-orphans", "--dry-run"]):
        code, out, err = run(*argv[:1], str(tmp_path / "t"), *argv[1:], "--json")
        assert code == 0, (argv, err)
        document = json.loads(out)
        assert document["format"] == "iceberg" and document["dryRun"] is True, argv
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == before


def test_format_flag_and_detection_errors(tmp_path: Path, sample_tables: Path) -> None:
    paimon = str(sample_tables / "append_tbl")
    assert json.loads(run("snapshots", paimon, "--json")[1])["format"] == "paimon"  # detected
    code, _, err = run("snapshots", paimon, "--format", "iceberg")
    assert code == 3 and err.startswith("lakeformat: error:")
    (tmp_path / "empty").mkdir()
    code, _, err = run("snapshots", str(tmp_path / "empty"))
    assert code == 3 and str(tmp_path / "empty") in err


def test_compact_manifests_dry_run_then_full_keeps_the_live_files(tmp_path: Path) -> None:
    scenario = build("hadoop", 2, tmp_path)
    root = str(tmp_path / "t")
    before = files_document(scenario.table)["files"]
    listing = sorted(p.name for p in (tmp_path / "t").rglob("*"))

    code, out, err = run("compact-manifests", root, "--dry-run", "--json")
    assert code == 0, err
    dry = json.loads(out)
    assert (dry["operation"], dry["format"], dry["dryRun"], dry["snapshotId"]) == (
        "compact-manifests", "iceberg", True, None,
    )  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == listing  # nothing written

    code, text, err = run("compact-manifests", root, "--full")
    assert code == 0 and "full manifest compaction merged" in text, err
    table = open_path_table(root)
    assert table.metadata.current_snapshot_id != scenario.snapshots[-1]
    assert files_document(table)["files"] == before


# Keys inside these maps are data (file kinds, ref names, option sources), not field names.
_DATA_MAPS = {"files", "bytes", "refsRemoved", "sources", "paths"}


def _field_names(value: object, inside: str = "") -> set[str]:
    """Every key of a JSON document that names a field (per-kind and per-ref maps left out)."""
    names: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if inside not in _DATA_MAPS:
                names.add(key)
            names |= _field_names(item, key)
    elif isinstance(value, list):
        for item in value:
            names |= _field_names(item, inside)
    return names


def _cli_table(tmp_path: Path, fmt: str) -> tuple[str, Path]:
    """A table of ``fmt`` made by the CLI (create-table, one write), and a Parquet file for commit."""
    schema = tmp_path / "schema.json"
    schema.write_text('[{"name": "id", "type": "BIGINT"}]')
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), source)
    root = str(tmp_path / fmt)
    code, _, err = run("create-table", root, "--format", fmt, "--schema", str(schema))
    assert code == 0, err
    return root, source


def test_one_document_shape_per_command_for_both_formats(tmp_path: Path) -> None:
    """operation, format, table, dryRun first; the same keys for the same concepts; camelCase field names;
    bytesFreed 0 in a dry run on both formats, bytesToFree what --apply would free."""
    documents: dict[str, dict[str, dict[str, object]]] = {}
    for fmt in ("paimon", "iceberg"):
        (tmp_path / fmt).mkdir()
        root, source = _cli_table(tmp_path / fmt, fmt)
        placed = Path(root) / ("data" if fmt == "iceberg" else "bucket-0") / "data-placed-0.parquet"
        placed.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pq.read_table(source), placed)
        added = str(placed) if fmt == "iceberg" else "bucket-0/data-placed-0.parquet"
        commands = {
            "write-dry-run": ["write", root, "--from", str(source), "--commit-user", "etl", "--dry-run"],
            "commit-dry-run": ["commit", root, "--add", added, "--commit-user", "etl", "--dry-run"],
            "write": ["write", root, "--from", str(source), "--commit-user", "etl"],
            "commit": ["commit", root, "--add", added, "--commit-user", "etl"],
            "compact-manifests": ["compact-manifests", root, "--dry-run"],
            "expire": ["expire", root, "--older-than", "0 ms", "--retain-min", "1"],
            "remove-orphans": ["remove-orphans", root, "--older-than", "0 ms", "--allow-short-older-than"],
        }
        for name, argv in commands.items():
            code, out, err = run(*argv, "--json")
            assert code == 0, f"{fmt} {name}: {err}"
            documents.setdefault(name, {})[fmt] = json.loads(out)
        code, out, _ = run("snapshots", root, "--json")
        assert len(json.loads(out)["snapshots"]) == 2, (
            "the dry runs committed nothing, the two writes one each"
        )
    for name in ("write", "commit"):
        for fmt in ("paimon", "iceberg"):
            dry, real = documents[f"{name}-dry-run"][fmt], documents[name][fmt]
            assert list(dry) == list(real), (name, fmt)  # one shape, dry run or not
            assert dry["dryRun"] is True and dry["snapshotId"] is None and dry["rowsToAdd"] == 2
            assert real["dryRun"] is False and real["rowsToAdd"] == 0
    for name, by_format in documents.items():
        paimon, iceberg = by_format["paimon"], by_format["iceberg"]
        for fmt, document in by_format.items():
            assert list(document)[:4] == ["operation", "format", "table", "dryRun"], (name, fmt)
            assert document["format"] == fmt
            odd = {k for k in _field_names(document) if not k[:1].islower() or "_" in k or "-" in k}
            assert not odd, f"{fmt} {name}: not camelCase: {sorted(odd)}"
        if name in ("write", "commit"):
            shared = {"snapshotId", "commitKind", "commitUser", "alreadyCommitted", "filesAdded",
                      "filesDeleted", "rowsAdded", "filesDiscarded", "totalRecordCount"}  # fmt: skip
            assert shared <= set(paimon) & set(iceberg), name
            assert paimon["commitUser"] == iceberg["commitUser"] == "etl"
            assert paimon["rowsAdded"] == iceberg["rowsAdded"] == 2 or name == "commit"
        if name in ("expire", "remove-orphans"):
            for document in (paimon, iceberg):
                assert document["dryRun"] is True and document["bytesFreed"] == 0
                assert document["bytesToFree"] == sum(document["bytes"].values())
            assert {"files", "bytes", "bytesFreed", "bytesToFree", "failed"} <= set(paimon) & set(iceberg)
    assert documents["remove-orphans"]["paimon"].keys() >= {"orphanPaths", "orphanPathsTruncated", "report"}
    assert (
        documents["expire"]["paimon"]["bytesToFree"] > 0 and documents["expire"]["iceberg"]["bytesToFree"] > 0
    )
