"""The COMPACT commit of a primary-key compaction against concurrent writers (reference section 4.3).

Every case plans and rewrites two buckets, lets another writer commit in between, then commits: the bucket
the writer broke is skipped (its new files discarded) and the other committed; concurrent level-0 appends
that are newer than the inputs survive next to the compacted files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import CompactionConflictError
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.merge_tree.commit import BucketChange, commit_changes
from airflow_lakeformat.core.paimon.merge_tree.compaction import rewrite_units
from airflow_lakeformat.core.paimon.merge_tree.plan import plan_primary_key_compaction
from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table
from tests.maintenance.merge_tree_support import (
    INSERT,
    UPDATE_AFTER,
    append,
    level0_entries,
    live,
    partition_bytes,
    pk_table,
    visible_rows,
)

A0, A1 = 0, 1  # the two buckets of partition "a"


def prepared(tmp_path: Path) -> tuple[Table, list[BucketChange]]:
    """Two overlapping level-0 files in each bucket of partition "a", planned and rewritten, not committed."""
    table = pk_table(tmp_path / "t")
    append(table, "a", A0, [(k, f"x{k}", k, INSERT) for k in range(10)])  # seq 0-9
    append(table, "a", A0, [(k, f"y{k}", 10 + k, UPDATE_AFTER) for k in range(5, 10)])  # seq 15-19
    append(table, "a", A1, [(k, f"x{k}", k - 100, INSERT) for k in range(100, 105)])  # seq 0-4
    append(table, "a", A1, [(k, f"y{k}", k - 95, UPDATE_AFTER) for k in range(100, 102)])  # seq 5-6
    plan = plan_primary_key_compaction(table, mode="full")
    changes, _, _ = rewrite_units(table, plan)
    assert [c.bucket for c in changes] == [A0, A1] and [c.max_sequence_number for c in changes] == [19, 6]
    return table, changes


def committer(table: Table) -> Committer:
    return Committer(table, "compactor", sleep=lambda _: None)


def files_exist(change: BucketChange) -> list[bool]:
    return [Path(p).exists() for p in change.written]


def test_a_level0_append_newer_than_the_inputs_survives_the_commit(tmp_path: Path) -> None:
    table, changes = prepared(tmp_path)
    racer = append(table, "a", A0, [(3, "late", 20, UPDATE_AFTER), (77, "new", 21, INSERT)])
    outcome = commit_changes(table, changes, committer=committer(table))
    assert outcome.skipped == {} and outcome.snapshot is not None and outcome.snapshot.id == racer + 1
    assert outcome.snapshot.commit_kind is CommitKind.COMPACT
    levels = sorted((e.bucket, e.file.level) for e in live(table))
    assert levels == [(A0, 0), (A0, 5), (A1, 5)], "the racer's level-0 file stays next to the compacted run"
    rows = {(r[1], r[2]) for r in visible_rows(table)}
    assert (3, "late") in rows and (77, "new") in rows and (9, "y9") in rows and (101, "y101") in rows


@pytest.mark.parametrize(
    ("race", "reason"),
    [
        ("deleted", "is no longer live"),
        ("old-level0", "minSequenceNumber 19 <= 19"),
        ("level-above-0", "a concurrent compaction added"),
    ],
)
def test_a_bucket_changed_under_the_compaction_is_skipped_and_the_other_committed(
    tmp_path: Path, race: str, reason: str
) -> None:
    table, changes = prepared(tmp_path)
    racer = Committer(table, "racer")
    if race == "deleted":  # another compaction (or an overwrite) took an input of bucket A0
        victim = next(e for e in live(table) if e.bucket == A0)
        racer.commit([victim.to_delete()], kind=CommitKind.COMPACT)
    elif race == "old-level0":  # a level-0 file not newer than the inputs: a dropped delete could resurface
        racer.commit(level0_entries(table, "a", A0, [(50, "stale", 19, INSERT)]))
    else:
        racer.commit(level0_entries(table, "a", A0, [(60, "other", 40, INSERT)], level=3))
    latest = table.snapshot_manager.latest_snapshot_id()
    outcome = commit_changes(table, changes, committer=committer(table))
    assert list(outcome.skipped) == [(partition_bytes(table, "a"), A0)]
    assert reason in outcome.skipped[(partition_bytes(table, "a"), A0)]
    assert outcome.snapshot is not None and outcome.snapshot.id == (latest or 0) + 1
    assert [c.bucket for c in outcome.committed] == [A1]
    assert files_exist(changes[0]) == [False], "the skipped bucket's file was never published: discarded"
    assert files_exist(changes[1]) == [True]
    assert {e.file.level for e in live(table) if e.bucket == A1} == {5}


def test_the_total_bucket_count_changing_skips_the_partition(tmp_path: Path) -> None:
    table, changes = prepared(tmp_path)
    Committer(table, "rescaler").commit(
        level0_entries(table, "a", A1, [(900, "z", 100, INSERT)], total_buckets=3)
    )
    outcome = commit_changes(table, changes, committer=committer(table))
    assert sorted(b for _, b in outcome.skipped) == [A0, A1] and outcome.snapshot is None
    assert all("total buckets changed" in why for why in outcome.skipped.values())


def test_without_skipping_a_conflict_refuses_the_whole_commit_and_discards_every_file(tmp_path: Path) -> None:
    table, changes = prepared(tmp_path)
    victim = next(e for e in live(table) if e.bucket == A1)
    Committer(table, "racer").commit([victim.to_delete()], kind=CommitKind.COMPACT)
    latest = table.snapshot_manager.latest_snapshot_id()
    with pytest.raises(CompactionConflictError, match=r"bucket 1: input .* is no longer live") as caught:
        commit_changes(table, changes, committer=committer(table), skip_conflicts=False)
    assert list(caught.value.buckets) == [(partition_bytes(table, "a"), A1)]
    assert table.snapshot_manager.latest_snapshot_id() == latest
    assert files_exist(changes[0]) == [False] and files_exist(changes[1]) == [False]


def test_every_publish_attempt_validates_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer takes our snapshot id with a stale level-0 file: the retry validates against it and skips A0."""
    table, changes = prepared(tmp_path)
    ours = committer(table)
    publish = ours.publish
    raced: list[int] = []

    def racing(snapshot: Snapshot, commit_id: str) -> object:
        if not raced:
            raced.append(
                Committer(table, "racer")
                .commit(level0_entries(table, "a", A0, [(8, "s", 2, INSERT)]))
                .snapshot.id
            )
        return publish(snapshot, commit_id)

    monkeypatch.setattr(ours, "publish", racing)
    outcome = commit_changes(table, changes, committer=ours)
    assert raced and list(outcome.skipped) == [(partition_bytes(table, "a"), A0)]
    assert "minSequenceNumber 2 <= 19" in next(iter(outcome.skipped.values()))
    assert outcome.snapshot is not None and outcome.snapshot.id == raced[0] + 1
    assert [c.bucket for c in outcome.committed] == [A1]


def test_a_refusal_on_a_retry_leaves_no_manifest_of_the_earlier_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt writes the delta manifests and loses its snapshot id to a writer whose stale level-0
    file makes the retry's validation refuse: nothing of ours was published, so none of its manifests stay."""
    table, changes = prepared(tmp_path)
    manifests = tmp_path / "t" / "manifest"
    ours = committer(table)
    publish = ours.publish
    theirs: list[str] = []

    def racing(snapshot: Snapshot, commit_id: str) -> object:
        if not theirs:
            before = set(manifests.iterdir())
            Committer(table, "racer").commit(level0_entries(table, "a", A0, [(8, "s", 2, INSERT)]))
            theirs.extend(p.name for p in set(manifests.iterdir()) - before)
        return publish(snapshot, commit_id)

    before = {p.name for p in manifests.iterdir()}
    monkeypatch.setattr(ours, "publish", racing)
    with pytest.raises(CompactionConflictError):
        commit_changes(table, changes, committer=ours, skip_conflicts=False)
    assert theirs and {p.name for p in manifests.iterdir()} == before | set(theirs)
