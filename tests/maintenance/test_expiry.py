"""Snapshot expiry: Paimon's range rules, deletion order and protection, refusals, crash convergence."""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    DeletionFailedError,
    MaintenanceRefusedError,
    PlanOutdatedError,
)
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.maintenance.deletion import FileDeleter
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.expiry import (
    execute_snapshot_expiry,
    expire_snapshots,
    plan_snapshot_expiry,
)
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import CommitKind
from airflow_lakeformat.core.paimon.table import Table
from tests.support.faults import FaultyFileIO
from tests.support.maintenance import DAY_MS, assert_intact, build_history, referenced_files, tree
from tests.support.seaweedfs import SeaweedFSServer, upload_tree
from tests.support.tables import TableBuilder

NOW = time.time()


def clock() -> float:
    return NOW


def _builder_table(root: Path, times: list[int], **options: str) -> Table:
    builder = TableBuilder(root, [("v", "BIGINT")], options=dict(options))
    for t in times:
        builder.commit([builder.entry()], time_millis=t)
    return Table.open(str(root))


# -- the range ---------------------------------------------------------------------------------


def test_retain_min_keeps_the_newest_snapshots(tmp_path: Path) -> None:
    old = int(NOW * 1000) - 30 * DAY_MS
    table = _builder_table(tmp_path / "t", [old + i for i in range(12)])
    plan = plan_snapshot_expiry(table, retain_min=5, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids == list(range(1, 8))
    assert plan.end == 8
    assert "retain-min 5 keeps snapshots from 8" in plan.decisions


@pytest.mark.parametrize("retain_min", [3, 10])
def test_retain_min_at_or_above_the_snapshot_count_says_every_snapshot_is_kept(
    tmp_path: Path, retain_min: int
) -> None:
    old = int(NOW * 1000) - 30 * DAY_MS
    table = _builder_table(tmp_path / "t", [old + i for i in range(3)])
    plan = plan_snapshot_expiry(table, retain_min=retain_min, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids == []
    assert f"retain-min {retain_min} keeps every snapshot: the table has 3 (1..3)" in plan.decisions
    assert not any("keeps snapshots from" in d for d in plan.decisions), plan.decisions


def test_time_retained_is_judged_on_the_successor(tmp_path: Path) -> None:
    now_ms = int(NOW * 1000)
    hour = 3_600_000
    # snapshot 3 is old, but its successor 4 was committed 30 minutes ago: 3 was the latest until then
    times = [now_ms - 10 * hour, now_ms - 9 * hour, now_ms - 8 * hour, now_ms - hour // 2, now_ms - 1000]
    table = _builder_table(tmp_path / "t", times)
    plan = plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(hours=1), clock=clock)
    assert plan.expired_ids == [1, 2]
    assert any("superseded less than" in d for d in plan.decisions)
    # with a 20-minute retention, snapshot 3 may go (its successor is 30 minutes old), 4 may not
    plan = plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(minutes=20), clock=clock)
    assert plan.expired_ids == [1, 2, 3]


def test_retain_max_expires_regardless_of_age(tmp_path: Path) -> None:
    now_ms = int(NOW * 1000)
    table = _builder_table(tmp_path / "t", [now_ms - 1000 + i for i in range(10)])
    plan = plan_snapshot_expiry(table, retain_min=1, retain_max=4, older_than=timedelta(days=1), clock=clock)
    assert plan.expired_ids == [1, 2, 3, 4, 5, 6]


def test_expire_limit_and_consumers_stop_the_range(tmp_path: Path) -> None:
    old = int(NOW * 1000) - 30 * DAY_MS
    table = _builder_table(tmp_path / "t", [old + i for i in range(20)])
    assert plan_snapshot_expiry(
        table, retain_min=1, older_than=timedelta(0), max_deletes=5, clock=clock
    ).expired_ids == [1, 2, 3, 4, 5]
    (tmp_path / "t" / "consumer").mkdir()
    (tmp_path / "t" / "consumer" / "consumer-reader").write_text(json.dumps({"nextSnapshot": 7}))
    plan = plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids == [1, 2, 3, 4, 5, 6]
    assert plan.protection.consumers == {"reader": 7}


def test_table_options_set_the_defaults_and_bad_settings_are_refused(tmp_path: Path) -> None:
    old = int(NOW * 1000) - 30 * DAY_MS
    table = _builder_table(
        tmp_path / "t",
        [old + i for i in range(10)],
        **{"snapshot.num-retained.min": "3", "snapshot.time-retained": "1 min"},
    )
    plan = plan_snapshot_expiry(table, clock=clock)
    assert plan.options.retain_min == 3 and plan.options.time_retained == timedelta(minutes=1)
    assert plan.expired_ids == list(range(1, 8))
    with pytest.raises(MaintenanceRefusedError, match="retain-min must be at least 1"):
        plan_snapshot_expiry(table, retain_min=0, clock=clock)
    with pytest.raises(MaintenanceRefusedError, match="below retain-min"):
        plan_snapshot_expiry(table, retain_min=5, retain_max=2, clock=clock)


def test_decoupled_changelogs_and_branch_expiry_are_refused(tmp_path: Path) -> None:
    old = int(NOW * 1000) - 30 * DAY_MS
    table = _builder_table(
        tmp_path / "t",
        [old, old + 1],
        **{"changelog.num-retained.max": "5000", "snapshot.num-retained.max": "100"},
    )
    with pytest.raises(MaintenanceRefusedError, match="decoupled changelog"):
        plan_snapshot_expiry(table, clock=clock)
    plain = _builder_table(tmp_path / "p", [old, old + 1])
    (tmp_path / "p" / "changelog").mkdir()
    (tmp_path / "p" / "changelog" / "changelog-1").write_text("{}")
    with pytest.raises(MaintenanceRefusedError, match="long-lived changelogs"):
        plan_snapshot_expiry(plain, clock=clock)
    branch = Table(plain.io, plain.root, branch="dev")
    with pytest.raises(MaintenanceRefusedError, match="only main"):
        plan_snapshot_expiry(branch, clock=clock)


# -- what is deleted ---------------------------------------------------------------------------


def _expected_deleted_data(table: Table, expired: list[int], retained_from: int) -> set[str]:
    """Data files live in some expired snapshot and in no retained snapshot or tag (by path)."""
    manager = table.snapshot_manager
    paths = DataFilePaths(table.schema)

    def live(snapshot: Any) -> set[str]:
        return {paths.relative_path(e) for e in live_entries(table, snapshot)}

    expired_live = set().union(*(live(manager.snapshot(i)) for i in expired))
    kept = set().union(
        *(live(manager.snapshot(i)) for i in manager.list_snapshot_ids() if i >= retained_from)
    )
    kept |= set().union(set(), *(live(t) for t in manager.tags().values()))
    return expired_live - kept


def test_expiry_deletes_exactly_what_only_expired_snapshots_used(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=9)
    history.builder.tag("keep3", history.builder.snapshots[2])
    table = Table.open(str(tmp_path / "t"))
    manager = table.snapshot_manager
    plan = plan_snapshot_expiry(table, retain_min=3, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids == [1, 2, 3, 4, 5, 6]
    expected_data = _expected_deleted_data(table, plan.expired_ids, 7)
    needed = set().union(*(referenced_files(table, manager.snapshot(i)) for i in (7, 8, 9)))
    needed |= referenced_files(table, manager.tag("keep3"))
    before = tree(table)
    assert expected_data, "the history must make expiry delete data files"

    dry = execute_snapshot_expiry(table, plan, dry_run=True)
    assert tree(table) == before
    result = expire_snapshots(table, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
    after = tree(table)
    assert result.to_json()["files"] == dry.to_json()["files"]

    removed = set(before) - set(after)
    removed_data = {p for p in removed if "bucket-" in p}
    assert removed_data == expected_data
    assert not needed - set(after), "a file a retained snapshot or tag needs was deleted"
    assert {f"snapshot/snapshot-{i}" for i in range(1, 7)} <= removed
    assert manager.read_hint("EARLIEST") == 7
    assert result.plan.kept_by_tags_or_branches > 0  # the tag kept files the range deleted
    assert result.plan.kept_readded > 0  # the in-place upgrade kept its file
    # sizes come from the manifests (the builder declares 1024 bytes per file)
    assert result.report.bytes["data-file"] == 1024 * len(removed_data)
    assert assert_intact(table) == 4
    # a second run has nothing left to do in that range
    again = expire_snapshots(table, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
    assert again.plan.expired_ids == [] and tree(table) == after


def test_a_rerun_with_nothing_to_expire_heals_a_stale_earliest_hint(tmp_path: Path) -> None:
    """A run that crashed after deleting the last expired snapshot file, before writing EARLIEST,
    leaves the hint naming a deleted snapshot; the re-run has nothing to expire and must still leave
    the hint a clean run leaves (found by the stateful soak, seed 20261125)."""
    build_history(tmp_path / "t", snapshots=6)
    table = Table.open(str(tmp_path / "t"))
    manager = table.snapshot_manager
    expire_snapshots(table, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
    assert manager.read_hint("EARLIEST") == 4
    # the crashed run: snapshot 4 deleted, the hint never rewritten
    (tmp_path / "t" / "snapshot" / "snapshot-4").unlink()
    rerun = expire_snapshots(table, dry_run=False, retain_min=2, older_than=timedelta(0), clock=clock)
    assert rerun.plan.expired_ids == []
    assert manager.read_hint("EARLIEST") == 5
    # a dry run never writes it
    (tmp_path / "t" / "snapshot" / "EARLIEST").write_text("4")
    expire_snapshots(table, dry_run=True, retain_min=2, older_than=timedelta(0), clock=clock)
    assert manager.read_hint("EARLIEST") == 4


def test_branch_heads_and_branch_tags_protect_files(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=9)
    root = tmp_path / "t"
    branch = root / "branch" / "branch-dev"
    for sub in ("schema", "snapshot", "tag"):
        (branch / sub).mkdir(parents=True)
    shutil.copy(root / "schema" / "schema-0", branch / "schema" / "schema-0")
    second = history.builder.snapshots[1]
    (branch / "snapshot" / "snapshot-2").write_bytes(second.to_bytes())
    (branch / "snapshot" / "EARLIEST").write_text("2")
    (branch / "snapshot" / "LATEST").write_text("2")
    fourth = history.builder.snapshots[3]
    (branch / "tag" / "tag-t4").write_text(json.dumps(fourth.to_json()))
    table = Table.open(str(root))
    protected = referenced_files(table, second) | referenced_files(table, fourth)

    result = expire_snapshots(table, dry_run=False, retain_min=2, older_than=timedelta(0), clock=clock)
    assert result.plan.expired_ids == list(range(1, 8))
    assert result.plan.protection.branches == {"dev": 2}
    assert "dev:t4" in result.plan.protection.tags
    assert not protected - set(tree(table)), "the branch lost files"


def test_plan_is_rechecked_before_execution(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=6)
    table = Table.open(str(tmp_path / "t"))
    plan = plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids
    history.builder.tag("late", history.builder.snapshots[1])  # a tag made after planning
    before = tree(table)
    with pytest.raises(PlanOutdatedError, match="tags, consumers or branches changed"):
        execute_snapshot_expiry(table, plan, dry_run=False)
    assert tree(table) == before


def test_unreadable_tag_manifest_aborts_with_nothing_deleted(tmp_path: Path) -> None:
    history = build_history(tmp_path / "t", snapshots=7)
    history.builder.tag("t2", history.builder.snapshots[1])
    table = Table.open(str(tmp_path / "t"))
    tag = table.snapshot_manager.tag("t2")
    base = table.manifest_list(tag.base_manifest_list)
    (tmp_path / "t" / "manifest" / base[0].file_name).write_bytes(b"garbage, not avro")
    before = tree(table)
    with pytest.raises(CorruptMetadataError, match=base[0].file_name):
        expire_snapshots(table, dry_run=False, retain_min=1, older_than=timedelta(0), clock=clock)
    assert tree(table) == before


# -- crashes -----------------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """A process death: not an OSError, so nothing retries or catches it."""


class CrashingFileIO(FaultyFileIO):
    def _maybe_fail(self, op: str, path: str, perform: object) -> None:
        self.calls.append((op, path))
        if len(self.calls) == self.fail_at:
            if self.after:
                perform()  # type: ignore[operator]
            raise SimulatedCrash(f"crash at {op} #{self.fail_at} ({path})")
        perform()  # type: ignore[operator]


def _open_with(io: FileIO, root: str) -> Table:
    table = Table(io, root, read_parallelism=1)
    table.check_supported()
    return table


def _crash_matrix(make_table: Any, reference_tree: dict[str, int], steps: int, after: bool) -> int:
    crashes = 0
    for k in range(1, steps + 1):
        table = make_table()
        faulty = CrashingFileIO(table.io, fail_at=k, after=after)
        deleter = FileDeleter(faulty, dry_run=False, concurrency=1, batch_size=3)
        with pytest.raises(SimulatedCrash):
            expire_snapshots(
                _open_with(faulty, table.root),
                dry_run=False,
                retain_min=3,
                older_than=timedelta(0),
                clock=clock,
                deleter=deleter,
            )
        crashes += 1
        reopened = make_table(fresh=False)
        assert assert_intact(reopened, from_id=reopened.snapshot_manager.latest_snapshot_id() - 2) >= 3
        expire_snapshots(reopened, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
        assert tree(reopened) == reference_tree, f"crash at step {k} did not converge"
    return crashes


def test_a_crash_at_every_step_of_expiry_converges_on_rerun(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    build_history(pristine, snapshots=8)
    reference = tmp_path / "reference"
    shutil.copytree(pristine, reference)
    io, root = FileIO.for_uri(str(reference))
    counting = FaultyFileIO(io)
    expire_snapshots(
        _open_with(counting, root),
        dry_run=False,
        retain_min=3,
        older_than=timedelta(0),
        clock=clock,
        deleter=FileDeleter(counting, dry_run=False, concurrency=1, batch_size=3),
    )
    steps = len(counting.calls)
    reference_tree = tree(_open_with(io, root))
    touched = [path for _, path in counting.calls]
    # every phase is in the matrix: data files, manifests and lists, snapshot files, the hint
    assert any("bucket-" in p for p in touched) and any("/manifest/manifest-" in p for p in touched)
    assert any("/snapshot/snapshot-" in p for p in touched) and touched[-1].endswith("EARLIEST")
    work = tmp_path / "work"

    def make_table(fresh: bool = True) -> Table:
        if fresh:
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(pristine, work)
        return Table.open(str(work))

    assert _crash_matrix(make_table, reference_tree, steps, after=False) == steps
    assert _crash_matrix(make_table, reference_tree, steps, after=True) == steps


def test_failed_deletes_stop_before_snapshot_files(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=6)
    table = Table.open(str(tmp_path / "t"))
    data_path = next(
        iter(plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(0), clock=clock).data_files)
    )
    # a data file that cannot be deleted: replace it by a non-empty directory
    Path(data_path.path).unlink()
    Path(data_path.path).mkdir()
    (Path(data_path.path) / "x").write_text("x")
    with pytest.raises(DeletionFailedError, match="re-run to finish"):
        expire_snapshots(
            table,
            dry_run=False,
            retain_min=1,
            older_than=timedelta(0),
            clock=clock,
            deleter=FileDeleter(table.io, dry_run=False, max_attempts=2, backoff_base=0.001),
        )
    assert table.snapshot_manager.snapshot_exists(1), "snapshot files must outlive a failed data phase"


# -- S3 ----------------------------------------------------------------------------------------


@pytest.mark.s3
def test_expiry_on_s3_matches_the_local_run(
    tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    local = tmp_path / "t"
    history = build_history(local, snapshots=9)
    history.builder.tag("keep3", history.builder.snapshots[2])
    remote = f"{s3_bucket}/wh/t"
    upload_tree(seaweedfs.fs(), local, remote)
    table = Table.open(remote, seaweedfs.storage_options())
    expected = _expected_deleted_data(table, list(range(1, 7)), 7)
    before = tree(table)
    result = expire_snapshots(table, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
    local_result = expire_snapshots(
        Table.open(str(local)), dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock
    )
    assert result.to_json()["files"] == local_result.to_json()["files"]
    after = tree(table)
    assert {p for p in set(before) - set(after) if "bucket-" in p} == expected
    assert set(after) == set(tree(Table.open(str(local))))
    assert assert_intact(table) == 4
    assert table.snapshot_manager.earliest_snapshot_id() == 7


@pytest.mark.s3
def test_a_crash_during_expiry_on_s3_converges(
    tmp_path: Path, seaweedfs: SeaweedFSServer, s3_bucket: str
) -> None:
    pristine = tmp_path / "pristine"
    build_history(pristine, snapshots=7)
    reference = tmp_path / "reference"
    shutil.copytree(pristine, reference)
    expire_snapshots(
        Table.open(str(reference)), dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock
    )
    reference_tree = tree(Table.open(str(reference)))
    fs = seaweedfs.fs()
    options = seaweedfs.storage_options()

    def run(remote: str, io_wrapper: Any) -> None:
        table = Table.open(remote, options)
        io = io_wrapper(table.io)
        expire_snapshots(
            _open_with(io, table.root),
            dry_run=False,
            retain_min=3,
            older_than=timedelta(0),
            clock=clock,
            deleter=FileDeleter(io, dry_run=False, concurrency=1, batch_size=4),
        )

    upload_tree(fs, pristine, f"{s3_bucket}/count/t")
    counting: list[FaultyFileIO] = []
    run(f"{s3_bucket}/count/t", lambda io: counting.append(FaultyFileIO(io)) or counting[0])
    steps = len(counting[0].calls)
    assert any(op == "delete_objects" for op, _ in counting[0].calls)  # bulk deletes on S3
    for k in range(1, steps + 1):
        remote = f"{s3_bucket}/crash{k}/t"
        upload_tree(fs, pristine, remote)
        with pytest.raises(SimulatedCrash):
            run(remote, lambda io, k=k: CrashingFileIO(io, fail_at=k, after=k % 2 == 0))
        reopened = Table.open(remote, options)
        assert assert_intact(reopened, from_id=reopened.snapshot_manager.latest_snapshot_id() - 2) >= 3
        expire_snapshots(reopened, dry_run=False, retain_min=3, older_than=timedelta(0), clock=clock)
        assert tree(reopened) == reference_tree, f"crash at step {k} did not converge"


def test_commit_kinds_do_not_matter_only_entries_do(tmp_path: Path) -> None:
    # An OVERWRITE that deletes every file of a partition: the deleted files go with the range.
    builder = TableBuilder(tmp_path / "t", [("dt", "STRING"), ("v", "BIGINT")], partition_keys=["dt"])
    old = int(NOW * 1000) - 30 * DAY_MS
    first = [builder.entry(["a"]) for _ in range(3)]
    builder.commit(first, time_millis=old, write_data_files=True)
    builder.commit(
        [e.to_delete() for e in first] + [builder.entry(["a"])],
        CommitKind.OVERWRITE,
        time_millis=old + 1,
        write_data_files=True,
    )
    builder.commit([builder.entry(["b"])], time_millis=old + 2, write_data_files=True)
    table = Table.open(str(tmp_path / "t"))
    result = expire_snapshots(table, dry_run=False, retain_min=1, older_than=timedelta(0), clock=clock)
    assert result.plan.expired_ids == [1, 2]
    assert result.report.files["data-file"] == 3
    assert assert_intact(table) == 1


def test_a_plan_without_its_data_phase_is_refused(tmp_path: Path) -> None:
    build_history(tmp_path / "t", snapshots=6)
    table = Table.open(str(tmp_path / "t"))
    plan = plan_snapshot_expiry(table, retain_min=1, older_than=timedelta(0), clock=clock, data_files=False)
    assert plan.expired_ids and plan.data_files == []
    before = tree(table)
    with pytest.raises(ValueError, match="data_phase_done"):
        execute_snapshot_expiry(table, plan, dry_run=False)
    assert tree(table) == before


# -- reads -------------------------------------------------------------------------------------


def count_reads(table: Table) -> Counter[str]:
    """Count every file the table's FileIO reads, by path (the real read and decode still happen)."""
    reads: Counter[str] = Counter()
    read_bytes = table.io.read_bytes

    def counting(path: str) -> bytes:
        reads[path] += 1
        return read_bytes(path)

    table.io.read_bytes = counting  # type: ignore[method-assign]
    return reads


def test_an_expiry_plan_reads_each_snapshot_manifest_list_and_manifest_once(tmp_path: Path) -> None:
    # Tags inside and after the expired range: their lists are snapshots' lists, their base lists
    # name the delta manifests step 1 reads, and step 3 needs all of them again.
    history = build_history(tmp_path / "t", snapshots=10)
    history.builder.tag("keep3", history.builder.snapshots[2])
    history.builder.tag("keep9", history.builder.snapshots[8])
    table = Table.open(str(tmp_path / "t"))
    reads = count_reads(table)
    plan = plan_snapshot_expiry(table, retain_min=2, older_than=timedelta(0), clock=clock)
    assert plan.expired_ids == list(range(1, 9)) and plan.data_files and plan.metadata_files

    manifest_dir = table.manifest_dir + "/"
    metadata = {p[len(manifest_dir) :]: n for p, n in reads.items() if p.startswith(manifest_dir)}
    snapshots = {p: n for p, n in reads.items() if "/snapshot/snapshot-" in p}
    assert {p: n for p, n in {**metadata, **snapshots}.items() if n > 1} == {}
    lists = {n for n in metadata if n.startswith("manifest-list-")}
    manager = table.snapshot_manager
    boundary = [manager.snapshot(i) for i in range(1, 10)] + list(manager.tags().values())
    assert lists == {s.base_manifest_list for s in boundary} | {s.delta_manifest_list for s in boundary}
    assert len(snapshots) == 10  # the whole history (earliest to latest) is parsed, nothing twice
    assert (plan.manifest_lists_read, plan.manifests_read) == (len(lists), len(metadata) - len(lists))
