"""core/sources: input files read with the table's types, nothing inferred; bad values refused with their row.

Each refusal is checked for its type (``SourceValueError`` / ``RegisterError``), the file, the row (or line)
and the column it names; each acceptance for the exact value stored.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.sources import (
    SourceValueError,
    WriteSchema,
    csv_text,
    iter_source_batches,
    read_source,
)

UTC = dt.timezone.utc


def schema(*fields: tuple[str, pa.DataType] | pa.Field) -> WriteSchema:
    arrow = pa.schema([f if isinstance(f, pa.Field) else pa.field(*f) for f in fields])
    return WriteSchema(arrow, {})


def read_csv(tmp_path: Path, text: str, target: WriteSchema) -> pa.Table:
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8")
    return read_source(str(path), target)


def read_jsonl(tmp_path: Path, lines: list[str], target: WriteSchema) -> pa.Table:
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_source(str(path), target)


STRINGS = schema(("s", pa.string()), ("n", pa.int64()))


def test_csv_strings_are_stored_exactly_as_written(tmp_path: Path) -> None:
    text = 's,n\n2026-11-29,1\n007,2\nNULL,3\nNA,4\n" x ",5\nnaïve 日本,6\n"a,b ""q""\nline",7\n"",8\n,9\n'
    table = read_csv(tmp_path, text, STRINGS)
    assert table.schema == STRINGS.arrow
    assert table.column("s").to_pylist() == [
        "2026-11-29", "007", "NULL", "NA", " x ", "naïve 日本", 'a,b "q"\nline', "", None,
    ]  # fmt: skip
    assert table.column("n").to_pylist() == list(range(1, 10))


def test_csv_numbers_dates_and_times_are_parsed_as_their_column(tmp_path: Path) -> None:
    target = schema(
        ("i", pa.int8()), ("f", pa.float32()), ("d", pa.float64()), ("m", pa.decimal128(6, 2)),
        ("b", pa.bool_()), ("day", pa.date32()), ("t", pa.time32("ms")), ("ts", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")), ("bin", pa.binary()),
    )  # fmt: skip
    raw = base64.b64encode(b"\x00\xff").decode()
    text = (
        "i,f,d,m,b,day,t,ts,tz,bin\n"
        f"007,0.1,-0.5e-3,1.5,TRUE,2026-11-29,10:00:00.123,2026-11-29T10:00:00.000001,2026-11-29T10:00:00+02:00,{raw}\n"
        ",,NaN,-0.10,0,0001-01-01,23:59,2026-11-29 10:00,2026-11-29 10:00:00,\n"
    )
    rows = read_csv(tmp_path, text, target).to_pylist()
    assert rows[0]["i"] == 7 and rows[0]["f"] == pa.scalar(0.1, pa.float32()).as_py()
    assert rows[0]["d"] == -0.0005 and rows[0]["m"] == decimal.Decimal("1.50") and rows[0]["b"] is True
    assert rows[0]["day"] == dt.date(2026, 11, 29) and rows[0]["t"] == dt.time(10, 0, 0, 123000)
    assert rows[0]["ts"] == dt.datetime(2026, 11, 29, 10, 0, 0, 1)
    assert rows[0]["tz"] == dt.datetime(2026, 11, 29, 8, 0, tzinfo=UTC)  # the offset applied
    assert rows[0]["bin"] == b"\x00\xff"
    assert rows[1]["i"] is None and rows[1]["f"] is None and rows[1]["bin"] is None
    assert rows[1]["m"] == decimal.Decimal("-0.10") and rows[1]["t"] == dt.time(23, 59)
    assert rows[1]["tz"] == dt.datetime(2026, 11, 29, 10, 0, tzinfo=UTC)  # no offset: taken as UTC


@pytest.mark.parametrize(
    ("column", "arrow_type", "value", "reason"),
    [
        ("i", pa.int32(), " 7", "is not a valid"),
        ("i", pa.int32(), "1e3", "is not a valid"),
        ("i", pa.int32(), "2.5", "is not a valid"),
        ("i", pa.int8(), "300", "is not a valid"),
        ("i", pa.int32(), '""', "is not a valid"),  # the empty string is a value, not NULL
        ("d", pa.float64(), "1e400", "out of the range"),
        ("f", pa.float32(), "1e39", "out of the range"),
        ("m", pa.decimal128(6, 2), "1.234", "would cause data loss"),
        ("m", pa.decimal128(6, 2), "12345.6", "precision"),
        ("b", pa.bool_(), "yes", "is not a valid"),
        ("day", pa.date32(), "2026-2-3", "is not a valid"),
        ("ts", pa.timestamp("us"), "2026-11-29T10:00:00Z", "has a zone offset"),
        ("ts", pa.timestamp("ms"), "2026-11-29T10:00:00.1234", "is not a valid"),
        ("t", pa.time32("ms"), "24:00", "not a time of day"),
        ("t", pa.time32("ms"), "10:00:00.0001", "fraction digits"),
        ("bin", pa.binary(), "not base64!", "is not a valid"),
        ("fix", pa.binary(2), base64.b64encode(b"abc").decode(), "exactly 2"),
    ],
)
def test_a_csv_value_that_does_not_fit_names_file_row_and_column(
    tmp_path: Path, column: str, arrow_type: pa.DataType, value: str, reason: str
) -> None:
    target = WriteSchema(pa.schema([("id", pa.int32()), (column, arrow_type)]), {column: "TYPE"})
    path = tmp_path / "bad.csv"
    path.write_text(f"id,{column}\n1,\n2,\n3,{value}\n4,\n", encoding="utf-8")
    with pytest.raises(SourceValueError) as info:
        read_source(str(path), target)
    assert (info.value.row, info.value.column) == (3, column)
    message = str(info.value)
    assert message.startswith(f"{path}: row 3, column {column!r}: ") and reason in message
    assert "\n" not in message


def test_csv_row_numbers_count_across_streamed_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(csv_text, "BLOCK_BYTES", 64)  # many small batches
    path = tmp_path / "big.csv"
    path.write_text("n\n" + "".join(f"{i}\n" for i in range(1, 200)) + "x\n", encoding="utf-8")
    target = schema(("n", pa.int32()))
    batches = iter_source_batches(str(path), target)
    seen = 0
    with pytest.raises(SourceValueError) as info:
        for batch in batches:
            seen += batch.num_rows
    assert seen > 0 and info.value.row == 200  # the 200th data row, found in a later batch


def test_columns_the_table_lacks_and_missing_not_null_columns_are_refused(tmp_path: Path) -> None:
    target = schema(pa.field("id", pa.int32(), nullable=False), ("s", pa.string()))
    with pytest.raises(RegisterError, match=r"\['zz'\] are not in the table"):
        read_csv(tmp_path, "id,zz\n1,2\n", target)
    with pytest.raises(RegisterError, match="NOT NULL column 'id' is missing"):
        read_csv(tmp_path, "s\nx\n", target)
    with pytest.raises(SourceValueError, match=r"row 2, column 'id'.*NOT NULL"):
        read_csv(tmp_path, "id,s\n1,x\n,y\n", target)
    assert read_csv(tmp_path, "id\n5\n", target).column("s").to_pylist() == [None]  # nullable: NULL


def test_json_lines_keep_strings_and_number_text_exact(tmp_path: Path) -> None:
    target = schema(
        ("s", pa.string()), ("m", pa.decimal128(4, 2)), ("i", pa.int64()), ("d", pa.float64()),
        ("b", pa.bool_()), ("day", pa.date32()),
    )  # fmt: skip
    lines = [
        json.dumps({"s": "2026-11-29", "m": 0, "i": 7, "d": 0.1, "b": True, "day": "2026-11-29"}),
        '{"s": "007", "m": 0.10, "i": "8", "d": 1e-3, "b": "false"}',
        "",
        '{"s": "", "m": "-0.5", "i": null, "d": NaN, "b": null, "day": null}',
    ]
    rows = read_jsonl(tmp_path, lines, target).to_pylist()
    assert [r["s"] for r in rows] == ["2026-11-29", "007", ""]
    assert [r["m"] for r in rows] == [
        decimal.Decimal("0.00"),
        decimal.Decimal("0.10"),
        decimal.Decimal("-0.50"),
    ]
    assert [r["i"] for r in rows] == [7, 8, None] and rows[1]["d"] == 0.001
    assert [r["b"] for r in rows] == [True, False, None] and rows[0]["day"] == dt.date(2026, 11, 29)
    assert rows[2]["d"] != rows[2]["d"]  # NaN


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"s": 7}', "a number (7) cannot be stored in STRING (write it as a JSON string)"),
        ('{"s": true}', "a boolean (true) cannot be stored in STRING"),
        ('{"s": ["a"]}', "an array"),
        ('{"n": 1.5}', "'1.5' is not a valid"),
        ('{"n": 1e2}', "'1e2' is not a valid"),
        ('{"n": false}', "a boolean"),
        ('{"day": 20261129}', "a number (20261129) cannot be stored"),
        ("[1, 2]", "must be an object"),
        ('{"s": "x",}', "not valid JSON"),
    ],
)
def test_a_json_value_that_does_not_fit_names_file_line_and_column(
    tmp_path: Path, line: str, problem: str
) -> None:
    target = WriteSchema(
        pa.schema([("s", pa.string()), ("n", pa.int32()), ("day", pa.date32())]), {"s": "STRING", "n": "INT"}
    )
    path = tmp_path / "bad.jsonl"
    path.write_text('{"s": "ok", "n": 1}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(SourceValueError) as info:
        read_source(str(path), target)
    assert info.value.row == 3 and str(info.value).startswith(f"{path}: line 3")
    assert problem in str(info.value)


def test_parquet_types_convert_only_where_no_value_changes(tmp_path: Path) -> None:
    target = WriteSchema(
        pa.schema(
            [("big", pa.int64()), ("small", pa.int32()), ("m", pa.decimal128(10, 2)), ("s", pa.string())]
        ),
        {"big": "BIGINT", "small": "INT", "m": "DECIMAL(10, 2)", "s": "STRING"},
    )
    path = tmp_path / "in.parquet"
    words = pa.array(["a", "b"]).dictionary_encode()
    pq.write_table(
        pa.table({
            "big": pa.array([1, 2], pa.int32()),  # widening by type
            "small": pa.array([5, -5], pa.int64()),  # narrowing, every value checked
            "m": pa.array([decimal.Decimal("1.5"), None], pa.decimal128(3, 1)),
            "s": words,
        }),
        path,
    )  # fmt: skip
    table = read_source(str(path), target)
    assert table.schema == target.arrow
    assert table.to_pylist() == [
        {"big": 1, "small": 5, "m": decimal.Decimal("1.50"), "s": "a"},
        {"big": 2, "small": -5, "m": None, "s": "b"},
    ]


@pytest.mark.parametrize(
    ("values", "arrow_type", "table_type", "message"),
    [
        ([1, 2**40], pa.int64(), pa.int32(), r"row 2, column 'c': 1099511627776 \(int64\) cannot be cast"),
        ([0.1], pa.float64(), pa.float32(), "is double in the input and FLOAT in the table"),
        ([1.0], pa.float64(), pa.int32(), "is double in the input"),
        (["2026-11-29"], pa.string(), pa.date32(), "is string in the input"),
        (["7"], pa.string(), pa.int32(), "is string in the input"),
        ([dt.datetime(2026, 1, 1)], pa.timestamp("us"), pa.timestamp("us", tz="UTC"), "is timestamp"),
        ([1, 2], pa.timestamp("ns"), pa.timestamp("us"), r"row 1, column 'c'"),
        ([decimal.Decimal("1.234")], pa.decimal128(5, 3), pa.decimal128(5, 2), "row 1, column 'c'"),
    ],
)
def test_parquet_types_that_could_change_values_are_refused(
    tmp_path: Path, values: list[object], arrow_type: pa.DataType, table_type: pa.DataType, message: str
) -> None:
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"c": pa.array(values, arrow_type)}), path)
    target = WriteSchema(pa.schema([("c", table_type)]), {"c": "FLOAT" if table_type == pa.float32() else ""})
    with pytest.raises(RegisterError, match=message) as info:
        read_source(str(path), target)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)
