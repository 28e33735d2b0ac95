"""Manifest compaction: full (Java RewriteManifests) and minor (Java's merge policy), dry run, split_offsets,
concurrency and commit outcomes, on Hadoop-layout and SQL-catalog tables, format v1 and v2."""

from __future__ import annotations

import datetime
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.manifest import ManifestContent, ManifestFile
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import AddSnapshotUpdate

from airflow_lakeformat.core.errors import CommitRetriesExhaustedError, CommitStateUnknownError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.errors import ReadOnlyTableError, UnsupportedWriteVersionError
from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction_plan import plan_manifest_compaction
from airflow_lakeformat.core.iceberg.maintenance.manifest_merge import pack_end, plan_merge
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_document
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy
from tests.iceberg.helpers import data_file, local_path
from tests.iceberg.manifest_compaction_support import (
    Built,
    data_manifests,
    delete_manifests,
    manifest_list,
    many_manifests,
    new_table,
    raw_entries,
    resolved_entries,
    scan_rows,
    table_files,
)
from tests.iceberg.scenarios import rows
from tests.iceberg.test_inspect import multi_row_group_file

DAY = datetime.date(2024, 1, 1)
FAST = RetryPolicy(num_retries=3, min_wait_ms=1, max_wait_ms=2)
KINDS = [("hadoop", 1), ("hadoop", 2), ("sql", 2)]


def every_point(table: Any) -> dict[str, int]:
    """Every snapshot id and every ref of the table, labelled."""
    points = {f"snapshot {s.snapshot_id}": s.snapshot_id for s in table.metadata.snapshots}
    points.update({f"ref {name}": ref.snapshot_id for name, ref in table.metadata.refs.items()})
    return points


def documents(table: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        label: files_document(table, snapshot_id=sid)["files"] for label, sid in every_point(table).items()
    }


def partition_keys(manifest: ManifestFile, table: Any) -> list[tuple[Any, ...]]:
    return [
        tuple(e.data_file.partition[i] for i in range(len(e.data_file.partition)))
        for e in manifest.fetch_manifest_entry(table.table.io)
    ]


# -- full ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "version"), KINDS)
def test_full_compaction_changes_no_live_file_at_any_snapshot_or_ref(
    tmp_path: Path, kind: str, version: int
) -> None:
    built = many_manifests(kind, version, tmp_path, appends=30, appends_after=12, equality_deletes=False)
    table = built.table
    before = documents(table)
    refs_before = dict(table.metadata.refs)
    head = table.snapshot()
    assert head is not None
    rows_before = scan_rows(table)
    entries_before = resolved_entries(table)
    old_data = data_manifests(table)
    old_deletes = delete_manifests(table)
    assert len(old_data) >= 35 and {m.partition_spec_id for m in old_data} == {0, 1}
    assert any((m.deleted_files_count or 0) > 0 for m in old_data)  # the copy-on-write delete's tombstones

    result = compact_manifests(table, "full")

    new_head = table.snapshot()
    assert new_head is not None and result.snapshot_id == new_head.snapshot_id != head.snapshot_id
    # Nothing changed at any older snapshot or ref (they still read their old manifests) ...
    after = documents(table)
    for label, files in before.items():
        if label != "ref main":
            assert after[label] == files, label
    assert {n: r for n, r in table.metadata.refs.items() if n != "main"} == {
        n: r for n, r in refs_before.items() if n != "main"
    }
    # ... and the new head has exactly the live files of the old head (paths, sizes, counts, sequence numbers).
    assert after["ref main"] == before["ref main"]
    assert scan_rows(table) == rows_before
    # One data manifest per spec; delete manifests carried over untouched, after the data manifests.
    new_list = manifest_list(table)
    new_data = [m for m in new_list if m.content == ManifestContent.DATA]
    assert sorted(m.partition_spec_id for m in new_data) == [0, 1]
    assert [m.manifest_path for m in new_list[len(new_data) :]] == [m.manifest_path for m in old_deletes]
    assert delete_manifests(table) == old_deletes and len(old_deletes) == (1 if version == 2 else 0)
    # Every entry EXISTING, snapshot id and sequence numbers explicit and preserved.
    assert resolved_entries(table) == entries_before
    seen = set()
    for manifest in new_data:
        assert manifest.added_snapshot_id == new_head.snapshot_id
        assert manifest.added_files_count == 0 and manifest.deleted_files_count == 0
        for record in raw_entries(manifest.manifest_path):
            path = record["data_file"]["file_path"]
            seen.add(path)
            _content, snapshot_id, seq, file_seq = entries_before[path]
            assert record["status"] == 0 and record["snapshot_id"] == snapshot_id
            if version == 2:
                assert (record["sequence_number"], record["file_sequence_number"]) == (seq, file_seq)
                assert seq is not None and file_seq is not None
            else:
                assert "sequence_number" not in record  # v1 manifests have no sequence numbers
    assert seen == {p for p, v in entries_before.items() if v[0] == 0}
    # The snapshot: replace, Java's summary keys, parent the old head, same schema, next sequence number.
    assert new_head.summary is not None and new_head.summary.operation == Operation.REPLACE
    summary = new_head.summary.additional_properties
    assert summary["manifests-created"] == "2" and summary["manifests-kept"] == "0"
    assert summary["manifests-replaced"] == str(len(old_data))
    assert summary["entries-processed"] == str(len(seen)) == str(result.entries_rewritten)
    assert head.summary is not None
    assert (
        summary.get("total-records") == head.summary["total-records"]
    )  # carried over when the parent has it
    assert new_head.parent_snapshot_id == head.snapshot_id
    assert new_head.schema_id == table.metadata.current_schema_id
    assert new_head.sequence_number == (head.sequence_number + 1 if version == 2 else 0)
    assert result.manifests_before == len(old_data) + len(old_deletes)
    assert result.manifests_after == len(new_list) and result.manifests_rewritten == len(old_data)
    assert result.bytes_after == sum(m.manifest_length for m in new_list) < result.bytes_before
    for m in new_list:  # manifest_length is the real object size
        assert Path(local_path(m.manifest_path)).stat().st_size == m.manifest_length
    # Compacting again finds nothing to do and commits nothing.
    again = compact_manifests(table, "full")
    assert again.snapshot_id is None and not again.changed and table.snapshot() == new_head


