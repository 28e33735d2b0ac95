"""inspect_document: facts, live-file statistics, maintenance properties and the split_offsets check."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_document
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import data_file, write_parquet
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)


def new_table(root: Path, **properties: str) -> IcebergTable:
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC, properties=properties)
    return open_path_table(str(root))


def multi_row_group_file(path: Path, n: int) -> str:
    ids = list(range(n))
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array(["a"] * n),
            "s": pa.array([f"value-{i:06d}" for i in ids]),
            "d": pa.array([DAY] * n, pa.date32()),
        }
    )
    return write_parquet(path, table, row_group_size=max(1, n // 3))


def test_healthy_table_reports_no_split_offset_problems(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", **{"commit.manifest.min-count-to-merge": "5"})
    write.append(table, rows([1, 2], "a", DAY))
    write.append(table, rows([3], "b", DAY))
    landing = [multi_row_group_file(tmp_path / "landing" / f"f{i}.parquet", 300 + 50 * i) for i in range(3)]
    write.add_files(table, landing)  # pyiceberg records real multi-row-group offsets
    doc = inspect_document(table)
    live = files_document(table)["files"]
    assert (
        doc["details"]["splitOffsets"]["badFileCount"] == 0
        and doc["details"]["splitOffsets"]["manifests"] == []
    )
    assert doc["details"]["splitOffsets"]["checkedFiles"] == len(live) == 5
    assert doc["details"]["splitOffsets"]["filesWithOffsets"] == 5
    assert doc["statistics"]["dataFileCount"] == 5
    assert doc["statistics"]["dataFileBytes"] == sum(f["fileSize"] for f in live)
    assert doc["statistics"]["recordCount"] == 3 + 300 + 350 + 400
    assert doc["statistics"]["smallFileShare"] == 1.0  # all far below 75% of 512 MB
    assert doc["statistics"]["manifestCount"] == 3
    assert doc["details"]["formatVersion"] == 2 and doc["statistics"]["snapshotCount"] == 3
    assert doc["details"]["currentSnapshotId"] == table.metadata.current_snapshot_id
    assert doc["refs"]["main"]["snapshotId"] == doc["details"]["currentSnapshotId"]
    assert (doc["schema"]["id"], doc["schema"]["versions"]) == (0, 1)
    assert doc["details"]["specs"][0]["fields"][0]["name"] == "cat"
    props = doc["properties"]
    assert props["commit.manifest.min-count-to-merge"] == {"value": 5, "default": 100, "set": True}
    assert props["commit.manifest.target-size-bytes"] == {"value": 8388608, "default": 8388608, "set": False}
    assert props["commit.manifest-merge.enabled"]["value"] is True
    assert props["history.expire.max-snapshot-age-ms"]["value"] == 5 * 24 * 3600 * 1000
    assert props["history.expire.min-snapshots-to-keep"]["value"] == 1
    assert props["write.metadata.previous-versions-max"]["value"] == 100


def test_bad_split_offsets_are_reported_per_manifest(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    write.append(table, rows([1], "a", DAY))  # a healthy manifest
    pyt = table.table
    files = {
        name: multi_row_group_file(tmp_path / "landing" / f"{name}.parquet", n)
        for name, n in (
            ("past_eof", 100),
            ("descending", 120),
            ("copied1", 140),
            ("copied2", 400),
            ("ok", 160),
        )
    }
    size = {name: Path(path).stat().st_size for name, path in files.items()}
    bad = [
        data_file(pyt, files["past_eof"], ("a",), split_offsets=[4, size["past_eof"] + 1000]),
        data_file(pyt, files["descending"], ("a",), split_offsets=[200, 100]),
        data_file(pyt, files["copied1"], ("a",), split_offsets=[4, 300]),  # same list, different sizes:
        data_file(pyt, files["copied2"], ("a",), split_offsets=[4, 300]),  # the 1.4.0 copy signature
        data_file(pyt, files["ok"], ("a",), split_offsets=[4]),
    ]
    write.append_data_files(table, bad)
    doc = inspect_document(table)["details"]["splitOffsets"]
    snapshot = table.snapshot()
    assert snapshot is not None
    bad_manifest = next(
        m.manifest_path for m in snapshot.manifests(pyt.io) if m.added_snapshot_id == snapshot.snapshot_id
    )
    assert doc["badManifestCount"] == 1 and doc["badFileCount"] == 4
    (report,) = doc["manifests"]
    assert report["manifest"] == bad_manifest
    assert report["invalidFiles"] == 2 and report["copiedFiles"] == 2
    problems = {entry["path"]: entry["problem"] for entry in report["sample"]}
    assert problems == {
        files["past_eof"]: "out-of-bounds",
        files["descending"]: "not-ascending",
        files["copied1"]: "copied",
        files["copied2"]: "copied",
    }
    assert doc["checkedFiles"] == 6


def test_split_offset_sample_is_capped_but_counts_are_complete(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    pyt = table.table
    paths = [multi_row_group_file(tmp_path / "landing" / f"f{i}.parquet", 50 + i) for i in range(14)]
    write.append_data_files(table, [data_file(pyt, p, ("a",), split_offsets=[-1]) for p in paths])
    doc = inspect_document(table)["details"]["splitOffsets"]
    assert doc["badFileCount"] == 14
    assert len(doc["manifests"][0]["sample"]) == 10
