"""Property test: rows written through every input format are read back exactly by the peers (issue 23).

Hypothesis draws rows of every type both formats hold (strings that look like dates or numbers, leading
zeros, empty strings, blanks, non-ASCII, NULLs; every integer width, FLOAT and DOUBLE, DECIMAL, DATE,
TIMESTAMP of two precisions, instants given with zone offsets, TIME, BOOLEAN, bytes). Each example is
written as CSV, as JSON lines and as Parquet (tagged by ``src`` and the example number ``ex``) with
``lakeformat write --from`` into one Paimon table and one Iceberg table (Hadoop layout), both made by
``lakeformat create-table`` and partitioned by the STRING column ``dt``. The issue's own two commands go
into two more tables. Then, in one process each:

* pypaimon 2.1 reads the Paimon tables, every row with the partition of the split it came from;
* Java Iceberg 1.10.2 (Spark 3.5) reads the Iceberg tables with their ``_partition`` metadata column;

and every row must equal the input exactly, in the partition of its own ``dt``. Iceberg's ``time`` type is
left out of the Iceberg table: Spark 3.5 cannot read it (Paimon's TIME is checked through pypaimon).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_lakeformat.core.tables import open_table
from tests.support.java_iceberg import run_oracle
from tests.support.pypaimon import run_oracle_batch as run_pypaimon_batch
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

COLUMNS = [
    ("ex", "INT"), ("src", "STRING"), ("dt", "STRING"), ("code", "STRING"), ("i8", "TINYINT"),
    ("i16", "SMALLINT"), ("i32", "INT"), ("i64", "BIGINT"), ("f32", "FLOAT"), ("f64", "DOUBLE"),
    ("dec", "DECIMAL(12, 3)"), ("d", "DATE"), ("ts", "TIMESTAMP(6)"), ("ts3", "TIMESTAMP(3)"),
    ("tsl", "TIMESTAMP(6) WITH LOCAL TIME ZONE"), ("t", "TIME"), ("b", "BOOLEAN"), ("bin", "BYTES"),
]  # fmt: skip
ICEBERG_LEFT_OUT = {"t"}
TRICKY = [
    "2026-11-29", "2026-11-29 00:00:00", "007", "0", "-0", "1e3", "", " ", " x ", "NULL", "NA", "nan",
    "true", "日本語", "naïve", "a,b", '"q"', "line\nbreak", "%2F/=", "\t",
]  # fmt: skip
MINUTE = dt.timedelta(minutes=1)
# Examples per run (each: 6 writes; the peers' reads are one process each, whatever the count). A longer
# search: LAKEFORMAT_TYPED_WRITE_EXAMPLES=200 .venv/bin/python -m pytest tests/interop/test_typed_writes_interop.py
EXAMPLES = int(os.environ.get("LAKEFORMAT_TYPED_WRITE_EXAMPLES", "12"))


def _text(partition: bool) -> st.SearchStrategy[str | None]:
    alphabet = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc") if partition else ("Cs",))
    return st.none() | st.sampled_from(TRICKY) | st.text(alphabet, max_size=8)


def _ints(bits: int) -> st.SearchStrategy[int | None]:
    return st.none() | st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


DAYS = {"min_value": dt.datetime(1900, 1, 1), "max_value": dt.datetime(2100, 12, 31)}
ROW = st.fixed_dictionaries({
    "dt": _text(partition=True),
    "code": _text(partition=False),
    "i8": _ints(8), "i16": _ints(16), "i32": _ints(32), "i64": _ints(64),
    "f32": st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
    "f64": st.none() | st.floats(allow_nan=False, allow_infinity=False),
    "dec": st.none() | st.decimals(-(10**9) + 1, 10**9 - 1, places=3),
    "d": st.none() | st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31)),
    "ts": st.none() | st.datetimes(**DAYS),
    "ts3": st.none() | st.datetimes(**DAYS).map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000)),
    "tsl": st.none() | st.tuples(st.datetimes(**DAYS), st.integers(-14 * 60, 14 * 60)),
    "t": st.none() | st.times().map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000)),
    "b": st.none() | st.booleans(),
    "bin": st.none() | st.binary(max_size=6),
})  # fmt: skip


def create(root: Path, table_format: str, columns: list[tuple[str, str]]) -> str:
    schema = root.parent / f"{root.name}.schema.json"
    schema.parent.mkdir(parents=True, exist_ok=True)
    schema.write_text(json.dumps([{"name": n, "type": t} for n, t in columns]))
    code, _, err = run(
        "create-table", str(root), "--format", table_format, "--schema", str(schema), "--partition-keys", "dt"
    )
    assert code == 0, err
    return str(root)


# -- one row as each input format writes it --------------------------------------------------------


def _instant(value: tuple[dt.datetime, int]) -> dt.datetime:
    """A UTC wall-clock time written with an offset of ``minutes``: the same instant."""
    utc, minutes = value
    return (utc + minutes * MINUTE).replace(tzinfo=dt.timezone(minutes * MINUTE))


def as_text(name: str, value: Any) -> str:
    """A non-null value as CSV and JSON strings write it (numbers' text is also the JSON token)."""
    if name == "tsl":
        return _instant(value).isoformat()
    if name == "bin":
        return base64.b64encode(value).decode()
    if name == "b":
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def csv_text(rows: list[dict[str, Any]], names: list[str]) -> str:
    def field(name: str, value: Any) -> str:
        if value is None:
            return ""  # unquoted empty: NULL
        text = as_text(name, value)  # strings always quoted, other values when empty (b"" is "")
        return '"' + text.replace('"', '""') + '"' if isinstance(value, str) or not text else text

    lines = [",".join(names)] + [",".join(field(n, row[n]) for n in names) for row in rows]
    return "\n".join(lines) + "\n"


def jsonl_text(rows: list[dict[str, Any]], names: list[str]) -> str:
    def token(name: str, value: Any) -> str:
        if value is None:
            return "null"
        if isinstance(value, (bool, str)):
            return json.dumps(value)
        if isinstance(value, (int, float, decimal.Decimal)):
            return as_text(name, value)  # a JSON number, written as its text
        return json.dumps(as_text(name, value))

    return "".join("{" + ", ".join(f'"{n}": {token(n, row[n])}' for n in names) + "}\n" for row in rows)


def parquet_table(rows: list[dict[str, Any]], names: list[str], arrow: pa.Schema) -> pa.Table:
    def value(name: str, item: Any) -> Any:
        return _instant(item) if name == "tsl" and item is not None else item

    return pa.table({n: pa.array([value(n, r[n]) for r in rows], arrow.field(n).type) for n in names})


# -- what a peer must read ---------------------------------------------------------------------------


def expected(row: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """A row as the oracles normalise values (their module docstrings), with its partition."""
    out: dict[str, Any] = {}
    for name in names:
        value = row[name]
        if value is None or isinstance(value, (bool, int, float, str)):
            out[name] = value
        elif name == "tsl":
            out[name] = value[0].isoformat()
        elif name == "dec":
            out[name] = str(value.quantize(decimal.Decimal("0.001")))
        elif name == "bin":
            out[name] = value.hex()
        else:
            out[name] = value.isoformat()
    out["_partition"] = {"dt": row["dt"]}
    return out


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    def fix(row: dict[str, Any]) -> dict[str, Any]:
        if row.get("dec") is not None:  # Java's BigDecimal text and pypaimon's agree by value
            row = {**row, "dec": str(decimal.Decimal(row["dec"]).quantize(decimal.Decimal("0.001")))}
        return row

    return sorted(json.dumps(fix(r), sort_keys=True, ensure_ascii=False) for r in rows)


def assert_same_rows(peer: str, read: list[dict[str, Any]], wrote: list[dict[str, Any]]) -> None:
    """Equal as multisets; on a difference, the rows only one side has (first few), not a 500-row dump."""
    got, want = Counter(canonical(read)), Counter(canonical(wrote))
    missing, extra = list((want - got).elements())[:4], list((got - want).elements())[:4]
    assert not missing and not extra, (
        f"{peer} read differs:\nexpected, not read: {missing}\nread, not expected: {extra}"
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("typed")
    iceberg_columns = [c for c in COLUMNS if c[0] not in ICEBERG_LEFT_OUT]
    return {
        "base": base,
        "paimon": create(base / "paimon" / "db.db" / "typed", "paimon", COLUMNS),
        "iceberg": create(base / "iceberg" / "db" / "typed", "iceberg", iceberg_columns),
        "paimon_names": [n for n, _ in COLUMNS],
        "iceberg_names": [n for n, _ in iceberg_columns],
    }


def test_rows_of_every_type_through_every_input_format_are_read_back_exactly(tables: dict[str, Any]) -> None:
    base: Path = tables["base"]
    written: dict[str, list[dict[str, Any]]] = {"paimon": [], "iceberg": []}
    arrow = {f: open_table(tables[f]).write_schema().arrow for f in ("paimon", "iceberg")}
    examples = iter(range(1_000_000))

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(ROW, min_size=1, max_size=5))
    def write_example(rows: list[dict[str, Any]]) -> None:
        ex = next(examples)
        for table_format in ("paimon", "iceberg"):
            names = tables[f"{table_format}_names"]
            for src in ("csv", "jsonl", "parquet"):
                tagged = [{**row, "ex": ex, "src": src} for row in rows]
                source = base / "inputs" / f"{table_format}-{ex}.{src}"
                source.parent.mkdir(exist_ok=True)
                if src == "csv":
                    source.write_text(csv_text(tagged, names), encoding="utf-8")
                elif src == "jsonl":
                    source.write_text(jsonl_text(tagged, names), encoding="utf-8")
                else:
                    pq.write_table(parquet_table(tagged, names, arrow[table_format]), source)
                code, _, err = run("write", tables[table_format], "--from", str(source))
                assert code == 0, f"{source}: {err}"
                written[table_format] += [expected(row, names) for row in tagged]

    write_example()
    assert len(written["paimon"]) == len(written["iceberg"]) > 0

    # The issue's two commands, on a table of each format.
    issue_files = base / "issue"
    issue_files.mkdir()
    (issue_files / "r.jsonl").write_text('{"dt":"2026-11-29","id":1,"code":"007"}\n')
    (issue_files / "r.csv").write_text("dt,id,code\n2026-11-30,2,007\n")
    issue_columns = [("dt", "STRING"), ("id", "INT"), ("code", "STRING")]
    issue_tables = {
        "paimon": create(base / "paimon" / "db.db" / "issue", "paimon", issue_columns),
        "iceberg": create(base / "iceberg" / "db" / "issue", "iceberg", issue_columns),
    }
    for root in issue_tables.values():
        for name in ("r.jsonl", "r.csv"):
            assert run("write", root, "--from", str(issue_files / name))[0] == 0
    issue_rows = [
        {"dt": "2026-11-29", "id": 1, "code": "007", "_partition": {"dt": "2026-11-29"}},
        {"dt": "2026-11-30", "id": 2, "code": "007", "_partition": {"dt": "2026-11-30"}},
    ]

    paimon_typed, paimon_issue = run_pypaimon_batch(
        [["read", tables["paimon"], "--with-partition"], ["read", issue_tables["paimon"], "--with-partition"]]
    )
    java_typed, java_issue = run_oracle(
        "sql",
        "--statement",
        "SELECT _partition, * FROM hc.db.typed",
        "--statement",
        "SELECT _partition, * FROM hc.db.issue",
        warehouse=base / "iceberg",
    )
    assert_same_rows("pypaimon", paimon_typed, written["paimon"])
    assert_same_rows("Java Iceberg", java_typed, written["iceberg"])
    assert canonical(paimon_issue) == canonical(java_issue) == canonical(issue_rows)
