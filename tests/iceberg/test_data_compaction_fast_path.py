"""The fast paths of Iceberg data compaction: the direct pyarrow read (field-id projection, position deletes as a
mask) equals pyiceberg's ArrowScan; groups rewritten concurrently give what serial gives, in group order, and a
failing group removes exactly its own files; the per-column dictionary decision of the writer."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.types import IntegerType, LongType, StringType

from airflow_lakeformat.core.iceberg.maintenance import data_compaction_rewrite as rewrite
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_run as run
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, local_path, write_parquet
from tests.iceberg.scenarios import create_table, rows

DAY = datetime.date(2024, 1, 1)


def _group_files(table, plan):
    head = table.snapshot(plan.snapshot_id)
    needed = [c.path for g in plan.groups for c in g.files] + [p for g in plan.groups for p in g.delete_files]
    return data_files_by_path(table, head, needed)


def _evolved_table(tmp_path: Path):
    """Partition a: a file before any evolution, one with an int column ``n``; then ``n`` promoted to long, ``s``
    renamed ``name``, a column ``z`` added; a file of the new schema; a position delete of the first file's row 1."""
    table = create_table("hadoop", 2, tmp_path)
    write.append(table, rows([0, 1, 2], "a", DAY))
    pyt = table.table
    with pyt.update_schema() as update:
        update.add_column("n", IntegerType())
    table.refresh()
    write.append(table, rows([3, 4], "a", DAY).append_column("n", pa.array([30, 40], pa.int32())))
    with table.table.update_schema() as update:
        update.update_column("n", LongType())
        update.rename_column("s", "name")
        update.add_column("z", StringType())
    table.refresh()
    newest = rows([5], "a", DAY, name_column="name").append_column("n", pa.array([50], pa.int64()))
    write.append(table, newest.append_column("z", pa.array(["zz"], pa.string())))
    plan = plan_data_compaction(table, {"rewrite-all": "true"})
    first = next(c for c in plan.groups[0].files if pq.read_table(local_path(c.path)).num_rows == 3)
    pos = write_parquet(
        tmp_path / "landing" / "pos.parquet",
        pa.table({"file_path": [first.path], "pos": pa.array([1], pa.int64())}),
    )
    commit_delete_files(
        table, [data_file(table.table, pos, ("a",), content=DataFileContent.POSITION_DELETES)]
    )
    return table


def test_the_direct_read_projects_by_field_id_as_arrow_scan_does(tmp_path) -> None:
    table = _evolved_table(tmp_path)
    plan = plan_data_compaction(table, {"rewrite-all": "true"})
    files = _group_files(table, plan)
    (group,) = plan.groups
    deletes = rewrite.PositionDeletes(table)
    for candidate in group.files:
        assert (
            rewrite.read_direct(table, files[candidate.path], deletes.positions(files[candidate.path], []))
            is not None
        )
        fast = pa.Table.from_batches(list(rewrite.read_live_rows(table, candidate, files, {}, deletes)))
        scan = pa.Table.from_batches(list(rewrite.read_live_rows(table, candidate, files, {}, None)))
        assert fast.equals(scan), (fast, scan)
    every = pa.concat_tables(
        pa.Table.from_batches(list(rewrite.read_live_rows(table, c, files, {}, deletes))) for c in group.files
    ).sort_by("id")
    assert every.column_names == ["id", "cat", "name", "d", "n", "z"]
    assert every.column("id").to_pylist() == [0, 2, 3, 4, 5]  # row 1 deleted by position
    assert every.column("name").to_pylist() == ["v0", "v2", "v3", "v4", "v5"]  # followed through the rename
    assert every.schema.field("n").type == pa.int64() and every.column("n").to_pylist() == [
        None,
        None,
        30,
        40,
        50,
    ]
    assert every.column("z").to_pylist() == [None, None, None, None, "zz"]


def _three_partitions(tmp_path: Path, name: str):
    table = create_table("hadoop", 2, tmp_path, name=name)
    for cat in ("a", "b", "c"):
        for first in range(0, 9, 3):
            write.append(table, rows([first, first + 1, first + 2], cat, DAY))
    return table


