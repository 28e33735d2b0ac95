"""Our appends into transform-partitioned Iceberg tables, proven by Java Iceberg 1.10.2 (issue 26, point 9).

Java creates one table whose spec holds every transform, several on one column as Java allows:
``days(ts)``, ``hours(tstz)``, ``months(d)``, ``years(ts2)``, ``bucket[7](s)``, ``bucket[5](id)``,
``bucket[3](dec)``, ``bucket[4](d)``, ``truncate[2](s)``, ``truncate[10](i)``, ``truncate[50](dec)``. We
append rows with ``lakeformat write`` (nulls in every column, timestamps and dates before 1970 down to the
microsecond before the epoch, negative ints and decimals, multi-byte strings, rows sharing a partition).
Then, in one Spark session of Java's:

* every row read back through Java, with ``_file`` and ``_partition``, lies in a file whose partition in
  Java's ``files`` metadata table, and its ``_partition``, equal Java's own transforms of the row
  (``hc.system.days(ts)``, ``hc.system.bucket(7, s)``, ...);
* every row is found by a query whose predicate names all its partitioned columns (``ts <=> TIMESTAMP_NTZ
  '...' AND s <=> '...' ...``): Java prunes files by projecting that predicate onto our partition values, so
  a wrong value would hide the row;
* Java reads exactly the rows we wrote.

One table and one append serve every check (the CI budget); the oracle is the shared server.
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

from tests.support.java_iceberg import run_oracle
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SPEC = {  # Spark's partition field name -> (Spark's transform, Java's function over the row)
    "ts_day": ("days(ts)", "hc.system.days(ts)"),
    "tstz_hour": ("hours(tstz)", "hc.system.hours(tstz)"),
    "d_month": ("months(d)", "hc.system.months(d)"),
    "ts2_year": ("years(ts2)", "hc.system.years(ts2)"),
    "s_bucket": ("bucket(7, s)", "hc.system.bucket(7, s)"),
    "id_bucket": ("bucket(5, id)", "hc.system.bucket(5, id)"),
    "dec_bucket": ("bucket(3, dec)", "hc.system.bucket(3, dec)"),
    "d_bucket": ("bucket(4, d)", "hc.system.bucket(4, d)"),
    "s_trunc": ("truncate(2, s)", "hc.system.truncate(2, s)"),
    "i_trunc": ("truncate(10, i)", "hc.system.truncate(10, i)"),
    "dec_trunc": ("truncate(50, dec)", "hc.system.truncate(50, dec)"),
}
COLUMNS = "id BIGINT, ts TIMESTAMP_NTZ, tstz TIMESTAMP, d DATE, s STRING, dec DECIMAL(10, 2), i INT, ts2 TIMESTAMP_NTZ"
UTC = dt.timezone.utc
EPOCH_MINUS_1US = dt.datetime(1969, 12, 31, 23, 59, 59, 999999)


def _rows() -> list[dict[str, Any]]:
    def row(i: int, ts: Any, tstz: Any, d: Any, s: Any, dec: Any, n: Any, ts2: Any) -> dict[str, Any]:
        value = decimal.Decimal(dec) if dec is not None else None
        return {"id": i, "ts": ts, "tstz": tstz, "d": d, "s": s, "dec": value, "i": n, "ts2": ts2}

    return [
        row(1, EPOCH_MINUS_1US, EPOCH_MINUS_1US.replace(tzinfo=UTC), dt.date(1969, 12, 31), "héllo", "-1.05", -1,
            EPOCH_MINUS_1US),
        row(2, dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 1, tzinfo=UTC), dt.date(1970, 1, 1), "", "0.00", 0,
            dt.datetime(1970, 1, 1)),
        row(3, dt.datetime(1900, 3, 1, 12, 30), dt.datetime(1900, 3, 1, 0, 59, 59, tzinfo=UTC),
            dt.date(1900, 2, 28), "日本語テキスト", "-99999999.49", -2147483648, dt.datetime(1, 1, 1)),
        row(4, dt.datetime(2024, 5, 1, 10, 0, 0, 1), dt.datetime(2024, 5, 1, 10, 59, tzinfo=UTC),
            dt.date(2024, 2, 29), "iceberg", "12.34", 25, dt.datetime(2024, 12, 31, 23, 59, 59)),
        row(5, dt.datetime(2024, 5, 1, 23), dt.datetime(2024, 5, 1, 10, tzinfo=UTC), dt.date(2024, 2, 1),
            "ic", "12.49", 29, dt.datetime(2024, 1, 1)),  # same day, hour, month, truncates as row 4
        row(6, None, None, None, None, None, None, None),
        row(-7, None, dt.datetime(1969, 12, 31, 23, tzinfo=UTC), None, "a", "-0.01", -10, None),
        row(9_223_372_036_854_775_807, dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None,
            dt.date(9999, 12, 31), "\U0001f600x", "99999999.99", 2147483647, dt.datetime(9999, 1, 1)),
    ]  # fmt: skip


def _literal(column: str, value: Any) -> str:
    if value is None:
        return "NULL"
    if column in ("ts", "ts2"):
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ')}'"
    if column == "tstz":
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat(sep=' ')}'"
    if column == "d":
        return f"DATE '{value.isoformat()}'"
    if column == "dec":
        return f"CAST('{value}' AS DECIMAL(10, 2))"
    if column == "s":
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _normalised(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the oracle's JSON form (naive ISO timestamps in UTC, decimals as strings)."""

    def one(value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return (
                value.astimezone(UTC).replace(tzinfo=None).isoformat() if value.tzinfo else value.isoformat()
            )
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, decimal.Decimal):
            return str(value)
        return value

    return {key: one(value) for key, value in row.items()}


