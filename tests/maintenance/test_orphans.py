"""Orphan-file cleanup: what is a candidate, what is used, and the races that destroyed tables elsewhere."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import CorruptMetadataError, MaintenanceRefusedError, MissingMetadataError
from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots, plan_snapshot_expiry
from airflow_lakeformat.core.paimon.maintenance.orphans import (
    execute_orphan_cleanup,
    plan_orphan_cleanup,
    remove_orphan_files,
)
from airflow_lakeformat.core.paimon.table import Table
from tests.support.maintenance import OLD, OLD_ORPHANS, assert_intact, build_history, plant_files, tree
from tests.support.seaweedfs import SeaweedFSServer, upload_tree

NOW = time.time()

FRESH = [
    "manifest/manifest-1111-fresh-0",
    "dt=d0/bucket-0/data-1111-fresh-0.parquet",
    "snapshot/.snapshot-100.5678.tmp",
]
NEVER = [
    "dt=d0/bucket-0/pack-0.managed.blob",  # managed blob packs are never candidates
    "notes/readme.txt",  # outside Paimon's layout
    "dt=d0/not-a-bucket/data-x.parquet",  # not a bucket directory
    "tag/tag-gone-but-json",  # tags are not candidates (and this one is not a real tag file)
]


def _table_with_orphans(root: Path) -> Table:
    history = build_history(root, snapshots=8)
    history.builder.tag("t3", history.builder.snapshots[2])
    (root / "tag" / "tag-gone-but-json").unlink(missing_ok=True)
    plant_files(root, OLD_ORPHANS, OLD)
    plant_files(root, FRESH, None)
    plant_files(root, [n for n in NEVER if not n.startswith("tag/")], OLD)
    (root / "dt=d9" / "bucket-3").mkdir(parents=True)  # an empty, old bucket directory
    os.utime(root / "dt=d9" / "bucket-3", (OLD, OLD))
    return Table.open(str(root))


def test_old_orphans_everywhere_are_removed_and_nothing_else(tmp_path: Path) -> None:
    table = _table_with_orphans(tmp_path / "t")
    before = tree(table)
    referenced_before = assert_intact(table, from_id=1)

    dry = remove_orphan_files(table, dry_run=True)
    assert tree(table) == before
    assert sorted(
        p.removeprefix(table.root + "/") for p in dry.plan.to_json(include_files=True)["paths"]
    ) == sorted(OLD_ORPHANS)
    result = remove_orphan_files(table, dry_run=False)
    after = tree(table)
    assert set(before) - set(after) == set(OLD_ORPHANS)
    assert all(name in after for name in FRESH + NEVER[:3])
    assert (
        result.to_json()["files"]
        == dry.to_json()["files"]
        == {
            "data-file": 3,
            "index-file": 1,
            "manifest": 2,
            "stale-temp-file": 2,
            "statistics": 1,
        }
    )
    assert result.to_json()["directoriesRemoved"] == 1
    assert not (tmp_path / "t" / "dt=d9" / "bucket-3").exists()
    assert (tmp_path / "t" / "dt=d0" / "not-a-bucket").is_dir()
    assert assert_intact(table, from_id=1) == referenced_before


def test_even_with_no_age_limit_no_referenced_file_is_a_candidate(tmp_path: Path) -> None:
    table = _table_with_orphans(tmp_path / "t")
    result = remove_orphan_files(table, dry_run=False, older_than=timedelta(0), allow_short_older_than=True)
    assert result.to_json()["orphans"] == len(OLD_ORPHANS) + len(FRESH)
    assert assert_intact(table, from_id=1) == 9


def test_short_and_negative_older_than_are_refused(tmp_path: Path) -> None:
    table = _table_with_orphans(tmp_path / "t")
    before = tree(table)
    with pytest.raises(MaintenanceRefusedError, match="under 1:00:00"):
        remove_orphan_files(table, dry_run=False, older_than=timedelta(minutes=59))
    with pytest.raises(MaintenanceRefusedError, match="negative"):
        remove_orphan_files(table, dry_run=False, older_than=timedelta(hours=-2), allow_short_older_than=True)
    assert tree(table) == before


def test_an_unreadable_manifest_aborts_with_zero_deletions(tmp_path: Path) -> None:
    table = _table_with_orphans(tmp_path / "t")
    snapshot = table.snapshot_manager.snapshot(2)
    delta = table.manifest_list(snapshot.delta_manifest_list)
    (tmp_path / "t" / "manifest" / delta[0].file_name).write_bytes(b"\x00not avro")
    before = tree(table)
    with pytest.raises(CorruptMetadataError, match=delta[0].file_name):
        remove_orphan_files(table, dry_run=False)
    assert tree(table) == before
    os.remove(tmp_path / "t" / "manifest" / delta[0].file_name)
    with pytest.raises(MissingMetadataError, match=delta[0].file_name):
        remove_orphan_files(table, dry_run=False)
    assert set(tree(table)) == set(before) - {f"manifest/{delta[0].file_name}"}


def test_a_commit_between_listing_and_used_set_collection_loses_nothing(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=5)
    builder = history.builder
    # The writer's files were written long ago (a slow job) but are committed only now.
    late = [builder.entry(["d1"]) for _ in range(3)]
    for entry in late:
        path = tmp_path / "t" / builder.paths.relative_path(entry)
        path.write_bytes(b"x")
        os.utime(path, (OLD, OLD))
    table = Table.open(str(tmp_path / "t"))

    def commit_now(phase: str) -> None:
        if phase == "listed":
            builder.commit(late)

    plan = plan_orphan_cleanup(table, on_phase=commit_now)
    result = execute_orphan_cleanup(table, plan, dry_run=False)
    assert result.to_json()["orphans"] == 0
    assert assert_intact(table, from_id=1) == 6


def test_a_commit_between_planning_and_deleting_is_caught_by_the_recheck(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=5)
    builder = history.builder
    late = [builder.entry(["d1"]) for _ in range(3)]
    for entry in late:
        path = tmp_path / "t" / builder.paths.relative_path(entry)
        path.write_bytes(b"x")
        os.utime(path, (OLD, OLD))
    table = Table.open(str(tmp_path / "t"))
    plan = plan_orphan_cleanup(table)
    assert len(plan.orphans) == 3  # uncommitted and old: orphans at planning time
    builder.commit(late)  # ...then the slow writer commits them
    result = execute_orphan_cleanup(table, plan, dry_run=False)
    assert result.to_json()["keptByRecheck"] == 3
    assert result.to_json()["files"] == {}
    assert assert_intact(table, from_id=1) == 6


def test_expiry_during_used_set_collection_deletes_no_live_file(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=9)
    table = Table.open(str(tmp_path / "t"))

    def expire_now(phase: str) -> None:
        if phase == "listed":
            expire_snapshots(table, dry_run=False, retain_min=2, older_than=timedelta(0))

    plan = plan_orphan_cleanup(
        table, older_than=timedelta(0), allow_short_older_than=True, on_phase=expire_now
    )
    execute_orphan_cleanup(table, plan, dry_run=False)
    assert table.snapshot_manager.earliest_snapshot_id() == 8
    assert assert_intact(table) == 2


def test_orphan_cleanup_between_expiry_planning_and_execution(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=9)
    table = Table.open(str(tmp_path / "t"))
    plan = plan_snapshot_expiry(table, retain_min=2, older_than=timedelta(0))
    remove_orphan_files(table, dry_run=False, older_than=timedelta(0), allow_short_older_than=True)
    from airflow_lakeformat.core.paimon.maintenance.expiry import execute_snapshot_expiry

    execute_snapshot_expiry(table, plan, dry_run=False)
    assert assert_intact(table) == 2


def _collect_errors(errors: list[BaseException], fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except BaseException as exc:  # collected and checked by the test
        errors.append(exc)


def test_expiry_and_orphan_cleanup_running_at_the_same_time(tmp_path: Path) -> None:
    for round_ in range(4):
        root = tmp_path / f"t{round_}"
        build_history(root, snapshots=12)
        table = Table.open(str(root))
        errors: list[BaseException] = []
        threads = [
            threading.Thread(
                target=_collect_errors,
                args=(
                    errors,
                    lambda t=table: expire_snapshots(t, dry_run=False, retain_min=3, older_than=timedelta(0)),
                ),
            ),
            threading.Thread(
                target=_collect_errors,
                args=(
                    errors,
                    lambda t=table: remove_orphan_files(
                        t, dry_run=False, older_than=timedelta(0), allow_short_older_than=True
                    ),
                ),
            ),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Orphan cleanup may abort (metadata vanished under it) but must never delete a live file.
        assert all(isinstance(e, (CorruptMetadataError,)) for e in errors), errors
        assert assert_intact(Table.open(str(root))) == 3


@pytest.mark.s3
def test_orphan_cleanup_on_s3(tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str) -> None:
    local = tmp_path / "t"
    _table_with_orphans(local)
    remote = f"{s3_bucket}/wh/t"
    upload_tree(seaweedfs.fs(), local, remote)
    table = Table.open(remote, seaweedfs.storage_options())
    before = tree(table)
    # Objects cannot be back-dated on S3: everything was just uploaded, so nothing is a candidate...
    assert remove_orphan_files(table, dry_run=False).to_json()["candidates"] == 0
    # ...until the clock says three days have passed.
    later = time.time() + 3 * 86400
    result = remove_orphan_files(table, dry_run=False, clock=lambda: later)
    after = tree(table)
    planted = set(OLD_ORPHANS) | set(FRESH)
    assert set(before) - set(after) == planted
    assert result.to_json()["files"]["data-file"] == 4
    assert assert_intact(table, from_id=1) == 9


def test_a_snapshot_expired_between_listing_and_reading_is_skipped(tmp_path: Path) -> None:
    from airflow_lakeformat.core.paimon.maintenance.orphans import UsedMetadata, _snapshots_of

    build_history(tmp_path / "t", snapshots=4)
    table = Table.open(str(tmp_path / "t"))
    manager = table.snapshot_manager
    listed = manager.list_snapshot_ids()
    (tmp_path / "t" / "snapshot" / "snapshot-1").unlink()  # a concurrent expiry removes it now
    manager.list_snapshot_ids = lambda: listed  # type: ignore[method-assign]
    used = UsedMetadata()
    assert [s.id for s in _snapshots_of(manager, used)] == [2, 3, 4]
    assert used.skipped_vanished == 1


def test_the_used_set_reads_each_manifest_list_and_manifest_once(tmp_path: Path) -> None:
    # The tag shares its manifest lists with snapshot 3, and the base lists of later snapshots
    # repeat the manifests of earlier ones: still one read per file.
    table = _table_with_orphans(tmp_path / "t")
    reads: Counter[str] = Counter()
    read_bytes = table.io.read_bytes

    def counting(path: str) -> bytes:
        reads[path] += 1
        return read_bytes(path)

    table.io.read_bytes = counting  # type: ignore[method-assign]
    plan = plan_orphan_cleanup(table)
    assert sorted(r.path.removeprefix(table.root + "/") for r in plan.orphans) == sorted(OLD_ORPHANS)
    metadata = {p: n for p, n in reads.items() if p.startswith(table.manifest_dir + "/")}
    assert metadata and {p: n for p, n in metadata.items() if n > 1} == {}
    assert len(metadata) == len(plan.manifests_read) + len({n for n in plan.used.names if "list" in n})
