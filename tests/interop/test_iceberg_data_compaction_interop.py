"""Our Iceberg data compaction on tables Java Iceberg 1.10.2 wrote, read back by Java.

For each table of the oracle's foundation set, restored to pristine at the same path: after ``compact_data`` Java
reads exactly the rows it read before (deleted rows stay deleted, none lost, none duplicated) and Java's ``files``
table lists our new files with record counts that add up to those rows; the current snapshot holds fewer data
files; a table whose group spans an older partition spec is refused typed and left exactly as it was (no file
added, none removed). One oracle request reads everything after the runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import hadoop_checksum
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_commit import (
    RewriteCommit,
    StagedRewrite,
    stage_rewrite,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import rewrite_group
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path
from airflow_lakeformat.core.iceberg.maintenance.delete_compaction import compact_deletes
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry
from tests.support.java_iceberg import JDBC_CATALOG, JavaIcebergWarehouse

pytestmark = [pytest.mark.interop, pytest.mark.slow]

COMPACTED = ("v1", "v2_cow", "v2_mor", "v1_to_v2", "tags_branches", "many_commits", "jdbc_basic")
OPTIONS = {"min-input-files": "2"}


def _open(w: JavaIcebergWarehouse, name: str) -> IcebergTable:
    summary = w.tables[name]
    catalog, namespace, table = summary["identifier"].split(".")
    if catalog == JDBC_CATALOG:
        properties = {"type": "sql", "uri": f"sqlite:///{w.catalog_db}", "warehouse": w.warehouse.as_uri()}
        return open_catalog_table(
            f"{namespace}.{table}", catalog_name=JDBC_CATALOG, catalog_properties=properties
        )
    return open_path_table(summary["path"])


def _data_files(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in files if f["content"] == 0]


def test_java_reads_the_same_rows_after_our_compaction(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    w = fresh_java_iceberg_warehouse
    hadoop = [n for n in COMPACTED if not w.tables[n]["identifier"].startswith(f"{JDBC_CATALOG}.")]
    # the checksum Hadoop's file system keeps beside version-hint.text: our formula on Java's own files
    for name in hadoop:
        hint, crc = _hint_and_checksum(w, name)
        assert hadoop_checksum(hint) == crc, name
    results = {name: compact_data(_open(w, name), OPTIONS) for name in COMPACTED}
    rewritten = [name for name, r in results.items() if r.snapshot_id is not None]
    assert {"v2_mor", "many_commits"} <= set(rewritten), {n: r.summary() for n, r in results.items()}
    identifiers = [w.tables[name]["identifier"] for name in rewritten]
    views = w.batch(
        [
            cmd
            for i in identifiers
            for cmd in (["rows", "--table", i], ["files", "--table", i, "--source", "java"])
        ]
    )
    for k, name in enumerate(rewritten):
        rows, files = views[2 * k], views[2 * k + 1]
        baseline = w.baseline[name]
        assert rows == baseline["rows"], name
        before = _data_files(baseline["files"]["snapshots"][str(baseline["files"]["current_snapshot_id"])])
        after = _data_files(files)
        assert len(after) < len(before), name
        assert sum(f["record_count"] for f in after) == len(rows), name
        ours = {f["file_path"] for f in after} - {f["file_path"] for f in before}
        assert len(ours) == results[name].files_added, name
        if name in hadoop:  # our commit rewrote the hint and kept its checksum true
            hint, crc = _hint_and_checksum(w, name)
            assert hadoop_checksum(hint) == crc and int(hint) > 1, name


def _hint_and_checksum(w: JavaIcebergWarehouse, name: str) -> tuple[bytes, bytes]:
    metadata = Path(w.tables[name]["path"]) / "metadata"
    return (metadata / "version-hint.text").read_bytes(), (metadata / ".version-hint.text.crc").read_bytes()


def test_a_group_of_an_older_spec_is_refused_and_the_table_left_as_it_was(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    w = fresh_java_iceberg_warehouse
    before = w.listing()
    table = _open(w, "partition_evolution")
    with pytest.raises(UnsupportedFormatError, match="older partition spec"):
        compact_data(table, {"rewrite-all": "true"})
    assert w.listing() == before


@pytest.mark.parametrize("name", ["v2_mor", "many_commits"])
def test_we_leave_no_more_data_or_delete_files_than_javas_rewrite_data_files(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse, name: str
) -> None:
    """Same table, same options (restored at the same path in between): ours, then Java's procedure."""
    w = fresh_java_iceberg_warehouse
    identifier = w.tables[name]["identifier"]
    options = {"min-input-files": "2", "remove-dangling-deletes": "true"}
    ours = compact_data(_open(w, name), options)
    assert ours.snapshot_id is not None, ours.summary()
    our_files, our_rows = w.batch(
        [["files", "--table", identifier, "--source", "java"], ["rows", "--table", identifier]]
    )
    w.restore()
    java_result = w.call("rewrite_data_files", identifier, options={"map": options})
    java_files, java_rows = w.batch(
        [["files", "--table", identifier, "--source", "java"], ["rows", "--table", identifier]]
    )
    assert our_rows == java_rows == w.baseline[name]["rows"]
    ours_data, java_data = _data_files(our_files), _data_files(java_files)
    assert len(ours_data) <= len(java_data), (len(ours_data), len(java_data), java_result)
    ours_deletes = [f for f in our_files if f["content"] != 0]
    java_deletes = [f for f in java_files if f["content"] != 0]
    assert len(ours_deletes) <= len(java_deletes), (ours.to_json(), java_result)


