"""The ``lakeformat`` CLI on Iceberg tables: detection, the read documents, appends, and typed refusals."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

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
