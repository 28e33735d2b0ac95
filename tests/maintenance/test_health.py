"""``table.health()`` and ``lakeformat health`` (issue 28 point 1): on tables made to have one problem each,
health recommends exactly the operation that fixes it, and none after that operation ran; a healthy table
scores 100 with no recommendation; everything comes from the metadata (data files made unreadable)."""

from __future__ import annotations

import io
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.cli import main
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.health.score import health_score
from airflow_lakeformat.core.health.thresholds import Thresholds
from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable, open_table

SCHEMA = [{"name": "p", "type": "STRING"}, {"name": "k", "type": "BIGINT"}, {"name": "v", "type": "STRING"}]


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out)
    return code, out.getvalue()


def create(
    root: Path, fmt: str, *options: str, primary_keys: str | None = None
) -> PaimonTable | IcebergLakeTable:
    schema = root.parent / f"{root.name}.schema.json"
    schema.write_text(
        json.dumps(
            SCHEMA
            if primary_keys is None
            else [
                {**f, "type": f["type"] + " NOT NULL"} if f["name"] in primary_keys.split(",") else f
                for f in SCHEMA
            ]
        )
    )
    argv = ["create-table", str(root), "--format", fmt, "--schema", str(schema), "--partition-keys", "p"]
    if primary_keys:
        argv += ["--primary-keys", primary_keys]
    for option in options:
        argv += ["--option", option]
    code, text = run(*argv)
    assert code == 0, text
    return open_table(str(root))


def write(table: PaimonTable | IcebergLakeTable, n: int, start: int = 0, partition: str = "a") -> None:
    for i in range(start, start + n):
        rows = pa.table({"p": [partition], "k": pa.array([i], pa.int64()), "v": [f"v{i}"]})
        table.writes().write_rows(rows, commit_user="health-test", commit_identifier=i + 1)


def fix(table: PaimonTable | IcebergLakeTable) -> list[str]:
    """Run every recommended operation with the arguments health gives; the operations run."""
    health = table.health()
    for r in health.recommendations:
        getattr(table.maintenance, r.operation)(**r.arguments)
    return health.operations


