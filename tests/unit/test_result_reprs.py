"""Results print one short line (``<ClassName [dry run: ]summary>``), not a kilobytes-long dataclass dump."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow_lakeformat import open_table
from airflow_lakeformat.core.maintenance.result_repr import MAX_SUMMARY, short_repr

LIMIT = 300


def assert_short(result: Any) -> None:
    text = repr(result)
    assert text.startswith(f"<{type(result).__name__} ") and text.endswith(">"), text
    assert len(text) < LIMIT and "\n" not in text, text
    assert "(" not in text.split(" ", 1)[0], text  # not the dataclass form Name(field=...)


def test_paimon_results_have_short_reprs(sample_tables: Path) -> None:
    table = open_table(str(sample_tables / "append_ovw_tbl"))
    expiry = table.maintenance.expire_snapshots(retain_min=1, retain_max=1, older_than=timedelta(0))
    orphans = table.maintenance.remove_orphan_files()
    manifests = table.maintenance.compact_manifests("full", dry_run=True)
    for result in (expiry, orphans, manifests):
        assert_short(result)
    assert repr(expiry).startswith("<SnapshotExpiryResult dry run: would expire snapshots 1..2")


def test_iceberg_results_have_short_reprs(tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    build("hadoop", 2, tmp_path)
    table = open_table(str(tmp_path / "t"))
    expiry = table.maintenance.expire_snapshots(older_than=timedelta(0), retain_min=1)
    orphans = table.maintenance.remove_orphan_files()
    manifests = table.maintenance.compact_manifests("full", dry_run=True)
    for result in (expiry, orphans, manifests):
        assert_short(result)
    assert repr(expiry).startswith("<IcebergExpiryResult dry run: would expire ")


def test_a_long_summary_is_cut() -> None:
    @short_repr
    @dataclass
    class Result:
        table: str
        dry_run: bool

        def summary(self) -> str:
            return f"{self.table}: " + "x" * 1000

    text = repr(Result("s3://bucket/warehouse/db.db/t", dry_run=False))
    assert text == "<Result " + "x" * (MAX_SUMMARY - 1) + "…>"