def test_appends_land_in_javas_partitions_for_every_transform(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    table = "hc.db.transforms"
    partitioned_by = ", ".join(spark for spark, _ in SPEC.values())
    run_oracle(
        "sql",
        "--statement",
        "CREATE NAMESPACE IF NOT EXISTS hc.db",
        "--statement",
        f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY ({partitioned_by}) "
        "TBLPROPERTIES ('format-version' = '2')",
        warehouse=warehouse,
    )
    path = warehouse / "db" / "transforms"
    rows = _rows()
    arrow = pa.Table.from_pylist(
        rows,
        schema=pa.schema([
            ("id", pa.int64()), ("ts", pa.timestamp("us")), ("tstz", pa.timestamp("us", tz="UTC")),
            ("d", pa.date32()), ("s", pa.string()), ("dec", pa.decimal128(10, 2)), ("i", pa.int32()),
            ("ts2", pa.timestamp("us")),
        ]),
    )  # fmt: skip
    source = tmp_path / "rows.parquet"
    pq.write_table(arrow, source)
    code, out, err = run("write", str(path), "--from", str(source), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["rowsAdded"] == len(rows) and document["commitKind"] == "APPEND"
    # rows 4 and 5 share no file: they differ in bucket(5, id); each other row is its own partition
    assert document["filesAdded"] == len(rows)

    expected = ", ".join(f"'{name}', {java}" for name, (_, java) in SPEC.items())
    check = (
        f"SELECT r.id, r._partition AS row_partition, f.partition AS file_partition, "
        f"named_struct({expected}) AS java_partition "
        f"FROM (SELECT _file, _partition, * FROM {table}) r JOIN {table}.files f ON r._file = f.file_path"
    )
    probes = [
        f"SELECT id FROM {table} WHERE "
        + " AND ".join(
            f"{column} <=> {_literal(column, value)}" for column, value in row.items() if column != "id"
        )
        for row in rows
    ]
    statements = [check, f"SELECT * FROM {table}", *probes]
    results = run_oracle("sql", *(arg for s in statements for arg in ("--statement", s)), warehouse=warehouse)
    placed, read, found = results[0], results[1], results[2:]

    assert sorted(r["id"] for r in placed) == sorted(r["id"] for r in rows)
    for one in placed:
        assert one["file_partition"] == one["java_partition"], one
        assert one["row_partition"] == one["java_partition"], one
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(read, key=key) == sorted((_normalised(r) for r in rows), key=key)
    for row, hits in zip(rows, found, strict=True):
        assert [hit["id"] for hit in hits] == [row["id"]], (row, hits)