def test_full_compaction_keeps_equality_and_position_delete_manifests(tmp_path: Path) -> None:
    built = many_manifests("hadoop", 2, tmp_path, appends=12, appends_after=4)
    table = built.table
    deletes_before = delete_manifests(table)
    files_before = files_document(table)["files"]
    assert {f["content"] for f in files_before} == {"data", "position-deletes", "equality-deletes"}
    compact_manifests(table, "full")
    assert delete_manifests(table) == deletes_before and len(deletes_before) == 2
    assert files_document(table)["files"] == files_before


def test_tiny_target_cuts_clustered_manifests_under_the_target(tmp_path: Path) -> None:
    built = many_manifests("hadoop", 2, tmp_path, appends=40, appends_after=0, deletes=False)
    table = built.table
    before = files_document(table)["files"]
    target = 3000
    result = compact_manifests(table, "full", target_size_bytes=target)
    new = data_manifests(table)
    assert len(new) == result.manifests_after >= 4
    for manifest in new:  # under the target, except a manifest of a single entry
        entries = (manifest.existing_files_count or 0) + (manifest.added_files_count or 0)
        assert manifest.manifest_length <= target or entries == 1
    # Clustered by partition: each manifest covers a range of partitions that the next one starts after.
    keys = [partition_keys(m, table) for m in new]
    assert all(k == sorted(k) for k in keys)
    assert all(a[-1] <= b[0] for a, b in itertools.pairwise(keys))
    assert files_document(table)["files"] == before
    assert result.to_json()["manifestsAfter"] == len(new)


# -- minor -----------------------------------------------------------------------------------------


def fake_manifest(name: str, length: int, spec_id: int = 0, live: int = 1) -> ManifestFile:
    return ManifestFile.from_args(
        manifest_path=name,
        manifest_length=length,
        partition_spec_id=spec_id,
        content=ManifestContent.DATA,
        added_files_count=live,
        existing_files_count=0,
        deleted_files_count=0 if live else 1,
    )


