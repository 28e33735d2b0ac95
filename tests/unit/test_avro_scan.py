"""The regex scanner decodes exactly what fastavro decodes, or leaves the record to fastavro."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_lakeformat.core import avro_blocks, avro_scan
from airflow_lakeformat.core.avro_blocks import split_container
from airflow_lakeformat.core.avro_scan import FieldScanner

CODECS = ["null", "deflate", "snappy", "zstandard"]

EVERYTHING: dict[str, Any] = {
    "type": "record",
    "name": "top",
    "namespace": "ns",
    "fields": [
        {"name": "version", "type": "int"},
        {"name": "flag", "type": "boolean"},
        {"name": "big", "type": "long"},
        {"name": "ratio", "type": "float"},
        {"name": "precise", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "name", "type": "string"},
        {"name": "nothing", "type": "null"},
        {"name": "digest", "type": {"type": "fixed", "name": "digest4", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": ["null", {"type": "array", "items": ["null", "long"]}]},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "maybe", "type": ["null", "string"]},
        {
            "name": "inner",
            "type": {
                "type": "record",
                "name": "inner",
                "fields": [
                    {"name": "file", "type": "string"},
                    {"name": "extra", "type": {"type": "array", "items": "string"}},
                    {"name": "level", "type": "int"},
                ],
            },
        },
        {"name": "again", "type": ["null", "inner"]},  # a named reference, nullable
    ],
}
CAPTURES = [
    ("version",), ("flag",), ("big",), ("ratio",), ("precise",), ("blob",), ("name",), ("digest",),
    ("color",), ("tags",), ("counts",), ("attrs",), ("when",), ("maybe",), ("inner", "file"),
    ("inner", "extra"), ("inner", "level"), ("again",),
]  # fmt: skip

text = st.text(max_size=80)
names = st.one_of(
    st.text(max_size=12), st.text(min_size=60, max_size=70), st.text(min_size=1000, max_size=1100)
)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)
inner = st.fixed_dictionaries({"file": names, "extra": st.lists(text, max_size=6), "level": ints})
records = st.fixed_dictionaries(
    {
        "version": st.sampled_from([2, 2, 2, 1]),
        "flag": st.booleans(),
        "big": longs,
        "ratio": st.floats(width=32, allow_nan=False),
        "precise": st.floats(allow_nan=False),
        "blob": st.binary(max_size=90),
        "name": names,
        "nothing": st.none(),
        "digest": st.binary(min_size=4, max_size=4),
        "color": st.sampled_from(["RED", "GREEN", "BLUE"]),
        "tags": st.lists(text, max_size=20),
        "counts": st.none() | st.lists(st.none() | longs, max_size=140),
        "attrs": st.dictionaries(st.text(max_size=10), longs, max_size=5),
        "when": st.none()
        | st.integers(min_value=0, max_value=2**41).map(
            lambda ms: datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(
                microsecond=(ms % 1000) * 1000
            )
        ),
        "maybe": st.none() | names,
        "inner": inner,
        "again": st.none() | inner,
    }
)


def _write(schema: dict[str, Any], rows: list[dict[str, Any]], codec: str, sync_interval: int = 400) -> bytes:
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), rows, codec=codec, sync_interval=sync_interval)
    return buffer.getvalue()


def _scan_all(data: bytes, captures: list[tuple[str, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    container = split_container(data)
    scanner = FieldScanner(container.schema_json, captures, **kwargs)
    result = []
    for count, block in avro_blocks.iter_blocks(container):
        rows, rest = scanner.rows(block, count)
        result += rows + [scanner.row_of(r) for r in rest]
    return result


def _expected(data: bytes, captures: list[tuple[str, ...]]) -> list[tuple[Any, ...]]:
    return [
        tuple(avro_scan.value_at(r, p) for p in captures)  # type: ignore[arg-type]
        for r in fastavro.reader(io.BytesIO(data))
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(records, min_size=0, max_size=12), codec=st.sampled_from(CODECS))
def test_captured_fields_equal_fastavro(rows: list[dict[str, Any]], codec: str) -> None:
    data = _write(EVERYTHING, rows, codec)
    assert _scan_all(data, CAPTURES) == _expected(data, CAPTURES)
    # A constant only decides which records the pattern takes; the values stay fastavro's.
    assert _scan_all(data, CAPTURES, constants={("version",): 2}) == _expected(data, CAPTURES)


def test_the_pattern_takes_the_common_records_and_leaves_the_rest_to_fastavro() -> None:
    base = {
        "version": 2, "flag": True, "big": 7, "ratio": 0.5, "precise": 0.25, "blob": b"x", "name": "n",
        "nothing": None, "digest": b"abcd", "color": "RED", "tags": [], "counts": None, "attrs": {},
        "when": None, "maybe": None, "inner": {"file": "f", "extra": [], "level": 0}, "again": None,
    }  # fmt: skip
    rows = [dict(base, name=f"file-{i}") for i in range(10)]
    rows[4]["name"] = "x" * 500  # beyond tier 0
    rows[7]["version"] = 1  # violates the constant
    data = _write(EVERYTHING, rows, "null", sync_interval=10**6)
    container = split_container(data)
    assert len(container.blocks) == 1
    scanner = FieldScanner(container.schema_json, [("name",)], constants={("version",): 2})
    count, block = next(avro_blocks.iter_blocks(container))
    matched, rest = scanner.rows(block, count)
    assert [r[0] for r in matched] == [f"file-{i}" for i in range(4)]
    assert [r["name"] for r in rest] == ["x" * 500, *(f"file-{i}" for i in range(5, 10))]
    # After enough records went to fastavro, the next tier takes the long name too (not the version).
    scanner.ESCALATE_AFTER = 1
    scanner.rows(block, count)
    assert scanner.tier == 1
    matched, rest = scanner.rows(block, count)
    assert len(matched) == 7 and [r["version"] for r in rest][:1] == [1]


def test_unsupported_schemas_decode_everything_with_fastavro() -> None:
    recursive = {
        "type": "record",
        "name": "node",
        "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "node"]}],
    }
    data = _write(recursive, [{"v": 1, "next": {"v": 2, "next": None}}], "null")
    assert _scan_all(data, [("v",)]) == [(1,)]
    assert avro_scan.record_pattern(split_container(data).schema_json, [("v",)]) is None
    assert avro_scan.record_pattern(json.dumps(EVERYTHING).encode(), [("missing",)]) is None


@pytest.mark.parametrize("cut", [3, 10, 40, -20, -3])
def test_truncated_containers_are_refused(cut: int) -> None:
    data = _write(EVERYTHING["fields"][6:7] and {"type": "record", "name": "r", "fields": [EVERYTHING["fields"][6]]},
                  [{"name": f"n{i}"} for i in range(100)], "deflate")  # fmt: skip
    with pytest.raises((ValueError, IndexError)):
        split_container(data[:cut])
    with pytest.raises(ValueError, match="magic"):
        split_container(b"{not avro}")
