"""``open_table`` and ``table.maintenance``: one shape over both formats, results with to_json and summary."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import TableNotFoundError, UnsupportedFormatError
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
    with pytest.raises(UnsupportedFormatError, match="not implemented yet"):
        table.maintenance.compact_data(dry_run=False)
    expiry = table.maintenance.expire_snapshots(older_than=timedelta(0), retain_min=1)  # a dry run by default
    assert expiry.to_json()["format"] == "iceberg" and expiry.to_json()["dryRun"] is True
    assert expiry.to_json()["snapshotsExpired"] and "would expire" in expiry.summary()
    orphans = table.maintenance.remove_orphan_files()  # implemented: a dry run by default
    assert orphans.to_json()["format"] == "iceberg" and orphans.to_json()["dryRun"] is True
    assert files_under(tmp_path / "t") == before


def test_nothing_there_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="no Paimon or Iceberg table here"):
        open_table(str(tmp_path))
    with pytest.raises(ValueError, match="format must be"):
        open_table(str(tmp_path), format="delta")  # type: ignore[arg-type]
