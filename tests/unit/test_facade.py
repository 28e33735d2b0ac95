"""``open_table`` and ``table.maintenance``: one shape over both formats, results with to_json and summary."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import TableNotFoundError, UsageError
from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable


def files_under(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def test_paimon_maintenance_through_the_facade(sample_tables: Path) -> None:
    root = sample_tables / "append_ovw_tbl"
    table = open_table(str(root))
    assert (
        isinstance(table, PaimonTable) and table.format == "paimon" and table.uri.endswith("append_ovw_tbl")
    )
    before = files_under(root)

    plan = table.maintenance.plan_expire_snapshots(retain_min=1, retain_max=1, older_than=timedelta(0))
    dry = table.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=timedelta(0))
    orphan_plan = table.maintenance.plan_remove_orphan_files()
    manifests = table.maintenance.plan_compact_manifests("full")
    data = table.maintenance.compact_data(dry_run=True, min_file_count=2)

    assert files_under(root) == before  # plans and dry runs change nothing
    # Snapshot 3 is kept: the table's consumer still reads from it (next snapshot 3).
    assert plan.expired_ids == dry.plan.expired_ids == [1, 2]
    for result, operation in (
        (dry, "expire-snapshots"),
        (manifests, "compact-manifests"),
        (data, "compact-data"),
    ):
        document = result.to_json()
        assert (document["operation"], document["format"], document["dryRun"]) == (operation, "paimon", True)
        assert "\n" not in result.summary() and result.summary()
    assert dry.summary().startswith(f"{table.uri}: would expire snapshots 1..2")
    assert orphan_plan.to_json()["orphans"] == 0

    done = table.maintenance.expire_snapshots(plan=plan, dry_run=False)  # the plan, re-checked, carried out
    assert done.to_json()["snapshotsExpired"] == [1, 2] and not done.to_json()["dryRun"]
    assert table.native.snapshot_manager.list_snapshot_ids() == [3, 4]
    compacted = table.maintenance.compact_manifests("full")
    assert compacted.snapshot_id == 5 and "committed snapshot 5" in compacted.summary()


def test_orphans_through_the_facade_default_to_a_dry_run(sample_tables: Path) -> None:
    root = sample_tables / "append_tbl"
    orphan = root / "dt=2024-01-01" / "bucket-0" / "data-orphan.parquet"
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"x" * 10)
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    table = open_table(str(root))

    dry = table.maintenance.remove_orphan_files()
    assert dry.to_json()["orphans"] == 1 and orphan.exists()
    assert "1 orphaned; files to delete: 1 data-file (10 B)" in dry.summary()
    table.maintenance.remove_orphan_files(dry_run=False)
    assert not orphan.exists()


def test_iceberg_tables_open_and_refuse_what_is_not_built_yet(tmp_path: Path) -> None:
    """Maintenance of an Iceberg table through the facade: dry runs change nothing, and a data compaction whose
    groups hold files of older partition specs (this table has three specs) writes them in the current spec."""
    from tests.iceberg.scenarios import build

    build("hadoop", 2, tmp_path)
    table = open_table(str(tmp_path / "t"))
    assert isinstance(table, IcebergLakeTable) and table.format == "iceberg"
    plan = table.maintenance.plan_compact_manifests("full")
    dry = table.maintenance.compact_manifests("full", dry_run=True)
    assert (dry.to_json()["operation"], dry.to_json()["format"], dry.to_json()["dryRun"]) == (
        "compact-manifests", "iceberg", True,
    )  # fmt: skip
    assert dry.to_json()["manifestsBefore"] > dry.to_json()["manifestsAfter"] and plan is not None
    before = files_under(tmp_path / "t")
    planned = table.maintenance.compact_data(dry_run=True, options={"rewrite-all": "true"})
    assert planned.to_json()["dryRun"] is True and planned.to_json()["filesToRewrite"] > 0
    expiry = table.maintenance.expire_snapshots(older_than=timedelta(0), retain_min=1)  # a dry run by default
    assert expiry.to_json()["format"] == "iceberg" and expiry.to_json()["dryRun"] is True
    assert expiry.to_json()["snapshotsExpired"] and "would expire" in expiry.summary()
    orphans = table.maintenance.remove_orphan_files()  # implemented: a dry run by default
    assert orphans.to_json()["format"] == "iceberg" and orphans.to_json()["dryRun"] is True
    assert files_under(tmp_path / "t") == before
    done = table.maintenance.compact_data(options={"rewrite-all": "true"})  # older specs re-partitioned
    native = table.native
    assert done.to_json()["dryRun"] is False and native.refresh().metadata.current_snapshot_id is not None
    live = native.table.inspect.files().to_pylist()
    assert {f["spec_id"] for f in live if f["content"] == 0} == {native.metadata.default_spec_id}


def test_nothing_there_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="no Paimon or Iceberg table here"):
        open_table(str(tmp_path))
    with pytest.raises(ValueError, match="format must be"):
        open_table(str(tmp_path), format="delta")  # type: ignore[arg-type]


# -- reading through the facade: snapshots, refs, files, manifests, statistics, inspect -------------------


def test_paimon_reads_through_the_facade(sample_tables: Path) -> None:
    root = sample_tables / "append_ovw_tbl"
    table = open_table(str(root))

    snapshots = table.snapshots()
    assert [(s.id, s.parent_id, s.operation) for s in snapshots] == [
        (1, None, "APPEND"), (2, 1, "APPEND"), (3, 2, "APPEND"), (4, 3, "OVERWRITE"),
    ]  # fmt: skip
    assert snapshots[-1].total_record_count == 3 and snapshots[-1].summary["deltaRecordCount"] == "-1"
    assert set(snapshots[0].to_json()) >= {"id", "parentId", "timestampMs", "operation", "summary"}
    assert {name: (r.type, r.snapshot_id) for name, r in table.refs().items()} == {
        "main": ("branch", 4), "before_overwrite": ("tag", 3),
    }  # fmt: skip

    files = table.files()
    assert len(files) == 3 and [f.path for f in files] == sorted(f.path for f in files)
    assert all(f.path.startswith(f"{root}/dt=2024-01-0") and Path(f.path).is_file() for f in files)
    assert {f.content for f in files} == {"data"} and sum(f.record_count for f in files) == 3
    assert sum(f.file_size for f in files) == sum(Path(f.path).stat().st_size for f in files)
    document = files[0].to_json()
    assert (document["recordCount"], document["fileSize"], document["bucket"]) == (1, files[0].file_size, 0)
    assert len(table.files(ref="before_overwrite")) == 4 == len(table.files(snapshot=3))
    assert table.resolve_snapshot(ref="before_overwrite") == 3 and table.resolve_snapshot() == 4
    assert [m.extra["list"] for m in table.manifests()] == ["base", "base", "base", "delta"]
    assert all(Path(m.path).is_file() for m in table.manifests(snapshot=2))

    stats = table.statistics()
    assert (stats.snapshot_id, stats.snapshot_count, stats.data_file_count, stats.record_count) == (
        4,
        4,
        3,
        3,
    )
    assert (stats.partition_count, stats.delete_file_count, stats.manifest_count) == (2, 0, 4)
    assert stats.data_file_bytes == sum(f.file_size for f in files)
    # Append table, no target-file-size set: Paimon's 256 MiB; 75% of it is the small-file threshold.
    assert (stats.target_file_size, stats.small_file_threshold) == (256 << 20, 192 << 20)
    assert (stats.small_file_count, stats.small_file_share) == (3, 1.0)
    assert table.statistics(ref="before_overwrite").data_file_count == 4

    inspection = table.inspect()
    assert inspection.statistics == stats
    assert [f["name"] for f in inspection.schema["fields"]] == ["dt", "id", "name", "amount"]
    assert inspection.partitioning == [{"name": "dt", "source": "dt", "transform": "identity"}]
    assert inspection.properties["manifest.target-file-size"] == {
        "value": "8 mb",
        "default": "8 mb",
        "set": False,
    }
    assert inspection.details["consumers"] == {"my-consumer": 3}
    assert set(inspection.to_json()) == {
        "table", "format", "statistics", "schema", "partitioning", "properties", "refs", "details",
    }  # fmt: skip


def test_iceberg_reads_through_the_facade(tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    scenario = build("hadoop", 2, tmp_path)
    table = open_table(str(tmp_path / "t"))
    assert isinstance(table, IcebergLakeTable)

    snapshots = table.snapshots()
    assert sorted(s.id for s in snapshots) == sorted(s.snapshot_id for s in scenario.table.metadata.snapshots)
    head = next(s for s in snapshots if s.id == scenario.table.metadata.current_snapshot_id)
    assert head.parent_id is not None and head.operation in {"append", "overwrite", "delete", "replace"}
    totals = [(s.total_record_count, s.summary.get("total-records")) for s in snapshots]
    assert all(ours == (int(theirs) if theirs else None) for ours, theirs in totals)
    assert any(ours is not None for ours, _ in totals)
    assert {"main", "t1", "b1"} <= set(table.refs())

    files = table.files()
    data = [f for f in files if f.content == "data"]
    deletes = [f for f in files if f.content != "data"]
    assert data and deletes  # v2 scenario: a delete manifest with position and equality deletes
    assert all(Path(f.path.removeprefix("file://")).is_file() for f in files)
    assert set(files[0].to_json()) >= {"path", "content", "partition", "recordCount", "fileSize", "specId"}
    assert len(table.files(ref="t1")) >= 1

    stats = table.statistics()
    assert stats.snapshot_id == table.resolve_snapshot() == scenario.table.metadata.current_snapshot_id
    assert (stats.data_file_count, stats.delete_file_count) == (len(data), len(deletes))
    assert stats.data_file_bytes == sum(f.file_size for f in data)
    assert stats.delete_file_bytes == sum(f.file_size for f in deletes)
    assert stats.record_count == sum(f.record_count for f in data)
    assert stats.manifest_count == len(table.manifests())
    assert stats.manifest_bytes == sum(m.file_size for m in table.manifests())
    assert (stats.target_file_size, stats.small_file_threshold) == (512 << 20, 384 << 20)
    assert stats.small_file_count == len(data) and stats.snapshot_count == len(snapshots)

    inspection = table.inspect()
    assert inspection.statistics == stats and inspection.format == "iceberg"
    assert inspection.properties["gc.enabled"] == {"value": True, "default": True, "set": False}
    assert (
        inspection.details["formatVersion"] == 2 and inspection.details["splitOffsets"]["badFileCount"] == 0
    )
    assert {f["name"] for f in inspection.schema["fields"]} >= {"id", "cat"}


def test_reprs_are_short(sample_tables: Path, tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    build("hadoop", 2, tmp_path)
    for table in (open_table(str(sample_tables / "pk_tbl")), open_table(str(tmp_path / "t"))):
        stats = table.statistics()
        for value in (table, stats, table.inspect(), table.snapshots()[0], table.files()[0]):
            assert len(repr(value)) < 300, repr(value)
        assert repr(stats).startswith("<TableStatistics ") and "small" in repr(stats)


def test_a_snapshot_and_a_ref_together_are_a_usage_mistake(sample_tables: Path) -> None:
    table = open_table(str(sample_tables / "append_ovw_tbl"))
    with pytest.raises(UsageError, match="not both"):
        table.files(snapshot=3, ref="before_overwrite")
