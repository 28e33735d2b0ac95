"""The primary-key compaction end to end: plan, full and minor runs, the COMPACT snapshot, facade and CLI.

Tables are written with the compaction's own KV writer (``merge_tree_support``) so every key, sequence
number and row kind is chosen; one test compacts a table pypaimon wrote and reads it back with pypaimon.
"""

from __future__ import annotations

import hashlib
import json
from io import StringIO
from pathlib import Path

import pytest

from airflow_lakeformat.cli import main
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.compaction import compact_primary_key_table
from airflow_lakeformat.core.paimon.merge_tree.levels import level_sorted_runs, schema_key_order
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.tables import open_table
from tests.maintenance.merge_tree_support import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    append,
    levels_by_bucket,
    listing,
    live,
    pk_table,
    visible_rows,
)


def history(table: Table) -> None:
    """Two partitions x 2 buckets, overlapping level-0 files with updates, retractions and a re-insert."""
    seq = {("a", 0): 0, ("a", 1): 0, ("b", 0): 0, ("b", 1): 0}

    def write(p: str, bucket: int, rows: list[tuple[int, str | None, int]]) -> None:
        start = seq[(p, bucket)]
        append(table, p, bucket, [(k, v, start + i, kind) for i, (k, v, kind) in enumerate(rows)])
        seq[(p, bucket)] = start + len(rows)

    for p in ("a", "b"):
        write(p, 0, [(k, f"{p}0-{k}", INSERT) for k in range(0, 20)])
        write(p, 0, [(k, f"{p}0-u{k}", UPDATE_AFTER) for k in range(10, 30)])
        write(p, 0, [(3, None, DELETE), (4, None, UPDATE_BEFORE), (25, None, DELETE), (99, None, DELETE)])
        write(p, 0, [(3, f"{p}0-back", INSERT)])  # deleted, then inserted again
        write(p, 1, [(k, f"{p}1-{k}", INSERT) for k in range(100, 105)])


