"""Tables our ``lakeformat create-table`` makes are tables Java Iceberg 1.10.2 reads, rows and partition spec.

In a fresh warehouse (never the shared oracle warehouse) we create, with the CLI as a user would:

* ``jns.events`` in the SQLite catalog that Java's JDBC catalog ``jc`` shares (``--catalog jc``: the SQL
  catalog keys its rows by catalog name), format v2, partitioned by ``region`` and ``days(ts)``, ``id`` as
  identifier field; rows go in with ``lakeformat commit --add`` (one Parquet file per partition, staged by the
  test: the ``commit --add`` path, beside the ``write`` path of test_iceberg_transform_writes_interop);
* ``hns.plain`` at ``<warehouse>/hns/plain`` in the Hadoop layout (Java's Hadoop catalog ``hc`` finds it
  there), format v1, partitioned by ``region``; rows go in with ``lakeformat write``.

Then ONE oracle call (one Spark session) has Java read both tables' rows, live files with their partition
values, ``SHOW CREATE TABLE`` (columns, types and partition transforms) and format versions.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table as PyIcebergTable

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from tests.support.java_iceberg import JDBC_CATALOG, run_oracle_batch
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCHEMA = [
    {"name": "id", "type": "BIGINT NOT NULL"},
    {"name": "region", "type": "STRING"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
    {"name": "amount", "type": "DECIMAL(10, 2)"},
    {"name": "code", "type": "BINARY(2)"},
    {"name": "small", "type": "SMALLINT"},
    {"name": "ok", "type": "BOOLEAN"},
]
ROWS = [
    {"id": 1, "region": "eu", "ts": dt.datetime(2024, 1, 1, 8), "amount": decimal.Decimal("1.50"),
     "code": b"\x00\x01", "small": 7, "ok": True},
    {"id": 2, "region": "eu", "ts": dt.datetime(2024, 1, 1, 9), "amount": decimal.Decimal("-2.25"),
     "code": b"ab", "small": -3, "ok": False},
    {"id": 3, "region": "us", "ts": dt.datetime(2024, 1, 2, 23, 59, 59, 123456), "amount": None,
     "code": None, "small": None, "ok": None},
]  # fmt: skip


def java_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row in the oracle's normalised JSON form (decimal -> str, timestamp -> ISO, binary -> hex)."""
    return {
        **row,
        "ts": row["ts"].isoformat(),
        "amount": None if row["amount"] is None else str(row["amount"]),
        "code": None if row["code"] is None else row["code"].hex(),
    }


def parquet(table: PyIcebergTable, rows: list[dict[str, Any]], path: Path) -> Path:
    """Rows as a Parquet file of exactly the table's types."""
    pq.write_table(
        pa.Table.from_pylist(rows, schema=schema_to_pyarrow(table.schema(), include_field_ids=False)), path
    )
    return path


def test_java_reads_the_rows_and_partition_specs_of_tables_our_cli_created(tmp_path: Path) -> None:
    warehouse, catalog_db = tmp_path / "warehouse", tmp_path / "catalog.db"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA), encoding="utf-8")
    jdbc = [
        f"--catalog={JDBC_CATALOG}",
        "--catalog-property=type=sql",
        f"--catalog-property=uri=sqlite:///{catalog_db}",
        f"--catalog-property=warehouse={warehouse.as_uri()}",
    ]
    hadoop_root = warehouse / "hns" / "plain"

    code, _, err = run(
        "create-table", "jns.events", "--schema", str(schema), *jdbc,
        "--partition-keys", "region,days(ts)", "--primary-keys", "id", "--option", "lakeformat.test=created",
    )  # fmt: skip
    assert code == 0, err
    code, _, err = run(
        "create-table", str(hadoop_root), "--format", "iceberg", "--schema", str(schema),
        "--partition-keys", "region", "--option", "format-version=1",
    )  # fmt: skip
    assert code == 0, err

    events = open_catalog_table(
        "jns.events",
        JDBC_CATALOG,
        {"type": "sql", "uri": f"sqlite:///{catalog_db}", "warehouse": warehouse.as_uri()},
    ).table
    for name, rows in (("eu-day1", ROWS[:2]), ("us-day2", ROWS[2:])):
        code, _, err = run(
            "commit", "jns.events", "--add", str(parquet(events, rows, tmp_path / f"{name}.parquet")), *jdbc
        )
        assert code == 0, err
    plain = open_path_table(str(hadoop_root)).table
    code, _, err = run(
        "write", str(hadoop_root), "--from", str(parquet(plain, ROWS, tmp_path / "rows.parquet"))
    )
    assert code == 0, err

    java_tables = (f"{JDBC_CATALOG}.jns.events", "hc.hns.plain")
    ours = {"events": events.refresh().metadata, "plain": open_path_table(str(hadoop_root)).metadata}
    results = run_oracle_batch(
        [
            *(["rows", "--table", table] for table in java_tables),
            *(["files", "--table", table, "--source", "java"] for table in java_tables),
            *(["snapshots", "--table", table] for table in java_tables),
            ["sql", *(a for table in java_tables for a in ("--statement", f"SHOW CREATE TABLE {table}"))],
        ],
        warehouse=warehouse,
        catalog_db=catalog_db,
    )
    rows, files, snapshots, (events_ddl, plain_ddl) = results[0:2], results[2:4], results[4:6], results[6]

    expected_rows = sorted((java_row(r) for r in ROWS), key=lambda r: r["id"])
    for java_rows in rows:
        assert sorted(java_rows, key=lambda r: r["id"]) == expected_rows
    assert [(f["partition"], f["record_count"], f["spec_id"]) for f in files[0]] == [
        ({"region": "eu", "ts_day": "2024-01-01"}, 2, 0),
        ({"region": "us", "ts_day": "2024-01-02"}, 1, 0),
    ]
    assert sorted((f["partition"]["region"], f["record_count"]) for f in files[1]) == [("eu", 2), ("us", 1)]
    assert all(set(f["partition"]) == {"region"} for f in files[1])
    for java, metadata in zip(snapshots, (ours["events"], ours["plain"]), strict=True):
        assert (java["format_version"], java["current_snapshot_id"]) == (
            metadata.format_version,
            metadata.current_snapshot_id,
        )
    assert [s["format_version"] for s in snapshots] == [2, 1]
    assert snapshots[0]["properties"]["lakeformat.test"] == "created"

    columns = "id BIGINT NOT NULL,\n  region STRING,\n  ts TIMESTAMP_NTZ,\n  amount DECIMAL(10,2),\n  code BINARY,\n"
    events_stmt, plain_stmt = events_ddl[0]["createtab_stmt"], plain_ddl[0]["createtab_stmt"]
    assert columns in events_stmt and columns in plain_stmt
    assert "PARTITIONED BY (region, days(ts))" in events_stmt
    assert "'identifier-fields' = '[id]'" in events_stmt
    assert "PARTITIONED BY (region)\n" in plain_stmt
