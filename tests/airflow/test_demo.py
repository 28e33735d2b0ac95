"""The README's demo command: the example DAGs run with `airflow dags test` against the embedded default
(local warehouse, Spark local[2], SQLite) and the before/after summary shows what maintenance did."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]


def row(out: str, label: str, table: str | None = None) -> tuple[str, str]:
    """A before -> after row of the comparison printed for ``table`` (default: the first comparison)."""
    if table is not None:
        start = out.index("== Before -> after")
        out = out[out.index(f"table {table} (", start) :]
    match = re.search(rf"^  {re.escape(label)}\s+(\S+) ->\s+(\S+)$", out, re.MULTILINE)
    assert match, f"no before/after row {label!r} in:\n{out[-3000:]}"
    return match[1], match[2]


def test_demo_runs_every_example_dag_and_shows_the_table_before_and_after(tmp_path: Path) -> None:
    # The demo sets its own Airflow environment; none of this session's may leak into it.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "LAKEFORMAT_")) and k != "SPARK_SUBMIT_OPTS"
    }
    env["LAKEFORMAT_DEMO_DIR"] = str(tmp_path)
    proc = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, (out[-3000:], proc.stderr[-3000:])
    table = tmp_path / "demo-warehouse" / "demo.db" / "events"
    for dag in (
        "lakeformat_ingest",
        "lakeformat_downstream_sensor",
        "lakeformat_downstream_asset",
        "lakeformat_manual_maintenance",
        "lakeformat_maintenance",
        "lakeformat_iceberg_maintenance",
    ):
        assert f"-- airflow dags test {dag}" in out
    assert out.count("run finished: success") == 11 and "run finished: failed" not in out
    assert (
        f"{table}: wrote 1000 rows in 1 file(s), replaced 0; committed snapshot 4 (APPEND); execution: spark"
        in out
    )
    assert f"snapshot 4 (APPEND) of {table}: 1000 new records since snapshot 3" in out
    assert (
        "Asset lakeformat://lakeformat_default/demo.events: 4 events from lakeformat_ingest.write_batch, snapshots [1, 2, 3, 4]"
        in out
    )
    assert "would rewrite 4 files" in out and "rewrote 4 files in 1 group(s) into 1" in out
    assert "expired snapshots 1..4 (earliest now 5, latest " in out and "files deleted: 4 data-files (" in out
    assert "1 orphaned; files deleted: 1 data-file (" in out
    assert row(out, "snapshots") == ("4", "2")
    assert row(out, "latest commit kind") == ("APPEND", "COMPACT")
    assert row(out, "live data files") == ("4", "1")
    assert row(out, "live rows") == ("4000", "4000")
    assert row(out, "manifests (latest)") == ("4", "1")
    assert row(out, "data files on disk") == ("5", "1")  # the 4 compacted files and the orphan are gone
    assert len(list(table.rglob("data-*.parquet"))) == 1
    # The Iceberg table (an SQL catalog on SQLite): 4 appends; the data compaction rewrites their 4 files into 1
    # (a replace snapshot), expiry keeps only that snapshot and deletes the 4 small files, the manifest
    # compaction's replace snapshot goes on top, and the orphan is gone.
    iceberg = "demo.events_iceberg"
    real = out.split("== Iceberg maintenance for real")[1]
    assert (
        "default:demo.events_iceberg: data compaction rewrote 4 files in 1 of 1 group into 1 file (" in real
    )
    assert "default:demo.events_iceberg: expired 4 of 5 snapshots; files deleted: 4 data-files (" in real
    assert "1 orphaned; files deleted: 1 data-file (" in real
    assert row(out, "snapshots", iceberg) == ("4", "2")
    assert row(out, "latest commit kind", iceberg) == ("APPEND", "REPLACE")
    assert row(out, "live data files", iceberg) == ("4", "1")
    assert row(out, "live rows", iceberg) == ("4000", "4000")
    assert row(out, "manifests (latest)", iceberg) == ("4", "1")
    assert row(out, "data files on disk", iceberg) == ("5", "1")
    root = tmp_path / "demo-warehouse" / "iceberg" / "demo" / "events_iceberg"
    assert len(list((root / "data").glob("*.parquet"))) == 1
    assert len(list((tmp_path / "demo-airflow" / "demo-logs").glob("*.log"))) == 12
