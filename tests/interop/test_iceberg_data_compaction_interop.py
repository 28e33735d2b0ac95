"""Our Iceberg data compaction on tables Java Iceberg 1.10.2 wrote, read back by Java.

For each table of the oracle's foundation set, restored to pristine at the same path: after ``compact_data`` Java
reads exactly the rows it read before (deleted rows stay deleted, none lost, none duplicated) and Java's ``files``
table lists our new files with record counts that add up to those rows; the current snapshot holds fewer data
files; a table whose group spans an older partition spec is refused typed and left exactly as it was (no file
added, none removed). One oracle request reads everything after the runs.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
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