def test_full_compaction_leaves_one_max_level_run_per_bucket_and_the_same_rows(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    history(table)
    before_rows = visible_rows(table)
    inputs = {e.identifier(): e for e in live(table)}
    before_id = table.snapshot_manager.latest_snapshot_id()

    result = open_table(table.root).maintenance.compact_data(mode="full")

    doc = result.to_json()
    assert (doc["operation"], doc["mode"], doc["dryRun"], doc["snapshotBefore"]) == (
        "compact-data",
        "full",
        False,
        before_id,
    )
    assert doc["groups"] == 4 and doc["skippedBuckets"] == [] and doc["deletesDropped"] > 0
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None and snapshot.id == doc["snapshotId"] == before_id + 1
    assert (snapshot.commit_kind, snapshot.commit_identifier) == (CommitKind.COMPACT, BATCH_COMMIT_IDENTIFIER)
    order = schema_key_order(table.schema)
    for key, entries in _by_bucket(live(table)).items():
        runs = level_sorted_runs([e.file for e in entries], order)
        assert [r.level for r in runs] == [5], f"bucket {key}: one sorted run at the max level"
        for e in entries:
            assert e.file.delete_row_count == 0 and e.total_buckets == 2
            upgraded = any(e.file.file_name == i.file.file_name for i in inputs.values())
            assert e.file.file_source is (FileSource.APPEND if upgraded else FileSource.COMPACT)
    assert visible_rows(table) == before_rows, "same rows, same sequence numbers"
    # the delta: DELETE of every input, copied verbatim, and ADDs, each within its bucket
    delta = _delta(table)
    deletes = [e for e in delta if e.kind is FileKind.DELETE]
    assert {e.identifier() for e in deletes} == set(inputs)
    assert all(e.record["_FILE"] == inputs[e.identifier()].record["_FILE"] for e in deletes)
    adds = [e for e in delta if e.kind is FileKind.ADD]
    assert {(e.partition, e.bucket) for e in adds} <= {(e.partition, e.bucket) for e in deletes}
    assert snapshot.delta_record_count == sum(e.file.row_count for e in adds) - sum(
        e.file.row_count for e in deletes
    )
    # the bucket holding only key 99's lone -D had nothing else: dropped, the key stays invisible
    assert all(row[1] != 99 for row in visible_rows(table))


def test_a_second_full_compaction_is_a_no_op_and_commits_nothing(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    history(table)
    compact_primary_key_table(table, mode="full")
    latest = table.snapshot_manager.latest_snapshot_id()
    files = listing(Path(table.root))
    again = compact_primary_key_table(table, mode="full")
    assert again.snapshot_id is None and again.to_json()["groups"] == 0
    assert "nothing to compact" in again.summary()
    assert table.snapshot_manager.latest_snapshot_id() == latest and listing(Path(table.root)) == files


def test_dry_run_plans_and_writes_nothing(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    history(table)
    files = listing(Path(table.root))
    result = open_table(table.root).maintenance.compact_data(mode="full", dry_run=True)
    doc = result.to_json()
    assert doc["dryRun"] and doc["snapshotId"] is None and doc["groups"] == 4
    assert (doc["filesRewritten"], doc["filesUpgraded"]) == (8, 2), "a bucket's lone small file is upgraded"
    assert "would rewrite 8 files" in result.summary()
    assert listing(Path(table.root)) == files
    plan = open_table(table.root).maintenance.plan_compact_data(mode="full")
    assert [u["outputLevel"] for u in plan.to_json()["units"]] == [5, 5, 5, 5]
    only_b = open_table(table.root).maintenance.plan_compact_data(mode="full", partitions=[{"p": "b"}])
    assert [(u["partition"], u["bucket"]) for u in only_b.to_json()["units"]] == [
        ({"p": "b"}, 0),
        ({"p": "b"}, 1),
    ]
    assert listing(Path(table.root)) == files


def test_minor_compaction_keeps_deletes_below_the_highest_level_and_the_rows(tmp_path: Path) -> None:
    """A big old max-level run and six small level-0 files: the universal pick merges the level-0 files into
    level 4, which is not the highest non-empty level, so the -D rows must stay (else key 5 would come back)."""
    table = pk_table(tmp_path / "t", **{"num-sorted-run.compaction-trigger": "5"})
    noise = [hashlib.sha256(str(k).encode()).hexdigest() * 2 for k in range(400)]  # incompressible: a big run
    append(table, "a", 0, [(k, noise[k], k, INSERT) for k in range(400)], level=5)
    seq = 400
    for i in range(6):
        rows = [(5, None, seq, DELETE)] if i == 2 else [(1000 + i, f"n{i}", seq, INSERT)]
        append(table, "a", 0, rows)
        seq += 1
    before_rows = visible_rows(table)
    assert all(row[1] != 5 for row in before_rows)

    result = compact_primary_key_table(table, mode="minor")

    (bucket,) = result.to_json()["buckets"]
    assert (bucket["outputLevel"], bucket["dropDeletes"], bucket["sortedRunsBefore"]) == (4, False, 7)
    assert bucket["sortedRunsAfter"] == 2 < 5, "fewer sorted runs than the trigger"
    assert levels_by_bucket(table)[next(iter(levels_by_bucket(table)))] == [4, 5]
    (written,) = [e for e in live(table) if e.file.level == 4]
    assert written.file.delete_row_count == 1, "the -D is kept at a middle level"
    assert visible_rows(table) == before_rows


def test_big_files_of_one_run_sections_are_upgraded_not_rewritten(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    append(table, "a", 0, [(k, f"v{k}", k, INSERT) for k in range(0, 10)])
    append(table, "a", 0, [(k, f"v{k}", k, INSERT) for k in range(20, 30)])
    names = {e.file.file_name for e in live(table)}

    result = compact_primary_key_table(table, mode="full", target_file_size=100)  # every file counts as big

    doc = result.to_json()
    assert (doc["filesUpgraded"], doc["filesRewritten"], doc["filesWritten"]) == (2, 0, 0)
    after = live(table)
    assert {e.file.file_name for e in after} == names and {e.file.level for e in after} == {5}
    delta = _delta(table)
    assert sorted((e.kind.name, e.file.level) for e in delta) == [
        ("ADD", 5),
        ("ADD", 5),
        ("DELETE", 0),
        ("DELETE", 0),
    ]


def test_cli_compact_data_full_json_and_the_append_and_min_files_refusals(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    history(table)
    out = StringIO()
    assert main(["compact-data", table.root, "--full", "--dry-run", "--json"], out=out) == 0
    doc = json.loads(out.getvalue())
    assert (doc["mode"], doc["dryRun"], doc["groups"], doc["table"]) == ("full", True, 4, table.root)
    out = StringIO()
    assert main(["compact-data", table.root], out=out) == 0  # minor by default: 5 runs in a bucket at most
    assert "minor primary-key compaction" in out.getvalue()
    with pytest.raises(UsageError, match="min_file_count: only for append tables"):
        open_table(table.root).maintenance.compact_data(min_file_count=2)
    plain = create_table(str(tmp_path / "plain"), schema_from_fields([{"name": "x", "type": "INT"}]))
    with pytest.raises(UsageError, match="mode='full': only for primary-key tables"):
        open_table(plain.root).maintenance.compact_data(mode="full")
    assert open_table(plain.root).maintenance.compact_data(mode="minor").to_json()["groups"] == 0


def _by_bucket(entries: list[ManifestEntry]) -> dict[tuple[bytes, int], list[ManifestEntry]]:
    out: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for e in entries:
        out.setdefault((e.partition, e.bucket), []).append(e)
    return out


def _delta(table: Table) -> list[ManifestEntry]:
    snapshot = table.snapshot_manager.latest_snapshot()
    assert snapshot is not None
    _, delta = table.data_manifests(snapshot)
    return [e for entries in table.read_manifests(delta, "test") for e in entries]


@pytest.mark.interop
def test_pypaimon_reads_the_same_rows_after_a_full_compaction_and_its_next_upsert_wins(
    sample_tables: Path,
) -> None:
    """pypaimon's own ``pk_tbl`` (shared fixture): compacted, read back by pypaimon, then upserted by pypaimon."""
    from tests.support.pypaimon import oracle_append, oracle_read

    root = sample_tables / "pk_tbl"
    before = oracle_read(root)
    result = open_table(str(root)).maintenance.compact_data(mode="full")
    assert result.to_json()["snapshotId"] is not None
    table = Table.open(str(root))
    assert {e.file.level for e in live(table)} == {5}
    assert oracle_read(root) == before
    row = {**before[0], "v": "after-compaction"}
    oracle_append(root, [row])
    after = oracle_read(root)
    assert len(after) == len(before) and row in after and before[0] not in after, "the upsert wins"


def test_the_operator_checks_the_mode_and_sends_primary_key_tables_to_spark_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator

    table = pk_table(tmp_path / "t")
    lake = open_table(table.root)
    auto = LakeformatCompactDataOperator(task_id="auto", table="x", mode="full", spark_min_files=0)
    assert auto.choose_execution(lake) == "spark", "above the thresholds: on Spark"
    spark = LakeformatCompactDataOperator(task_id="spark", table="x", execution="spark", mode="minor")
    assert spark.choose_execution(lake) == "spark"
    monkeypatch.setattr(LakeformatCompactDataOperator, "task_commit_user", lambda self, context: "user")
    # the mode goes to the job
    assert auto.spark_job_args({}, lake)[-3:] == ["--full", "--commit-user", "user"]
    assert spark.spark_job_args({}, lake)[-3:] == ["--minor", "--commit-user", "user"]
    auto.check_table(lake)
    # a null Param rendered without native rendering ("None") is no mode: the table's default, no flag
    unset = LakeformatCompactDataOperator(task_id="unset", table="x", execution="spark", mode="None")
    unset.check_table(lake)
    assert not {"--full", "--minor", "--None"} & set(unset.spark_job_args({}, lake))
    refused = open_table(
        pk_table(
            tmp_path / "u", **{"merge-engine": "aggregation", "fields.v.aggregate-function": "rbm64"}
        ).root
    )
    skipping = LakeformatCompactDataOperator(task_id="skip", table="x", skip_unsupported=True)
    with pytest.raises(AirflowSkipException, match="rbm64"):
        skipping.check_table(refused)