def expire_settings(fmt: str) -> tuple[str, ...]:
    if fmt == "paimon":
        return ("snapshot.time-retained=1 ms", "snapshot.num-retained.min=1")
    return ("history.expire.max-snapshot-age-ms=1", "history.expire.min-snapshots-to-keep=1")


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_small_files_recommend_compact_data_and_none_after_it(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path / "t", fmt)
    write(table, 5)
    health = open_table(str(tmp_path / "t")).health()
    assert health.operations == ["compact_data"], health.to_json()["recommendations"]
    rec = health.recommendations[0]
    assert (rec.metric, rec.value, rec.threshold, rec.arguments) == ("smallFilesPerPartition", 5, 5, {})
    assert health.files["dataFiles"] == 5 and health.files["compactableSmallFiles"] == 5
    assert health.score == 60 and health.penalties["smallFiles"] == 40
    assert [p.partition for p in health.partitions] == ["p=a"]
    assert fix(table) == ["compact_data"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [] and after.score == 100, after.to_json()
    assert after.files["dataFiles"] == 1


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_a_healthy_table_scores_100_from_metadata_only(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path / "t", fmt)
    write(table, 2)
    data = [Path(f.path.removeprefix("file://")) for f in table.files()]
    assert data and all(p.exists() for p in data)
    for path in data:
        os.chmod(path, 0)
    try:
        health = open_table(str(tmp_path / "t")).health()
    finally:
        for path in data:
            os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
    assert health.score == 100 and health.recommendations == []
    document = health.to_json()
    assert document["files"]["dataFiles"] == 2 and document["snapshots"]["count"] >= 2
    assert "recommends nothing (healthy)" in health.summary()


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_snapshots_past_retention_recommend_expire_snapshots(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path / "t", fmt, *expire_settings(fmt))
    write(table, 3)
    health = open_table(str(tmp_path / "t")).health()
    assert health.operations == ["expire_snapshots"], health.to_json()["recommendations"]
    assert health.snapshots["expirable"] >= 2 and health.snapshots["oldestAgeMs"] > 0
    assert health.recommendations[0].arguments == {"dry_run": False}
    assert fix(table) == ["expire_snapshots"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [], after.to_json()["recommendations"]


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_many_small_manifests_recommend_compact_manifests(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path / "t", fmt, "lakeformat.health.max-small-manifests=3")
    for i, partition in enumerate("abcd"):
        write(table, 1, start=i, partition=partition)
    health = open_table(str(tmp_path / "t")).health()
    assert health.operations == ["compact_manifests"], health.to_json()["recommendations"]
    assert health.manifests["small"] >= 3
    assert fix(table) == ["compact_manifests"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [], after.to_json()


def test_level_zero_runs_of_a_primary_key_table_recommend_compact_data(tmp_path: Path) -> None:
    table = create(
        tmp_path / "t", "paimon", "bucket=1", "num-sorted-run.compaction-trigger=3", primary_keys="p,k"
    )
    write(table, 4)
    health = open_table(str(tmp_path / "t")).health()
    assert health.operations == ["compact_data"], health.to_json()["recommendations"]
    assert health.recommendations[0].metric == "sortedRunsPerBucket"
    assert health.deletes["maxSortedRuns"] == 4 and health.deletes["bucketsOverTrigger"] == 1
    assert health.penalties["deleteLoad"] == 40
    assert fix(table) == ["compact_data"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [] and after.score == 100, after.to_json()


def test_cli_prints_the_document_and_a_summary(tmp_path: Path) -> None:
    table = create(tmp_path / "t", "paimon")
    write(table, 5)
    code, text = run("health", str(tmp_path / "t"), "--json")
    assert code == 0, text
    document: dict[str, Any] = json.loads(text)
    assert [r["operation"] for r in document["recommendations"]] == ["compact_data"]
    assert set(document["recommendations"][0]) == {
        "operation",
        "reason",
        "metric",
        "value",
        "threshold",
        "expected",
        "arguments",
    }
    code, text = run("health", str(tmp_path / "t"))
    assert code == 0 and "score 60" in text and "compact_data" in text


def test_thresholds_and_score_rules() -> None:
    assert health_score(small=1.0, deletes=1.0, positions=1.0)[0] == 0
    assert health_score(small=0.0, deletes=0.0, positions=0.0) == (
        100,
        {"smallFiles": 0.0, "deleteLoad": 0.0, "positionDeletes": 0.0},
    )
    assert Thresholds.resolve({}, max_sorted_runs=3).max_sorted_runs == 3
    assert Thresholds.resolve({"lakeformat.health.delete-ratio": "0.5"}).delete_ratio == 0.5
    with pytest.raises(UsageError, match=r"lakeformat\.health\.min-small-files"):
        Thresholds.resolve({"lakeformat.health.min-small-files": "many"})


def test_iceberg_deletes_recommend_compact_data_that_applies_them(tmp_path: Path) -> None:
    from tests.support.iceberg_compaction import build

    build(tmp_path, "hadoop")  # a: 5 small files + a position delete, b: 3 files + an equality delete
    table = open_table(str(tmp_path / "t"))
    health = table.health()
    assert health.operations == ["compact_data"], health.to_json()["recommendations"]
    assert {k: health.deletes[k] for k in ("positionDeleteFiles", "equalityDeleteFiles")} == {
        "positionDeleteFiles": 1,
        "equalityDeleteFiles": 1,
    }
    assert health.penalties == {"smallFiles": 25.0, "deleteLoad": 25.0, "positionDeletes": 12.5}
    assert health.recommendations[0].arguments == {
        "options": {"delete-file-threshold": "1", "remove-dangling-deletes": "true"}
    }
    assert fix(table) == ["compact_data"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [] and after.score == 100 and after.deletes["deleteFiles"] == 0, (
        after.to_json()
    )


def test_paimon_partitions_past_expiration_recommend_expire_partitions(tmp_path: Path) -> None:
    options = ("partition.expiration-time=7 d", "partition.timestamp-formatter=yyyy-MM-dd")
    table = create(tmp_path / "t", "paimon", *options)
    write(table, 1, partition="2020-01-01")
    write(table, 1, start=1, partition="2999-01-01")
    health = table.health()
    assert health.operations == ["expire_partitions"], health.to_json()["recommendations"]
    assert health.expirable_partitions == ["2020-01-01"]
    assert fix(table) == ["expire_partitions"]
    after = open_table(str(tmp_path / "t")).health()
    assert after.operations == [] and after.expirable_partitions == [], after.to_json()


@pytest.mark.parametrize("fmt", ["paimon", "iceberg"])
def test_planted_orphans_recommend_remove_orphan_files_only_when_asked(tmp_path: Path, fmt: str) -> None:
    table = create(tmp_path / "t", fmt)
    write(table, 1)
    planted = Path(table.files()[0].path.removeprefix("file://")).parent / "planted.parquet"
    planted.write_bytes(b"x" * 100)
    old = time.time() - 5 * 86400
    os.utime(planted, (old, old))
    assert table.health().operations == [] and table.health().orphans is None
    health = table.health(orphans=True)
    assert health.operations == ["remove_orphan_files"], health.to_json()["recommendations"]
    assert health.orphans == {"files": 1, "bytes": 100}
    assert fix_with_orphans(table) == ["remove_orphan_files"]
    assert not planted.exists()
    after = table.health(orphans=True)
    assert after.operations == [] and after.orphans == {"files": 0, "bytes": 0}


def fix_with_orphans(table: PaimonTable | IcebergLakeTable) -> list[str]:
    health = table.health(orphans=True)
    for r in health.recommendations:
        getattr(table.maintenance, r.operation)(**r.arguments)
    return health.operations