def test_an_equality_delete_and_an_append_landing_during_our_compaction_keep_the_row_deleted(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    """apache/iceberg #10312 (open in 1.10.2): a compaction starts; an equality delete lands, then an append; the
    compaction commits. Java's commit drops the equality delete (its sequence number is below the kept manifests'
    minimum) while the compacted file, at the starting data sequence number, still needs it, and the deleted row
    comes back. Ours validates on the new head, keeps the delete, and Java reads the row as deleted."""
    w = fresh_java_iceberg_warehouse
    identifier = "hc.db.equality_deletes"
    w.run(
        "sql",
        "--statement",
        f"CREATE TABLE {identifier} (id BIGINT, category STRING) USING iceberg PARTITIONED BY (category)"
        " TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')",
        "--statement",
        f"INSERT INTO {identifier} VALUES (1, 'a'), (2, 'a')",
        "--statement",
        f"INSERT INTO {identifier} VALUES (3, 'a'), (4, 'a')",
    )
    root = w.warehouse / "db" / "equality_deletes"
    table = open_path_table(str(root))
    plan = plan_data_compaction(table, {"min-input-files": "2"})
    assert len(plan.groups) == 1
    start = table.snapshot(plan.snapshot_id)
    group = plan.groups[0]
    files = data_files_by_path(table, start, [c.path for c in group.files])
    rewritten = rewrite_group(table, group, files)  # the compaction is running...

    # ...when a Flink-style equality delete of id 2 (a row delta) and then an append land
    delete_path = root / "data" / "category=a" / "00000-flink-eq-delete.parquet"
    id_field = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
    pq.write_table(pa.table({"id": [2]}, schema=pa.schema([id_field])), delete_path)
    w.run(
        "add-equality-deletes", "--table", identifier, "--file", str(delete_path),
        "--equality-id", "1", "--partition-path", "category=a", "--record-count", "1",
    )  # fmt: skip
    w.run("sql", "--statement", f"INSERT INTO {identifier} VALUES (5, 'a')")
    assert _ids(w.rows(identifier)) == [1, 3, 4, 5]

    commit = RewriteCommit(
        plan.snapshot_id or 0,
        plan.sequence_number,
        [([files[c.path] for c in group.files], rewritten.outputs)],
        remove_dangling_deletes=True,
    )
    staged = StagedRewrite()
    table.refresh()
    commit_with_retry(table, lambda tx: stage_rewrite(tx, table, commit, staged))
    assert staged.snapshot_id is not None and not staged.conflicts
    assert staged.deletes_removed == []  # the delete still applies to the compacted file: it is not dangling
    assert _ids(w.rows(identifier)) == [1, 3, 4, 5]
    table.refresh()
    new = [f for f in live_files(table, table.snapshot(ref="main")) if f.snapshot_id == staged.snapshot_id]
    assert [f.data_sequence_number for f in new] == [start.sequence_number]


def _ids(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(int(r["id"]) for r in rows)


def test_compact_deletes_merges_position_deletes_and_drops_dangling_records_as_java_reads_them(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    w = fresh_java_iceberg_warehouse
    name = "v2_mor"
    identifier = w.tables[name]["identifier"]
    before = w.baseline[name]
    delete_files_before = [
        f
        for f in before["files"]["snapshots"][str(before["files"]["current_snapshot_id"])]
        if f["content"] == 1
    ]
    merged = compact_deletes(_open(w, name), {"rewrite-all": "true"})
    assert merged.snapshot_id is not None and merged.dangling_records == 0, merged.summary()
    files, rows = w.batch(
        [["files", "--table", identifier, "--source", "java"], ["rows", "--table", identifier]]
    )
    assert rows == before["rows"]
    after = [f for f in files if f["content"] == 1]
    assert len(after) < len(delete_files_before)
    assert sum(f["record_count"] for f in after) == sum(f["record_count"] for f in delete_files_before)
    # after a data compaction (dangling deletes kept), every remaining delete record is dangling: all go
    compact_data(_open(w, name), {"rewrite-all": "true"})
    cleaned = compact_deletes(_open(w, name), {"rewrite-all": "true"})
    assert cleaned.dangling_records == sum(f["record_count"] for f in after) and cleaned.files_added == 0
    files, rows = w.batch(
        [["files", "--table", identifier, "--source", "java"], ["rows", "--table", identifier]]
    )
    assert rows == before["rows"] and [f for f in files if f["content"] == 1] == []