def test_pack_end_and_merge_bins_follow_java_by_hand() -> None:
    assert pack_end([5, 5, 5], 10, lambda x: x) == [[5], [5, 5]]
    assert pack_end([3, 3, 3, 3, 3], 7, lambda x: x) == [[3], [3, 3], [3, 3]]
    assert pack_end([20, 1, 1], 10, lambda x: x) == [[20], [1, 1]]  # too big: a bin of its own
    # Newest first. Spec 1 (newer): m0..m4; spec 0: o0..o2, plus a manifest without live files.
    m = [fake_manifest(f"m{i}", 10, spec_id=1) for i in range(5)]
    o = [fake_manifest(f"o{i}", 10, spec_id=0) for i in range(3)]
    dead = fake_manifest("dead", 10, spec_id=0, live=0)
    bins = plan_merge([*m, dead, *o], target_size_bytes=25, min_count_to_merge=3)
    # Expected, by hand: spec 1 first (highest id); packEnd from the end: [m3 m4], [m1 m2], [m0];
    # [m0] holds `first` but is single -> kept; the others merge whatever their count. Spec 0: [o0], [o1 o2].
    assert [([x.manifest_path for x in b.manifests], b.spec_id, b.merge) for b in bins] == [
        (["m0"], 1, False),
        (["m1", "m2"], 1, True),
        (["m3", "m4"], 1, True),
        (["o0"], 0, False),
        (["o1", "o2"], 0, True),
    ]
    # The bin holding the first manifest merges only at min-count.
    bins = plan_merge(m[:4], target_size_bytes=100, min_count_to_merge=5)
    assert [(len(b.manifests), b.merge) for b in bins] == [(4, False)]
    bins = plan_merge(m[:4], target_size_bytes=100, min_count_to_merge=4)
    assert [(len(b.manifests), b.merge) for b in bins] == [(4, True)]
    assert plan_merge([dead], target_size_bytes=100, min_count_to_merge=1) == []


@pytest.mark.parametrize(("kind", "version"), KINDS)
def test_minor_below_the_threshold_commits_nothing(tmp_path: Path, kind: str, version: int) -> None:
    built = new_table(kind, version, tmp_path)
    for i in range(30):
        write.append(built.table, rows([i], "a", DAY))
    table = built.table
    files_before = table_files(built.root)
    head = table.metadata.current_snapshot_id
    result = compact_manifests(table, "minor")  # 30 manifests in one bin, < 100
    assert result.snapshot_id is None and result.to_json()["merge"] == "none"
    assert result.manifests_before == result.manifests_after == 30 and result.manifests_rewritten == 0
    assert table.refresh().metadata.current_snapshot_id == head
    assert table_files(built.root) == files_before
    assert "nothing to merge" in result.summary()
    table.table.transaction().set_properties({"commit.manifest-merge.enabled": "false",
                                              "commit.manifest.min-count-to-merge": "2"}).commit_transaction()  # fmt: skip
    assert compact_manifests(table, "minor").snapshot_id is None  # merging disabled


@pytest.mark.parametrize(("kind", "version"), KINDS)
def test_minor_merges_the_bins_java_would(tmp_path: Path, kind: str, version: int) -> None:
    built = new_table(kind, version, tmp_path)
    table = built.table
    for i in range(7):
        write.append(table, rows([i], "a", DAY))
    write.append(table, rows([100], "b", DAY))
    for i in range(7, 9):
        write.append(table, rows([i], "c", DAY))
    table.table.delete("cat == 'b'")  # replaces b's manifest with one holding only a DELETED entry
    before = manifest_list(table)
    dead = [m for m in before if not m.added_files_count and not m.existing_files_count]
    live = [m for m in before if m not in dead]
    files_before = files_document(table)["files"]
    lengths = [m.manifest_length for m in live]
    assert len(dead) == 1 and len(live) == 9
    assert max(lengths) * 2 < min(lengths) * 3  # two manifests fit in a bin, three never do
    table.table.transaction().set_properties({"commit.manifest.target-size-bytes": str(max(lengths) * 2),
                                              "commit.manifest.min-count-to-merge": "3"}).commit_transaction()  # fmt: skip
    table.refresh()
    # By hand, live manifests newest first L0..L8 (the dead one is dropped first, Java's filter):
    # packEnd from the end gives [L0] [L1 L2] [L3 L4] [L5 L6] [L7 L8]; [L0] holds the first manifest and is
    # single: kept; the other bins merge whatever their count (< 3 here).
    result = compact_manifests(table, "minor", policy=FAST)
    after = manifest_list(table)
    assert after[0].manifest_path == live[0].manifest_path
    assert len(after) == 5 and result.manifests_after == 5 and result.manifests_rewritten == 9
    for merged, sources in zip(after[1:], [live[1:3], live[3:5], live[5:7], live[7:9]], strict=True):
        records = raw_entries(merged.manifest_path)
        expected = [
            e.data_file.file_path
            for s in sources
            for e in s.fetch_manifest_entry(table.table.io, discard_deleted=False)
        ]
        assert [r["data_file"]["file_path"] for r in records] == expected  # bin order
        assert all(r["status"] == 0 for r in records)  # ADDED became EXISTING
    assert files_document(table)["files"] == files_before
    head = table.snapshot()
    assert head is not None and head.summary is not None and head.summary.operation == Operation.REPLACE
    assert head.summary["manifests-created"] == "4" and head.summary["manifests-kept"] == "1"
    assert head.summary["manifests-replaced"] == "9"
    # With the first bin below min-count and nothing else to merge, a second run commits nothing.
    assert compact_manifests(table, "minor").snapshot_id is None