def _slow_first_group(monkeypatch, groups) -> None:
    """The first group finishes last, whatever thread takes it."""
    original = run.rewrite_group

    def rewrite_group(table, group, files):
        if group == groups[0]:
            threading.Event().wait(0.3)
        return original(table, group, files)

    monkeypatch.setattr(run, "rewrite_group", rewrite_group)


def _content(table, snapshot_id):
    scan = table.table.scan(snapshot_id=snapshot_id).plan_files()
    return sorted(
        (
            task.file.partition[0],
            sorted(pq.read_table(local_path(task.file.file_path)).column("id").to_pylist()),
        )
        for task in scan
    )


def test_concurrent_groups_commit_what_serial_groups_commit_in_group_order(tmp_path, monkeypatch) -> None:
    serial, concurrent = _three_partitions(tmp_path, "serial"), _three_partitions(tmp_path, "concurrent")
    plan = plan_data_compaction(concurrent, {"min-input-files": "2"})
    assert len(plan.groups) == 3
    _slow_first_group(monkeypatch, plan.groups)
    results = list(
        run.rewrite_in_process(concurrent, plan.groups, _group_files(concurrent, plan), concurrency=3)
    )
    assert [r.group for r in results] == list(plan.groups)
    run.discard_written(concurrent, [loc for r in results for loc in r.locations], "test")
    one = run.compact_data(serial, {"min-input-files": "2", "max-concurrent-file-group-rewrites": "1"})
    two = run.compact_data(concurrent, {"min-input-files": "2", "max-concurrent-file-group-rewrites": "3"})
    assert (one.groups_committed, one.files_added) == (two.groups_committed, two.files_added) == (3, 3)
    assert _content(serial, one.snapshot_id) == _content(concurrent, two.snapshot_id)
    assert [p for p, _ in _content(concurrent, two.snapshot_id)] == ["a", "b", "c"]


def test_a_failing_group_of_a_concurrent_run_removes_exactly_its_own_files(tmp_path, monkeypatch) -> None:
    table = _three_partitions(tmp_path, "t")
    plan = plan_data_compaction(table, {"min-input-files": "2"})
    groups = plan.groups[:2]
    both_written = threading.Barrier(2, timeout=30)
    original = run.rewrite_group
    failed: list[str] = []

    def rewrite_group(table, group, files):
        outcome = original(table, group, files)  # each group wrote its file
        both_written.wait()  # ...while the other one is in flight
        if group == groups[1]:
            failed.extend(outcome.locations)
            raise RuntimeError("the second group fails")
        return outcome

    monkeypatch.setattr(run, "rewrite_group", rewrite_group)
    yielded = []
    with pytest.raises(RuntimeError, match="the second group fails"):
        for outcome in run.rewrite_in_process(table, groups, _group_files(table, plan), concurrency=2):
            yielded.append(outcome)
    assert [r.group for r in yielded] == [groups[0]]
    assert failed and not any(Path(local_path(loc)).exists() for loc in failed)
    kept = yielded[0].locations
    assert kept and all(Path(local_path(loc)).exists() for loc in kept)  # the caller's to discard or commit


def test_only_columns_that_repeat_values_keep_their_dictionary(tmp_path) -> None:
    sample = pa.table({"id": pa.array(range(1000), pa.int64()), "cat": pa.array(["a", "b"] * 500)})
    assert rewrite.dictionary_columns(sample) == ["cat"]
    nested = pa.table({"s": pa.array([{"x": 1}, {"x": 2}])})
    assert rewrite.dictionary_columns(nested) is True
    table = create_table("hadoop", 2, tmp_path)
    for first in range(0, 3000, 1000):
        write.append(table, rows(list(range(first, first + 1000)), "a", DAY))
    result = run.compact_data(table, {"min-input-files": "2"})
    (task,) = table.table.scan(snapshot_id=result.snapshot_id).plan_files()
    row_group = pq.ParquetFile(local_path(task.file.file_path)).metadata.row_group(0)
    dictionary = {
        row_group.column(i).path_in_schema: row_group.column(i).has_dictionary_page for i in range(4)
    }
    assert dictionary == {"id": False, "cat": True, "s": False, "d": True}
