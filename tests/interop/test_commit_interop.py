"""pypaimon reads what we commit, at every snapshot, and keeps writing on top of it."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.table import Table
from tests.support.pypaimon import oracle_append, run_oracle_batch
from tests.unit.test_cli import run

pytestmark = pytest.mark.interop

SCHEMA = [
    {"name": "dt", "type": "DATE"},
    {"name": "s", "type": "STRING"},
    {"name": "id", "type": "BIGINT"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "price", "type": "DECIMAL(10, 2)"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
]


def rows(batch: int, count: int, dt: date, s: str | None) -> list[dict[str, Any]]:
    return [
        {
            "dt": dt, "s": s, "id": batch * 1000 + i, "amount": i / 4,
            "price": Decimal(f"{i}.{i % 100:02d}"), "ts": datetime(2024, 1, 2, 3, 4, 5, 123456 + i),
        }
        for i in range(count)
    ]  # fmt: skip


def normalized(row: dict[str, Any]) -> str:
    """The oracle's JSON form: ISO dates and timestamps, decimals as strings."""
    out = {
        "dt": row["dt"].isoformat(), "s": row["s"], "id": row["id"], "amount": row["amount"],
        "price": format(row["price"], "f"), "ts": row["ts"].isoformat(),
    }  # fmt: skip
    return json.dumps(out, sort_keys=True)


def write_parquet(path: Path, data: list[dict[str, Any]]) -> Path:
    arrow = pa.Table.from_pylist(
        data,
        schema=pa.schema([
            ("dt", pa.date32()), ("s", pa.string()), ("id", pa.int64()), ("amount", pa.float64()),
            ("price", pa.decimal128(10, 2)), ("ts", pa.timestamp("us")),
        ]),
    )  # fmt: skip
    pq.write_table(arrow, path)
    return path


def test_pypaimon_reads_every_snapshot_we_commit_and_appends_on_top(tmp_path: Path) -> None:
    table_path = tmp_path / "wh" / "db.db" / "ours"
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(SCHEMA))
    code, _, err = run(
        "create-table", str(table_path), "--schema", str(schema_file), "--partition-keys", "dt,s"
    )
    assert code == 0, err
    batches = [
        rows(1, 5, date(2024, 1, 1), "a/b:c=d"),
        rows(2, 3, date(2024, 1, 2), None),
        rows(3, 4, date(2024, 1, 1), ""),
        rows(4, 2, date(2024, 1, 1), "a/b:c=d"),
    ]
    expected: dict[int, list[str]] = {}
    current: list[dict[str, Any]] = []
    for i, batch in enumerate(batches):
        source = write_parquet(tmp_path / f"batch{i}.parquet", batch)
        args = ["write", str(table_path), "--from", str(source), "--json"]
        if i == 3:
            args += ["--overwrite", "dt=2024-01-01,s=a/b:c=d"]
            current = [r for r in current if not (r["dt"] == date(2024, 1, 1) and r["s"] == "a/b:c=d")]
        code, out, err = run(*args)
        assert code == 0, err
        snapshot_id = json.loads(out)["snapshotId"]
        current = current + batch
        expected[snapshot_id] = sorted(normalized(r) for r in current)
    assert sorted(expected) == [1, 2, 3, 4]
    reads = run_oracle_batch([["read", str(table_path), "--snapshot", str(i)] for i in sorted(expected)])
    for snapshot_id, got in zip(sorted(expected), reads, strict=True):
        assert sorted(json.dumps(r, sort_keys=True) for r in got) == expected[snapshot_id], snapshot_id
    # pypaimon appends on top of our snapshot 4; we read its snapshot 5.
    extra = {
        "dt": "2024-01-03",
        "s": "py",
        "id": 99,
        "amount": 1.5,
        "price": "7.70",
        "ts": "2024-01-02T03:04:05",
    }
    oracle_append(table_path, [extra])
    table = Table.open(str(table_path))
    latest = table.snapshot_manager.latest_snapshot()
    assert latest is not None and latest.id == 5
    files = live_files(table, latest)
    assert sum(f.entry.file.row_count for f in files) == len(current) + 1 == latest.total_record_count
    assert {"dt": "2024-01-03", "s": "py"} in [f.partition for f in files]
    for f in files:
        assert (table_path / f.path).is_file()
