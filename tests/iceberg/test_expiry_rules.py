"""Iceberg expiry: Java's retention rules on real tables (older-than, retain-last, table properties, explicit ids,
per-ref retention, expired tags and branches), the metadata side effects (statistics, snapshot log, parents,
clean_expired_metadata) and the refusals. Each test runs a real expiry and checks the files left."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import SetPartitionStatisticsUpdate, SetStatisticsUpdate

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots, plan_snapshot_expiry
from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import parse_older_than
from tests.iceberg import expiry_support as support
from tests.iceberg.scenarios import build


def snapshot_ids(table) -> set[int]:  # type: ignore[no-untyped-def]
    table.refresh()
    return {s.snapshot_id for s in table.metadata.snapshots}


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_older_than_and_retain_last(tmp_path: Path, kind: str) -> None:
    table = support.create(tmp_path, kind)
    ids = support.history(table)
    cutoff = support.timestamp(table, ids[3])  # snapshots 0..2 are older than the delete's snapshot
    kept_by_walk = plan_snapshot_expiry(table, older_than=cutoff, retain_last=4)
    assert kept_by_walk.expired == [ids[0]]  # 4 ancestors kept from the head: 4, 3, 2, 1

    before = support.stored_files(table)
    result = expire_snapshots(table, dry_run=False, older_than=cutoff, retain_last=1)
    assert result.committed and result.plan.expired == ids[:3]
    assert snapshot_ids(table) == set(ids[3:])
    deleted = before - support.stored_files(table)
    files = result.to_json()["files"]
    assert sum(files.values()) == len(deleted) and files["manifest-list"] == 3
    assert files["data-file"] == 1  # the file rewritten by the copy-on-write delete
    support.assert_converged(table)
    assert support.table_rows(table) == [2, 3, 4, 5]
    assert support.table_rows(table, ids[3]) == [2, 3, 4]


def test_defaults_come_from_table_properties(tmp_path: Path) -> None:
    table = support.create(
        tmp_path,
        properties={"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "2"},
    )
    ids = support.history(table)
    later = support.timestamp(table, ids[-1]) / 1000 + 10
    plan = plan_snapshot_expiry(table, clock=lambda: later)
    assert plan.expired == ids[:3]  # everything older than 1 ms ago, but 2 kept on main
    assert plan.options.sources == {
        "olderThan": "history.expire.max-snapshot-age-ms",
        "retainLast": "history.expire.min-snapshots-to-keep",
    }
    plain = support.create(tmp_path, name="plain")
    support.history(plain)
    assert plan_snapshot_expiry(plain).expired == []  # 5 days by default: nothing is that old
    far = time.time() + 6 * 86400
    assert len(plan_snapshot_expiry(plain, clock=lambda: far).expired) == 4  # retain-last 1 by default


def test_older_than_accepts_durations_timestamps_and_iso_strings(tmp_path: Path) -> None:
    now = 1_700_000_000_000
    assert parse_older_than(timedelta(hours=1), now) == now - 3_600_000
    assert parse_older_than("1 h", now) == now - 3_600_000
    assert parse_older_than("2024-05-01T00:00:00Z", now) == 1_714_521_600_000
    assert parse_older_than("2024-05-01 02:00:00+02:00", now) == 1_714_521_600_000
    assert parse_older_than("2024-05-01", now) == 1_714_521_600_000
    assert parse_older_than(datetime(2024, 5, 1, tzinfo=timezone.utc), now) == 1_714_521_600_000
    with pytest.raises(ValueError, match="neither a duration"):
        parse_older_than("yesterday", now)
    table = support.create(tmp_path)
    ids = support.history(table)
    iso = datetime.fromtimestamp(support.timestamp(table, ids[2]) / 1000, tz=timezone.utc).isoformat()
    assert plan_snapshot_expiry(table, older_than=iso).expired == ids[:2]


def test_explicit_snapshot_ids_expire_inside_the_window(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    plan = plan_snapshot_expiry(table, snapshot_ids=[ids[1], 123])
    assert plan.expired == [ids[1]]  # the age rule (5 days) expires nothing else
    assert any("123" in w for w in plan.warnings)
    with pytest.raises(MaintenanceRefusedError, match="Still referenced by refs"):
        plan_snapshot_expiry(table, snapshot_ids=[ids[-1]])
    result = expire_snapshots(table, dry_run=False, snapshot_ids=[ids[1]])
    assert snapshot_ids(table) == set(ids) - {ids[1]}
    child = table.metadata.snapshot_by_id(ids[2])
    assert child is not None and child.parent_snapshot_id == ids[1]  # Java keeps the dangling parent id
    assert result.to_json()["files"] == {"manifest-list": 1}
    support.assert_converged(table)


def test_per_ref_retention_overrides_the_arguments(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    pyt = table.table
    pyt.manage_snapshots().create_branch(ids[1], "keep3", min_snapshots_to_keep=3).commit()
    pyt.manage_snapshots().create_branch(ids[0], "old_branch").commit()
    pyt.manage_snapshots().create_tag(ids[0], "old_tag", max_ref_age_ms=1).commit()
    pyt.manage_snapshots().create_tag(ids[2], "tag_forever").commit()
    table.refresh()
    branch_only = support.append(table, [100], "z", branch="old_branch")  # reachable only from old_branch
    # pyiceberg drops a branch's retention when it commits to it (Java keeps it): set it afterwards.
    pyt.manage_snapshots().remove_branch("old_branch").commit()
    pyt.manage_snapshots().create_branch(branch_only, "old_branch", max_ref_age_ms=1).commit()
    pyt.manage_snapshots().create_branch(ids[3], "young", max_snapshot_age_ms=10**9).commit()
    table.refresh()
    before = support.stored_files(table)
    later = time.time() + 1
    result = expire_snapshots(
        table, dry_run=False, older_than=int(later * 1000), retain_last=1, clock=lambda: later
    )
    document = result.to_json()
    assert document["refsRemoved"] == {"old_branch": branch_only, "old_tag": ids[0]}
    assert set(table.metadata.refs) == {"main", "keep3", "tag_forever", "young"}
    # keep3 keeps ids[1] and its ancestor ids[0] (min 3); young keeps its whole ancestry (10^9 ms);
    # tag_forever keeps ids[2]; main keeps its head. The expired branch's own snapshot goes, with its file.
    assert snapshot_ids(table) == set(ids)
    assert result.plan.expired == [branch_only]
    deleted = before - support.stored_files(table)
    assert document["files"]["data-file"] == 1 and len(deleted) == sum(document["files"].values())
    assert any("old_branch" in d for d in document["decisions"])
    support.assert_converged(table)


def test_branch_min_snapshots_and_max_age_walk(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    table.table.manage_snapshots().create_branch(ids[-1], "b3", min_snapshots_to_keep=3).commit()
    plan = plan_snapshot_expiry(table, older_than=support.timestamp(table, ids[-1]) + 1, retain_last=1)
    assert plan.expired == ids[:2]  # b3 keeps 3 ancestors of the head; main alone would keep 1
    table.table.manage_snapshots().remove_branch("b3").create_branch(
        ids[-1], "aged", max_snapshot_age_ms=10**9
    ).commit()
    assert plan_snapshot_expiry(table, older_than=support.timestamp(table, ids[-1]) + 1).expired == []


def _statistics(table, snapshot_id: int, name: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    stats_path = f"{table.root}/metadata/{name}.stats"
    partition_path = f"{table.root}/metadata/{name}-partition-stats.parquet"
    for path in (stats_path, partition_path):
        Path(path).write_bytes(b"PFA1" + name.encode())
    tx = table.table.transaction()
    tx._apply(
        (
            SetStatisticsUpdate(
                statistics=StatisticsFile(
                    snapshot_id=snapshot_id,
                    statistics_path=f"file://{stats_path}",
                    file_size_in_bytes=4 + len(name),
                    file_footer_size_in_bytes=0,
                    blob_metadata=[],
                )
            ),
            SetPartitionStatisticsUpdate(
                partition_statistics=PartitionStatisticsFile(
                    snapshot_id=snapshot_id,
                    statistics_path=f"file://{partition_path}",
                    file_size_in_bytes=4 + len(name),
                )
            ),
        )
    )
    tx.commit_transaction()
    table.refresh()
    return stats_path, partition_path


def test_statistics_files_of_expired_snapshots_are_deleted(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    old = _statistics(table, ids[0], "old")
    kept = _statistics(table, ids[-1], "kept")
    result = expire_snapshots(
        table, dry_run=False, older_than=support.timestamp(table, ids[-1]), retain_last=1
    )
    document = result.to_json()
    assert document["files"]["statistics"] == 1 and document["files"]["partition-statistics"] == 1
    assert document["javaCounts"]["deleted_statistics_files_count"] == 2
    assert not any(Path(p).exists() for p in old) and all(Path(p).exists() for p in kept)
    assert [s.snapshot_id for s in table.metadata.statistics] == [ids[-1]]
    assert [s.snapshot_id for s in table.metadata.partition_statistics] == [
        ids[-1]
    ]  # pyiceberg alone keeps it
    support.assert_converged(table)


def test_snapshot_log_keeps_no_history_before_a_removed_snapshot(tmp_path: Path) -> None:
    table = support.create(tmp_path)
    ids = support.history(table)
    assert [e.snapshot_id for e in table.metadata.snapshot_log] == ids
    expire_snapshots(table, dry_run=False, snapshot_ids=[ids[2]])
    assert [e.snapshot_id for e in table.metadata.snapshot_log] == ids[3:]  # Java's updateSnapshotLog
    assert snapshot_ids(table) == set(ids) - {ids[2]}


def test_clean_expired_metadata_drops_unused_specs_and_schemas(tmp_path: Path) -> None:
    scenario = build("hadoop", 2, tmp_path)
    table = scenario.table
    assert len(table.metadata.partition_specs) == 3 and len(table.metadata.schemas) == 2
    head = table.metadata.current_snapshot_id
    plain = plan_snapshot_expiry(table, older_than=support.timestamp(table, head), retain_last=1)
    assert plain.specs_removed == [] and plain.schemas_removed == []
    for ref in [r for r in table.metadata.refs if r != "main"]:
        manage = table.table.manage_snapshots()
        (manage.remove_tag(ref) if ref == "t1" else manage.remove_branch(ref)).commit()
    table.refresh()
    result = expire_snapshots(
        table,
        dry_run=False,
        older_than=support.timestamp(table, head),
        retain_last=1,
        clean_expired_metadata=True,
    )
    used_specs = {table.metadata.default_spec_id}
    for snapshot in table.metadata.snapshots:
        used_specs |= {m.partition_spec_id for m in snapshot.manifests(table.table.io)}
    assert {s.spec_id for s in table.metadata.partition_specs} == used_specs
    assert result.plan.schemas_removed == [0]  # the schema before the rename
    assert {s.schema_id for s in table.metadata.schemas} == {table.metadata.current_schema_id}
    support.assert_converged(table)


def test_clean_expired_metadata_drops_a_spec_no_retained_manifest_uses(tmp_path: Path) -> None:
    from pyiceberg.transforms import IdentityTransform

    table = support.create(tmp_path)
    support.append(table, [1, 2], "a")
    with table.table.update_spec() as update:
        update.add_field("s", IdentityTransform(), "s_part")
    table.refresh()
    table.table.overwrite(support.arrow_rows([3], "b"))  # every spec-0 file deleted
    head = support.append(table, [4], "c")  # a fast append drops manifests holding only DELETED entries
    table.refresh()
    kept = plan_snapshot_expiry(
        table, older_than=support.timestamp(table, head), clean_expired_metadata=False
    )
    assert kept.specs_removed == []
    result = expire_snapshots(
        table,
        dry_run=False,
        older_than=support.timestamp(table, head),
        retain_last=1,
        clean_expired_metadata=True,
    )
    assert result.plan.specs_removed == [0]
    assert [s.spec_id for s in table.metadata.partition_specs] == [table.metadata.default_spec_id]
    assert support.table_rows(table) == [3, 4]
    support.assert_converged(table)


def test_refusals(tmp_path: Path) -> None:
    table = support.create(tmp_path, properties={"gc.enabled": "false"})
    support.history(table)
    with pytest.raises(MaintenanceRefusedError, match="GC is disabled"):
        plan_snapshot_expiry(table, retain_last=1)
    other = support.create(tmp_path, name="other")
    support.history(other)
    with pytest.raises(MaintenanceRefusedError, match="at least 1"):
        plan_snapshot_expiry(other, retain_last=0)
    readonly_metadata = other.metadata_location
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table

    readonly = open_path_table(readonly_metadata)
    assert readonly.read_only
    with pytest.raises(MaintenanceRefusedError, match="metadata file"):
        expire_snapshots(readonly, dry_run=False, retain_last=1, older_than="0 ms")
    assert HadoopLayoutCatalog  # the catalog module stays importable next to the expiry modules
