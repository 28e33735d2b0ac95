"""compact_manifests: Paimon's compact_manifest (full) and the ordinary policy (minor), dry run, no-op."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.paimon.manifest import FileKind
from airflow_lakeformat.core.paimon.manifest_merge import must_change
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.commit.test_commit import add, delete, live_names, new_table


def manifests_of(table: Table, snapshot_id: int | None = None) -> list:
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest_snapshot()
    base, delta = table.data_manifests(snapshot)
    return base + delta


def names_at(table: Table, snapshot_id: int) -> list[str]:
    from airflow_lakeformat.core.paimon.live_files import live_entries

    return sorted(e.file.file_name for e in live_entries(table, table.snapshot_manager.snapshot(snapshot_id)))


def build(root: Path, commits: int = 6) -> Table:
    table = new_table(root)
    c = Committer(table, "writer", sleep=lambda _: None)
    entries = []
    for i in range(commits):
        entry = add(table, f"f{i}", f"p{i % 2}", rows=i + 1)
        entries.append(entry)
        c.commit([entry], merge=False)
    c.commit([delete(entries[0]), delete(entries[3])], merge=False)  # unmatched DELETEs in the delta
    return table


def test_full_compaction_commits_one_compact_snapshot_without_deletes(tmp_path: Path) -> None:
    table = build(tmp_path / "t")
    before_live = live_names(table)
    history = {s.id: names_at(table, s.id) for s in table.snapshot_manager.snapshots()}
    latest_before = table.snapshot_manager.latest_snapshot()
    result = compact_manifests(table, "full")
    assert result.changed and result.snapshot_id == latest_before.id + 1
    assert (result.manifests_before, result.manifests_after) == (7, 1)
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot.commit_kind is CommitKind.COMPACT and snapshot.delta_record_count == 0
    assert snapshot.total_record_count == latest_before.total_record_count
    assert table.manifest_list(snapshot.delta_manifest_list) == []  # an empty list, not a missing one
    [merged] = manifests_of(table)
    assert merged.num_deleted_files == 0
    assert all(e.kind is FileKind.ADD for e in table.manifest(merged.file_name))
    assert live_names(table) == before_live
    # Idempotent: a second full compaction finds nothing to do and commits nothing.
    again = compact_manifests(table, "full")
    assert not again.changed and again.snapshot_id is None
    assert table.snapshot_manager.latest_snapshot_id() == snapshot.id
    # Earlier snapshots still read the same.
    assert {s.id: names_at(table, s.id) for s in table.snapshot_manager.snapshots()} == {
        **history,
        snapshot.id: before_live,
    }


def test_minor_keeps_policy_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    table = build(tmp_path / "t")
    files_before = sorted(p.name for p in (tmp_path / "t" / "manifest").iterdir())
    dry = compact_manifests(table, "full", dry_run=True)
    assert dry.dry_run and dry.changed and dry.snapshot_id is None and dry.manifests_after == 1
    assert dry.bytes_after > 0
    assert sorted(p.name for p in (tmp_path / "t" / "manifest").iterdir()) == files_before
    # 7 small manifests are fewer than merge-min-count (30): the ordinary policy leaves them.
    minor = compact_manifests(table, "minor")
    assert not minor.changed and minor.snapshot_id is None


def test_minor_with_low_min_count_keeps_unmatched_deletes(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t", **{"manifest.merge-min-count": "2"})
    c = Committer(table, "writer")
    first = add(table, "f0")
    c.commit([first], merge=False)
    for i in range(1, 4):
        c.commit([add(table, f"f{i}")], merge=False)
    c.commit([delete(first)], merge=False)
    result = compact_manifests(table, "minor")
    assert result.merge in ("minor", "full") and result.changed
    assert live_names(table) == ["f1", "f2", "f3"]


def test_200_small_commits_keep_the_manifest_count_bounded_as_the_policy_predicts(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")  # defaults: 8 MB target, 16 MB threshold, merge-min-count 30
    c = Committer(table, "writer")
    predicted = 0  # manifests in base + delta, by Paimon's policy for tiny manifests
    counts = []
    for i in range(200):
        before = predicted
        c.commit([add(table, f"f{i}", f"p{i % 5}")])
        # Tiny manifests never reach the 8 MB target, so no group closes; the leftover group of all
        # `before` manifests is merged into one when it has >= 30 files. Then the delta adds one.
        predicted = (1 if before >= 30 else before) + 1
        counts.append(len(manifests_of(table)))
        assert counts[-1] == predicted, i
    assert max(counts) == 30 and len(live_names(table)) == 200


def test_full_compaction_triggers_at_the_size_threshold(tmp_path: Path) -> None:
    options = {
        "manifest.target-file-size": "8 kb",
        "manifest.full-compaction-threshold-size": "5 kb",
        "manifest.merge-min-count": "1000",
    }
    table = new_table(tmp_path / "t", **options)
    c = Committer(table, "writer")
    modes = []
    for i in range(12):
        metas = manifests_of(table) if i else []
        must = sum(m.file_size for m in metas if must_change(m, 8 * 1024))
        result = c.commit([add(table, f"f{i}-{j}", f"p{j % 3}") for j in range(10)])
        modes.append(result.merge)
        assert (result.merge == "full") == (must >= 5 * 1024), (i, must, result.merge)
    assert "full" in modes


def test_cli_shape_of_the_json_result(tmp_path: Path) -> None:
    table = build(tmp_path / "t")
    document = compact_manifests(table, "full").to_json()
    assert set(document) >= {"manifestsBefore", "bytesBefore", "manifestsAfter", "bytesAfter", "snapshotId"}
    assert json.loads(json.dumps(document)) == document


def test_cli_create_table_and_compact_manifests(tmp_path: Path) -> None:
    from tests.unit.test_cli import run

    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps([{"name": "dt", "type": "date32"}, {"name": "v", "type": "BIGINT NOT NULL"}])
    )
    code, out, err = run("create-table", str(tmp_path / "t"), "--schema", str(schema), "--partition-keys", "dt",
                         "--option", "manifest.merge-min-count=5", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["schema"]["fields"][0]["type"] == "DATE"
    code, _, err = run("create-table", str(tmp_path / "t"), "--schema", str(schema))
    assert code != 0 and "already exists" in err
    table = Table.open(str(tmp_path / "t"))
    c = Committer(table, "w")
    from airflow_lakeformat.core.paimon import binary_row

    for i in range(4):
        part = binary_row.encode([19723 + i], table.schema.partition_types)
        from airflow_lakeformat.core.paimon.manifest import DataFileMeta, ManifestEntry

        c.commit(
            [ManifestEntry.create(FileKind.ADD, part, 0, -1, DataFileMeta.create(f"f{i}", 1, 1))], merge=False
        )
    code, out, _ = run("compact-manifests", str(tmp_path / "t"), "--dry-run", "--json")
    dry = json.loads(out)
    assert (
        dry["dryRun"]
        and dry["manifestsBefore"] == 4
        and dry["manifestsAfter"] == 1
        and dry["snapshotId"] is None
    )
    code, out, _ = run("compact-manifests", str(tmp_path / "t"), "--minor", "--json")
    assert json.loads(out)["merge"] == "none"  # 4 < merge-min-count 5
    code, out, _ = run("compact-manifests", str(tmp_path / "t"))
    assert code == 0 and "into 1" in out and "committed snapshot 5" in out