# -- dry run ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["full", "minor"])
def test_dry_run_writes_nothing_and_reports_what_the_real_run_does(tmp_path: Path, mode: str) -> None:
    built = many_manifests("sql", 2, tmp_path, appends=20, appends_after=5,
                           **{"commit.manifest.min-count-to-merge": "10"})  # fmt: skip
    table = built.table
    files_before = table_files(built.root)
    head = table.metadata.current_snapshot_id
    dry = compact_manifests(table, mode, dry_run=True)  # type: ignore[arg-type]
    plan = plan_manifest_compaction(table, mode)  # type: ignore[arg-type]
    assert table_files(built.root) == files_before
    assert table.refresh().metadata.current_snapshot_id == head
    assert dry.dry_run and dry.snapshot_id is None and dry.changed and plan.changed
    assert "would merge" in dry.summary()
    real = compact_manifests(table, mode)  # type: ignore[arg-type]
    assert real.snapshot_id is not None
    ignored = ("dryRun", "snapshotId", "durationSeconds")
    assert {k: v for k, v in dry.to_json().items() if k not in ignored} == {
        k: v for k, v in real.to_json().items() if k not in ignored
    }
    assert (
        len(plan.manifests_after) == real.manifests_after and len(plan.replaced) == real.manifests_rewritten
    )


def test_snapshot_properties_join_the_replace_summary_without_overriding_its_own(tmp_path: Path) -> None:
    table = many_manifests("sql", 2, tmp_path, appends=4, appends_after=0, deletes=False).table
    totals = table.snapshot().summary["total-records"]  # type: ignore[union-attr]
    extra = {"lakeformat.commit-user": "nightly-dag-task", "manifests-replaced": "999", "total-records": "0"}
    result = compact_manifests(table, "full", snapshot_properties=extra)
    summary = table.refresh().snapshot().summary  # type: ignore[union-attr]
    assert result.snapshot_id is not None and summary.operation is Operation.REPLACE
    assert summary["lakeformat.commit-user"] == "nightly-dag-task"
    assert summary["manifests-replaced"] == str(result.manifests_rewritten) != "999"
    assert summary["total-records"] == totals != "0"


# -- split_offsets ---------------------------------------------------------------------------------


def test_full_compaction_clears_invalid_split_offsets_and_keeps_valid_ones(tmp_path: Path) -> None:
    built = new_table("hadoop", 2, tmp_path)
    table = built.table
    pyt = table.table
    write.append(table, rows([1], "a", DAY))
    landing = tmp_path / "landing"
    valid = [multi_row_group_file(landing / f"valid{i}.parquet", 300 + 50 * i) for i in range(2)]
    write.add_files(table, valid)  # real multi-row-group offsets, recorded by pyiceberg
    files = {n: multi_row_group_file(landing / f"{n}.parquet", k)
             for n, k in (("past_eof", 100), ("descending", 120), ("copied1", 140), ("copied2", 400), ("ok", 160))}  # fmt: skip
    size = {n: Path(p).stat().st_size for n, p in files.items()}
    write.append_data_files(table, [
        data_file(pyt, files["past_eof"], ("a",), split_offsets=[4, size["past_eof"] + 1000]),
        data_file(pyt, files["descending"], ("a",), split_offsets=[200, 100]),
        data_file(pyt, files["copied1"], ("a",), split_offsets=[4, 300]),
        data_file(pyt, files["copied2"], ("a",), split_offsets=[4, 300]),
        data_file(pyt, files["ok"], ("a",), split_offsets=[4]),
    ])  # fmt: skip
    assert inspect_document(table)["details"]["splitOffsets"]["badFileCount"] == 4
    offsets_before = {e.data_file.file_path: e.data_file.split_offsets for m in manifest_list(table)
                      for e in m.fetch_manifest_entry(pyt.io)}  # fmt: skip
    files_before = files_document(table)["files"]

    dry = compact_manifests(table, "full", dry_run=True)
    result = compact_manifests(table, "full")

    assert dry.split_offsets_cleared == result.split_offsets_cleared == 4
    assert result.to_json()["splitOffsetsCleared"] == 4
    check = inspect_document(table)["details"]["splitOffsets"]
    assert check["badFileCount"] == 0 and check["manifests"] == []
    offsets_after = {e.data_file.file_path: e.data_file.split_offsets for m in manifest_list(table)
                     for e in m.fetch_manifest_entry(pyt.io)}  # fmt: skip
    bad = {files[n] for n in ("past_eof", "descending", "copied1", "copied2")}
    for path, offsets in offsets_before.items():
        assert offsets_after[path] == (None if path in bad else offsets), path
    assert all(offsets_before[p] and len(offsets_before[p]) >= 2 for p in valid)  # the valid lists kept
    assert files_document(table)["files"] == files_before


