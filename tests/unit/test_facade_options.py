"""What the layers above pass to ``table.maintenance``: progress, a deleter, a commit user, the lock, the
orphan-age rule, another format's options refused by name, and the table's size for ``execution="auto"``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.maintenance.facade_base import expiry_older_than
from airflow_lakeformat.core.maintenance.orphan_age import ORPHAN_AGES
from airflow_lakeformat.core.table_maintenance import COMMIT_USER_PROPERTY
from airflow_lakeformat.core.table_writes import partition_filters


class Recorder:
    """A progress sink that remembers what it was told."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self.calls.append(name)


def test_the_orphan_age_rule_is_the_formats_default_when_none_is_given(
    sample_tables: Path, tmp_path: Path
) -> None:
    from tests.iceberg.scenarios import build

    paimon = open_table(str(sample_tables / "append_tbl"))
    build("hadoop", 2, tmp_path)
    iceberg = open_table(str(tmp_path / "t"))
    assert paimon.maintenance.orphan_older_than(None) == timedelta(days=1) == ORPHAN_AGES["paimon"].default
    assert iceberg.maintenance.orphan_older_than(None) == timedelta(days=3) == ORPHAN_AGES["iceberg"].default
    assert iceberg.maintenance.orphan_older_than(timedelta(hours=30)) == timedelta(hours=30)
    assert ORPHAN_AGES["paimon"].minimum == timedelta(hours=1)
    assert ORPHAN_AGES["iceberg"].minimum == timedelta(hours=24)


def test_another_formats_options_are_refused_by_name(sample_tables: Path, tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    paimon = open_table(str(sample_tables / "append_tbl"))
    with pytest.raises(UsageError, match="clean_expired_metadata: only for Iceberg tables"):
        paimon.maintenance.expire_snapshots(clean_expired_metadata=True)
    with pytest.raises(UsageError, match="a timestamp is only accepted for Iceberg tables"):
        paimon.maintenance.expire_snapshots(older_than="2024-05-01T00:00:00Z")
    build("hadoop", 2, tmp_path)
    iceberg = open_table(str(tmp_path / "t"))
    with pytest.raises(UsageError, match="retain_max, max_deletes: only for Paimon tables"):
        iceberg.maintenance.expire_snapshots(retain_max=3, max_deletes=5)


def test_expiry_older_than_takes_a_duration_or_a_timestamp() -> None:
    assert expiry_older_than("7 d") == timedelta(days=7)
    assert expiry_older_than(" 2024-05-01T00:00:00Z ") == "2024-05-01T00:00:00Z"
    assert expiry_older_than(None) is None
    with pytest.raises(UsageError, match="neither a duration"):
        expiry_older_than("2024-13-45")
    with pytest.raises(UsageError, match="neither a duration"):
        expiry_older_than("soon")


def test_progress_and_deleter_reach_the_core(sample_tables: Path) -> None:
    root = sample_tables / "append_ovw_tbl"
    table = open_table(str(root))
    progress = Recorder()
    deleter = table.maintenance.file_deleter(dry_run=False, batch_size=1)
    result = table.maintenance.expire_snapshots(
        retain_min=1, retain_max=1, older_than=timedelta(0), dry_run=False, progress=progress, deleter=deleter
    )
    assert result.to_json()["snapshotsExpired"] == [1, 2]
    assert progress.calls, "the expiry reported no progress"
    assert table.native.snapshot_manager.list_snapshot_ids() == [3, 4]


def test_commit_user_names_the_compaction_snapshot(sample_tables: Path, tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    paimon = open_table(str(sample_tables / "append_ovw_tbl"))
    done = paimon.maintenance.compact_manifests("full", commit_user="airflow-dag-task")
    assert paimon.native.snapshot_manager.snapshot(done.snapshot_id).commit_user == "airflow-dag-task"

    build("hadoop", 2, tmp_path)
    iceberg = open_table(str(tmp_path / "t"))
    iceberg.maintenance.compact_manifests("full", commit_user="airflow-dag-task")
    head = iceberg.native.snapshot()
    assert head is not None and head.summary is not None
    assert head.summary.get(COMMIT_USER_PROPERTY) == "airflow-dag-task"


def test_size_lock_and_compactability(sample_tables: Path, tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    paimon = open_table(str(sample_tables / "append_tbl"))
    size = paimon.maintenance.size()
    assert size.snapshot_id is not None and size.live_files > 0 and size.manifests > 0
    assert paimon.maintenance.opens_by_root
    lock = paimon.maintenance.lock("tester", timedelta(minutes=5))
    lease = lock.acquire()
    try:
        assert lease.generation >= 1
        lock_files = list((sample_tables / "append_tbl").rglob("*lock*"))
        assert lock_files and json.loads(lock_files[0].read_text())["owner"] == "tester"
    finally:
        lock.release()

    build("hadoop", 2, tmp_path)
    iceberg = open_table(str(tmp_path / "t"))
    assert iceberg.maintenance.opens_by_root  # a Hadoop-layout table
    assert iceberg.maintenance.size().manifests > 0  # files from the summary, which these snapshots lack
    iceberg.maintenance.check_compact_data()  # a v2 table: data compaction takes it
    plan = iceberg.maintenance.plan_compact_data(partitions=[{"cat": "zz"}], min_file_count=2)
    assert plan.groups == () and plan.options.min_input_files == 2  # no file in partition zz


def test_partition_filters() -> None:
    assert (
        partition_filters(None) is None and partition_filters("*") is None and partition_filters([]) is None
    )
    assert partition_filters(["dt=2024-01-01", {"dt": "2024-01-02"}]) == [
        {"dt": "2024-01-01"},
        {"dt": "2024-01-02"},
    ]
    with pytest.raises(ValueError, match="names no partition"):
        partition_filters(["dt=1", "{}"])
