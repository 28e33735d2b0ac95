"""Live files: ADD/DELETE folded over base + delta lists with Paimon's identity rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import DuplicateFileError
from airflow_lakeformat.core.paimon.live_files import live_entries, live_files
from airflow_lakeformat.core.paimon.manifest import FileKind, merge_entries
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.tables import TableBuilder


def names(table: Table, snapshot_id: int) -> list[str]:
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    return sorted(e.file.file_name for e in live_entries(table, snapshot))


def test_overwrite_and_unmatched_deletes(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", [("p", "STRING"), ("v", "INT")], ["p"])
    a1, a2, b1 = (
        b.entry(("a",), file_name="a1"),
        b.entry(("a",), file_name="a2"),
        b.entry(("b",), file_name="b1"),
    )
    b.commit([a1, a2])
    b.commit([b1])
    # The DELETEs' ADDs live in an older manifest: they must still cancel them.
    b.commit([b.delete_of(a1), b.delete_of(a2), b.entry(("a",), file_name="a3")], kind=CommitKind.OVERWRITE)
    table = Table.open(str(b.root))
    assert names(table, 1) == ["a1", "a2"]
    assert names(table, 2) == ["a1", "a2", "b1"]
    assert names(table, 3) == ["a3", "b1"]


def test_level_upgrade_is_a_different_identity(tmp_path: Path) -> None:
    b = TableBuilder(
        tmp_path / "t", [("k", "INT"), ("v", "INT")], primary_keys=["k"], options={"bucket": "2"}
    )
    f0 = b.entry((), bucket=1, file_name="f", level=0)
    b.commit([f0])
    upgraded = b.entry((), bucket=1, file_name="f", level=5)
    b.commit([b.delete_of(f0), upgraded], kind=CommitKind.COMPACT)
    table = Table.open(str(b.root))
    [entry] = live_entries(table, table.snapshot_manager.snapshot(2))
    assert (entry.file.file_name, entry.file.level) == ("f", 5)


def test_same_name_in_another_partition_or_bucket_is_another_file(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", [("p", "INT"), ("v", "INT")], ["p"])
    b.commit([b.entry((1,), 0, "same"), b.entry((2,), 0, "same"), b.entry((1,), 1, "same")])
    table = Table.open(str(b.root))
    assert len(live_entries(table, table.snapshot_manager.snapshot(1))) == 3


def test_duplicate_add_is_refused(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", [("p", "INT"), ("v", "INT")], ["p"])
    e = b.entry((1,), 0, "dup")
    b.commit([e])
    b.commit([b.entry((1,), 0, "dup")])
    table = Table.open(str(b.root))
    with pytest.raises(DuplicateFileError, match=r"dup.*added twice"):
        live_entries(table, table.snapshot_manager.snapshot(2))


def test_merge_keeps_unmatched_delete_and_drops_matched_pairs(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", [("p", "INT"), ("v", "INT")], ["p"])
    x, y = b.entry((1,), 0, "x"), b.entry((1,), 0, "y")
    merged = merge_entries([x, b.delete_of(x), b.delete_of(y)])
    assert [(e.kind, e.file.file_name) for e in merged.values()] == [(FileKind.DELETE, "y")]


def test_live_files_on_the_pypaimon_sample(sample_tables: Path) -> None:
    table = Table.open(str(sample_tables / "append_ovw_tbl"))
    manager = table.snapshot_manager
    for snapshot in manager.snapshots():
        files = live_files(table, snapshot)
        assert sum(f.entry.file.row_count for f in files) == snapshot.total_record_count
        for f in files:
            assert (sample_tables / "append_ovw_tbl" / f.path).is_file(), f.path
    tagged = live_files(table, manager.tag("before_overwrite"))
    assert len(tagged) == 4 and {f.partition["dt"] for f in tagged} == {"2024-01-01", "2024-01-02"}
    pk = Table.open(str(sample_tables / "pk_tbl"))
    latest = pk.snapshot_manager.latest_snapshot()
    assert latest is not None
    assert {f.entry.bucket for f in live_files(pk, latest)} == {0, 1}


def test_to_delete_keeps_identity_and_total_buckets_without_sharing_the_record(tmp_path: Path) -> None:
    b = TableBuilder(tmp_path / "t", [("p", "INT"), ("v", "INT")], ["p"])
    added = b.entry((1,), 3, "f", total_buckets=4, level=2, extra_files=["f.index"])
    removed = added.to_delete()
    assert removed.kind is FileKind.DELETE and added.kind is FileKind.ADD
    assert removed.identifier() == added.identifier()
    assert removed.total_buckets == 4 and removed.record["_TOTAL_BUCKETS"] == 4
    removed.file.record["_FILE_SIZE"] = 0
    assert added.file.file_size == 1024