def test_a_single_manifest_with_bad_offsets_is_still_rewritten(tmp_path: Path) -> None:
    built = new_table("hadoop", 1, tmp_path)
    table = built.table
    path = multi_row_group_file(tmp_path / "landing" / "f.parquet", 100)
    write.append_data_files(table, [data_file(table.table, path, ("a",), split_offsets=[-1])])
    assert len(manifest_list(table)) == 1
    result = compact_manifests(table, "full")
    assert result.snapshot_id is not None and result.split_offsets_cleared == 1
    assert inspect_document(table)["details"]["splitOffsets"]["badFileCount"] == 0


# -- branches --------------------------------------------------------------------------------------


def test_compacting_a_branch_leaves_main_alone(tmp_path: Path) -> None:
    built = new_table("hadoop", 2, tmp_path)
    table = built.table
    for i in range(4):
        write.append(table, rows([i], "a", DAY))
    table.table.manage_snapshots().create_branch(table.metadata.current_snapshot_id, "b1",
                                                 max_ref_age_ms=86_400_000).commit()  # fmt: skip
    for i in range(4):
        write.append(table, rows([10 + i], "b", DAY))  # main moves on
    main_before = table.metadata.refs["main"]
    files_b1 = files_document(table, ref="b1")["files"]
    result = compact_manifests(table, "full", branch="b1")
    assert table.metadata.refs["main"] == main_before
    assert result.snapshot_before is not None and result.manifests_before == 4 and result.manifests_after == 1
    b1 = table.metadata.refs["b1"]
    assert b1.snapshot_id == result.snapshot_id and b1.max_ref_age_ms == 86_400_000  # retention kept
    assert files_document(table, ref="b1")["files"] == files_b1
    with pytest.raises(ValueError, match="tag"):
        table.table.manage_snapshots().create_tag(main_before.snapshot_id, "t1").commit()
        compact_manifests(table, "full", branch="t1")


# -- concurrency and commit outcomes ---------------------------------------------------------------


def is_replace(updates: tuple[Any, ...]) -> bool:
    return any(
        isinstance(u, AddSnapshotUpdate)
        and u.snapshot.summary
        and u.snapshot.summary.operation == Operation.REPLACE
        for u in updates
    )


def replace_files(updates: tuple[Any, ...], table: Any) -> set[str]:
    """The manifest list and the new manifests of a staged replace snapshot."""
    snapshot = next(u.snapshot for u in updates if isinstance(u, AddSnapshotUpdate))
    manifests = snapshot.manifests(table.table.io)
    return {local_path(snapshot.manifest_list)} | {
        local_path(m.manifest_path) for m in manifests if m.added_snapshot_id == snapshot.snapshot_id
    }


