"""Our Iceberg data compaction on tables Java Iceberg 1.10.2 wrote, read back by Java.

For each table of the oracle's foundation set, restored to pristine at the same path: after ``compact_data`` Java
reads exactly the rows it read before (deleted rows stay deleted, none lost, none duplicated) and Java's ``files``
table lists our new files with record counts that add up to those rows; the current snapshot holds fewer data
files (groups of older partition specs, rewritten into the current spec: ``test_iceberg_repartition_interop.py``).
One oracle request reads everything after the runs.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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


# --- sort compaction: ours and Java's rewrite_data_files(strategy => 'sort') on identical tables ----------------

SORT_TABLES = {
    # Java's own sort order, nulls in the sort column, a merge-on-read position delete, a tag
    "sorted": (None, "id ASC NULLS FIRST"),
    # no table order: the order given, DESC NULLS LAST
    "sorted_given": ("id DESC NULLS LAST", "id DESC NULLS LAST"),
}
SORT_OPTIONS = {"min-input-files": "2", "target-file-size-bytes": "1600"}


def _sort_tables_sql() -> list[str]:
    statements = []
    for name in SORT_TABLES:
        statements += [
            f"CREATE TABLE hc.db.{name} (id BIGINT, name STRING, cat STRING) USING iceberg PARTITIONED BY (cat)"
            " TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')",
        ]
        if name == "sorted":
            statements.append(f"ALTER TABLE hc.db.{name} WRITE ORDERED BY id ASC NULLS FIRST")
        for first in (40, 0, 20, 60):  # several small inserts, unsorted across files
            values = ", ".join(
                f"({'NULL' if k % 7 == 3 else (first + k * 13) % 80}, 'n{first + k}', '{'ab'[k % 5 == 0]}')"
                for k in range(12)
            )
            statements.append(f"INSERT INTO hc.db.{name} VALUES {values}")
        statements.append(f"DELETE FROM hc.db.{name} WHERE id = 26")
    statements.append("ALTER TABLE hc.db.sorted CREATE TAG before_sort")
    return statements


def _metrics_sql(name: str) -> str:
    return (
        "SELECT file_path, record_count, partition.cat AS cat, sort_order_id,"
        " readable_metrics.id.lower_bound AS lo, readable_metrics.id.upper_bound AS hi,"
        f" readable_metrics.id.null_value_count AS nulls FROM hc.db.{name}.files WHERE content = 0"
    )


def _views(w: JavaIcebergWarehouse) -> dict[str, Any]:
    commands: list[list[str]] = []
    for name in SORT_TABLES:
        identifier = f"hc.db.{name}"
        commands += [["rows", "--table", identifier, "--all"], ["sql", "--statement", _metrics_sql(name)]]
    results = w.batch(commands)
    return {name: (results[2 * k], results[2 * k + 1][0]) for k, name in enumerate(SORT_TABLES)}


def _file_position(f: dict[str, Any], descending: bool) -> tuple[int, int]:
    """Where a file belongs in its group's order: all-null files at the nulls' end, else by its first key."""
    if f["nulls"] == f["record_count"]:
        return (2 if descending else 0, 0)
    return (1, -f["hi"] if descending else f["lo"])


def _check_files_in_order(files: list[dict[str, Any]], descending: bool, who: str) -> None:
    """Per partition, the files follow each other in the sort order: bounds never overlap, nulls at their end
    (first for ASC NULLS FIRST, last for DESC NULLS LAST)."""
    sizes = []
    for cat in {f["cat"] for f in files}:
        ordered = sorted((f for f in files if f["cat"] == cat), key=lambda f: _file_position(f, descending))
        sizes.append(len(ordered))
        for left, right in itertools.pairwise(ordered):
            if None in (left["hi"], right["lo"]):
                continue
            if descending:
                assert left["lo"] >= right["hi"], (who, cat, ordered)
            else:
                assert left["hi"] <= right["lo"], (who, cat, ordered)
        with_nulls = [i for i, f in enumerate(ordered) if f["nulls"]]
        edge = len(ordered) - 1 if descending else 0
        assert all(abs(i - edge) < len(with_nulls) for i in with_nulls), (who, cat, ordered)
    assert max(sizes) >= 2, (
        who,
        files,
    )  # a group's output spans several files: the order across them is checked


def test_sort_compaction_leaves_what_javas_sort_rewrite_leaves(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse, tmp_path: Path
) -> None:
    """Sorted table (Java's WRITE ORDERED BY) and an explicit DESC NULLS LAST order on an unsorted table: after our
    compact-data --strategy sort and Java's rewrite_data_files(strategy => 'sort') on identical copies, Java reads
    identical rows at every snapshot and ref, we leave no more data files, our files carry the starting data
    sequence number and Java's files table shows them with true counts and bounds that do not overlap."""
    import tarfile

    from airflow_lakeformat.core.tables import open_table
    from tests.unit.test_cli_tour import run as cli

    w = fresh_java_iceberg_warehouse
    w.run("sql", *[arg for s in _sort_tables_sql() for arg in ("--statement", s)])
    roots = {name: w.warehouse / "db" / name for name in SORT_TABLES}
    pristine = tmp_path / "sort-tables.tar"
    with tarfile.open(pristine, "w") as archive:
        for root in roots.values():
            archive.add(root, arcname=root.name)
    starts = {n: open_path_table(str(r)).snapshot(ref="main") for n, r in roots.items()}

    options = [a for k, v in SORT_OPTIONS.items() for a in ("--option", f"{k}={v}")]
    code, out, _ = cli("compact-data", str(roots["sorted"]), "--strategy", "sort", *options, "--json")
    assert code == 0, out
    ours = {"sorted": json.loads(out)}
    given = open_table(str(roots["sorted_given"])).maintenance.compact_data(
        options=SORT_OPTIONS, sort_order=SORT_TABLES["sorted_given"][0]
    )
    ours["sorted_given"] = given.to_json()
    our_views = _views(w)
    for name, (_, described) in SORT_TABLES.items():
        start = starts[name]
        assert start is not None
        descending = described.startswith("id DESC")
        _check_our_files(
            open_path_table(str(roots[name])), start.sequence_number, our_views[name][1], descending
        )

    for root in roots.values():
        shutil.rmtree(root)
    with tarfile.open(pristine) as archive:
        archive.extractall(roots["sorted"].parent, filter="tar")
    for name, (order, _) in SORT_TABLES.items():
        arguments: dict[str, Any] = {"strategy": "sort", "options": {"map": SORT_OPTIONS}}
        if order:
            arguments["sort_order"] = order
        w.call("rewrite_data_files", f"hc.db.{name}", **arguments)
    java_views = _views(w)

    for name, (_, described) in SORT_TABLES.items():
        document = ours[name]
        assert (document["strategy"], document["sortOrder"]) == ("sort", described), document
        assert document["filesAdded"] >= 2 and document["snapshotId"] is not None, document
        (our_rows, our_files), (java_rows, java_files) = our_views[name], java_views[name]
        start = starts[name]
        # identical rows at every snapshot both sides share, at every ref, and now
        assert start is not None and str(start.snapshot_id) in our_rows["snapshots"]
        for sid, rows in java_rows["snapshots"].items():
            if sid in our_rows["snapshots"]:
                assert our_rows["snapshots"][sid] == rows, (name, sid)
        assert {r: v["rows"] for r, v in our_rows["refs"].items()} == {
            r: v["rows"] for r, v in java_rows["refs"].items()
        }
        current = our_rows["snapshots"][str(our_rows["current_snapshot_id"])]
        assert current == java_rows["snapshots"][str(java_rows["current_snapshot_id"])]
        assert current == our_rows["snapshots"][str(start.snapshot_id)]
        assert len(our_files) <= len(java_files), (name, our_files, java_files)
        # and in fact the same split: Java's range shuffle cut these groups where our equal row counts cut them
        shape = sorted(
            (f["cat"], f["record_count"], str(f["lo"]), str(f["hi"]), f["nulls"]) for f in our_files
        )
        assert shape == sorted(
            (f["cat"], f["record_count"], str(f["lo"]), str(f["hi"]), f["nulls"]) for f in java_files
        ), (name, our_files, java_files)
        descending = described.startswith("id DESC")
        _check_files_in_order(our_files, descending, f"ours {name}")
        _check_files_in_order(java_files, descending, f"java {name}")
        assert {f["sort_order_id"] for f in our_files} == {f["sort_order_id"] for f in java_files} == {0}


def _local(path: str) -> str:
    return "/" + path.removeprefix("file:").lstrip("/")


def _check_our_files(
    table: IcebergTable, start_sequence: int, files: list[dict[str, Any]], descending: bool
) -> None:
    """Our new files: the starting data sequence number, rows in order, and Java's counts and bounds true."""
    name = table.name
    head = table.snapshot(ref="main")
    assert head is not None
    new = {f.path: f for f in live_files(table, head) if f.content == 0 and f.snapshot_id == head.snapshot_id}
    assert new and {f.data_sequence_number for f in new.values()} == {start_sequence}, name
    java = {_local(f["file_path"]): f for f in files}
    for path, entry in new.items():
        ids = pq.read_table(_local(path)).column("id").to_pylist()
        values = [i for i in ids if i is not None]
        nulls = [None] * (len(ids) - len(values))
        assert ids == (sorted(values, reverse=True) + nulls if descending else nulls + sorted(values)), name
        shown = java[_local(path)]
        assert shown["record_count"] == len(ids) == entry.record_count, name
        assert (shown["lo"], shown["hi"], shown["nulls"]) == (
            min(values, default=None),
            max(values, default=None),
            len(nulls),
        ), name