def catalog_class(built: Built) -> type:
    return SqlCatalog if built.kind == "sql" else HadoopLayoutCatalog


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
@pytest.mark.parametrize("mode", ["full", "minor"])
def test_a_concurrent_append_is_kept_and_the_compaction_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, mode: str
) -> None:
    built = many_manifests(kind, 2, tmp_path, appends=12, appends_after=3, equality_deletes=False,
                           **{"commit.manifest.min-count-to-merge": "5"})  # fmt: skip
    table = built.table
    other = built.reopen()
    cls = catalog_class(built)
    original = cls.commit_table
    attempts: list[set[str]] = []
    appended: list[int] = []

    def racing(self: Any, pyt: Any, requirements: Any, updates: Any) -> Any:
        if is_replace(updates):
            attempts.append(replace_files(updates, table))
            if not appended:  # another writer commits between our plan and our commit
                appended.append(write.append(other, rows([777], "q", DAY)))
        return original(self, pyt, requirements, updates)

    monkeypatch.setattr(cls, "commit_table", racing)
    result = compact_manifests(table, mode, policy=FAST)  # type: ignore[arg-type]

    assert len(attempts) == 2 and appended
    head = table.snapshot()
    assert head is not None and head.snapshot_id == result.snapshot_id
    assert head.parent_snapshot_id == appended[0]  # rebuilt on the concurrent append
    assert result.snapshot_before == appended[0]
    # No entry lost: the head has exactly the live files of the concurrent writer's snapshot.
    assert files_document(table)["files"] == files_document(table, snapshot_id=appended[0])["files"]
    assert 777 in [r[0] for r in scan_rows(table)]
    first, second = attempts
    assert not any(Path(p).exists() for p in first)  # the preempted attempt's files were removed
    assert all(Path(p).exists() for p in second)


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_an_unknown_commit_outcome_keeps_the_written_manifests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    built = many_manifests(kind, 2, tmp_path, appends=6, appends_after=2, deletes=False)
    table = built.table
    cls = catalog_class(built)
    staged: list[set[str]] = []

    def lost(self: Any, pyt: Any, requirements: Any, updates: Any) -> Any:
        staged.append(replace_files(updates, table))
        raise CommitStateUnknownException("504 from the catalog")

    before = table_files(built.root)
    head = table.metadata.current_snapshot_id
    monkeypatch.setattr(cls, "commit_table", lost)
    with pytest.raises(CommitStateUnknownError):
        compact_manifests(table, "full", policy=FAST)
    assert len(staged) == 1 and staged[0]
    assert all(Path(p).exists() for p in staged[0])  # kept: the commit may have landed
    assert {str(built.root / p) for p in table_files(built.root) - before} == staged[0]
    monkeypatch.undo()
    assert built.reopen().metadata.current_snapshot_id == head


def test_a_commit_that_never_lands_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built = many_manifests("hadoop", 2, tmp_path, appends=6, appends_after=2, deletes=False)
    table = built.table
    before = table_files(built.root)
    calls: list[int] = []

    def conflicting(self: Any, pyt: Any, requirements: Any, updates: Any) -> Any:
        calls.append(1)
        raise CommitFailedException("someone else won")

    monkeypatch.setattr(HadoopLayoutCatalog, "commit_table", conflicting)
    with pytest.raises(CommitRetriesExhaustedError):
        compact_manifests(table, "full", policy=RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=1))
    assert len(calls) == 3
    assert table_files(built.root) == before  # every attempt's manifests and lists were discarded


# -- refusals --------------------------------------------------------------------------------------


def test_v3_and_read_only_tables_are_refused(tmp_path: Path) -> None:
    built = new_table("hadoop", 2, tmp_path)
    root = built.root
    write.append(built.table, rows([1], "a", DAY))
    write.append(built.table, rows([2], "a", DAY))
    read_only = open_path_table(str(root / "metadata" / "v3.metadata.json"))
    with pytest.raises(ReadOnlyTableError):
        compact_manifests(read_only, "full")
    with pytest.raises(ReadOnlyTableError):
        compact_manifests(read_only, "full", dry_run=True)
    v3 = json.loads((root / "metadata" / "v3.metadata.json").read_text())
    (root / "metadata" / "v4.metadata.json").write_text(
        json.dumps({**v3, "format-version": 3, "next-row-id": 0})
    )
    table = open_path_table(str(root))
    assert table.format_version == 3
    before = table_files(root)
    for mode in ("full", "minor"):
        with pytest.raises(UnsupportedWriteVersionError):
            compact_manifests(table, mode)  # type: ignore[arg-type]
        with pytest.raises(UnsupportedWriteVersionError):
            plan_manifest_compaction(table, mode)  # type: ignore[arg-type]
    assert table_files(root) == before
    with pytest.raises(ValueError, match="mode"):
        compact_manifests(built.reopen(), "major")  # type: ignore[arg-type]


def test_an_empty_table_has_nothing_to_compact(tmp_path: Path) -> None:
    built = new_table("hadoop", 2, tmp_path)
    result = compact_manifests(built.table, "full")
    assert result.snapshot_before is None and result.snapshot_id is None and result.manifests_before == 0
    assert result.to_json()["operation"] == "compact-manifests" and result.to_json()["format"] == "iceberg"
