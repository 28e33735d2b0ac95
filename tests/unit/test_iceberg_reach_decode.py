"""The scanned decode of Iceberg manifest lists and manifests equals fastavro's, on every kind of file.

``core/iceberg/reach/reach_decode.py`` reads what reachability needs with the regex scanner and leaves what the
pattern does not express to fastavro. These tests compare it with the reference decode (fastavro over the
whole file) and with the records written: on files pyiceberg and this package write (the scenario tables,
format v1 and v2), and on generated Java-shaped files with every codec, column statistics of up to 40
columns (more items than the scanner's pattern expresses), paths up to 1,500 bytes (longer than it
expresses), deleted entries and nulls. Corrupt files are refused by both with the file named.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fastavro
import pytest

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.reach import reach_decode
from airflow_lakeformat.core.iceberg.reach.reach_decode import (
    ContentRef,
    ManifestRef,
    decode_manifest_list,
    decode_manifest_paths,
    reference_decode_manifest_list,
    reference_decode_manifest_paths,
)

CODECS = ["null", "deflate", "snappy", "zstandard"]


@pytest.fixture(autouse=True)
def scan_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scan from the first record (the module waits for 5,000 records of a schema), with fresh plans."""
    monkeypatch.setattr(reach_decode, "SCAN_AFTER_RECORDS", 0)
    for plans in (reach_decode.LIST_PLANS, reach_decode.MANIFEST_PLANS):
        monkeypatch.setattr(plans, "_cache", {})


def _optional(field_type: Any) -> list[Any]:
    return ["null", field_type]


def _kv(name: str, element_id: int, value_type: str) -> dict[str, Any]:
    return {
        "type": "array",
        "logicalType": "map",
        "items": {
            "type": "record",
            "name": name,
            "fields": [
                {"name": "key", "type": "int", "field-id": element_id},
                {"name": "value", "type": value_type, "field-id": element_id + 1},
            ],
        },
    }


MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "manifest_entry",
    "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": _optional("long"), "default": None, "field-id": 1},
        {"name": "sequence_number", "type": _optional("long"), "default": None, "field-id": 3},
        {"name": "file_sequence_number", "type": _optional("long"), "default": None, "field-id": 4},
        {
            "name": "data_file",
            "field-id": 2,
            "type": {
                "type": "record",
                "name": "r2",
                "fields": [
                    {"name": "content", "type": "int", "field-id": 134},
                    {"name": "file_path", "type": "string", "field-id": 100},
                    {"name": "file_format", "type": "string", "field-id": 101},
                    {
                        "name": "partition",
                        "field-id": 102,
                        "type": {
                            "type": "record",
                            "name": "r102",
                            "fields": [{"name": "cat", "type": _optional("string"), "field-id": 1000}],
                        },
                    },
                    {"name": "record_count", "type": "long", "field-id": 103},
                    {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                    {
                        "name": "column_sizes",
                        "type": _optional(_kv("k117_v118", 117, "long")),
                        "field-id": 108,
                    },
                    {
                        "name": "value_counts",
                        "type": _optional(_kv("k119_v120", 119, "long")),
                        "field-id": 109,
                    },
                    {
                        "name": "lower_bounds",
                        "type": _optional(_kv("k126_v127", 126, "bytes")),
                        "field-id": 125,
                    },
                    {
                        "name": "upper_bounds",
                        "type": _optional(_kv("k129_v130", 129, "bytes")),
                        "field-id": 128,
                    },
                    {"name": "key_metadata", "type": _optional("bytes"), "field-id": 131},
                    {
                        "name": "split_offsets",
                        "type": _optional({"type": "array", "items": "long", "element-id": 133}),
                        "field-id": 132,
                    },
                    {"name": "sort_order_id", "type": _optional("int"), "field-id": 140},
                ],
            },
        },
    ],
}

SUMMARY = {
    "type": "record",
    "name": "r508",
    "fields": [
        {"name": "contains_null", "type": "boolean", "field-id": 509},
        {"name": "contains_nan", "type": _optional("boolean"), "field-id": 518},
        {"name": "lower_bound", "type": _optional("bytes"), "field-id": 510},
        {"name": "upper_bound", "type": _optional("bytes"), "field-id": 511},
    ],
}


def _list_schema(with_content: bool) -> dict[str, Any]:
    fields: list[dict[str, Any]] = [
        {"name": "manifest_path", "type": "string", "field-id": 500},
        {"name": "manifest_length", "type": "long", "field-id": 501},
        {"name": "partition_spec_id", "type": "int", "field-id": 502},
    ]
    if with_content:
        fields += [
            {"name": "content", "type": "int", "field-id": 517},
            {"name": "sequence_number", "type": "long", "field-id": 515},
            {"name": "min_sequence_number", "type": "long", "field-id": 516},
        ]
    fields += [
        {
            "name": "added_snapshot_id",
            "type": _optional("long") if not with_content else "long",
            "field-id": 503,
        },
        {"name": "added_files_count", "type": _optional("int"), "field-id": 504},
        {
            "name": "partitions",
            "type": _optional({"type": "array", "items": SUMMARY, "element-id": 508}),
            "field-id": 507,
        },
        {"name": "key_metadata", "type": _optional("bytes"), "field-id": 519},
    ]
    return {"type": "record", "name": "manifest_file", "fields": fields}


def _path(rng: random.Random, longest: int, odd: float = 0.0) -> str:
    stem = f"s3://bucket/warehouse/db.db/events/data/cat={rng.randrange(50)}/"
    length = rng.randrange(0, max(1, longest - len(stem))) if rng.random() < odd else rng.randrange(0, 200)
    return stem + "x" * length + f"-{rng.randrange(10**9)}.parquet"


def _entry(rng: random.Random, columns: int, longest: int, odd: float = 0.0) -> dict[str, Any]:
    """A manifest entry; with probability ``odd`` each: 149 columns, a bound of up to 90 bytes, a path of up
    to ``longest`` bytes (beyond what the scanner's pattern expresses: those records go to fastavro)."""
    cols = range(1, rng.randrange(0, columns + 1) + 1)
    if rng.random() < odd:
        cols = range(1, 150)
    long_bound = rng.random() < odd

    def bound() -> bytes:  # mostly what Java's truncate(16) leaves, now and then longer
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90 if long_bound else 17)))

    return {
        "status": rng.choice([0, 1, 1, 2]),
        "snapshot_id": rng.choice([None, rng.randrange(2**62)]),
        "sequence_number": rng.choice([None, rng.randrange(10**6)]),
        "file_sequence_number": None,
        "data_file": {
            "content": rng.choice([0, 0, 1, 2]),
            "file_path": _path(rng, longest, odd),
            "file_format": rng.choice(["PARQUET", "AVRO", "ORC", "PUFFIN"]),
            "partition": {"cat": rng.choice([None, "a", "é" * rng.randrange(5)])},
            "record_count": rng.randrange(10**7),
            "file_size_in_bytes": rng.randrange(2**40),
            "column_sizes": [{"key": c, "value": rng.randrange(10**6)} for c in cols] or None,
            "value_counts": [{"key": c, "value": rng.randrange(10**6)} for c in cols],
            "lower_bounds": [{"key": c, "value": bound()} for c in cols],
            "upper_bounds": [{"key": c, "value": bound()} for c in cols] if rng.random() < 0.8 else None,
            "key_metadata": rng.choice([None, b"k" * rng.randrange(20)]),
            "split_offsets": [4 + 1000 * i for i in range(rng.randrange(4))] or None,
            "sort_order_id": rng.choice([None, 0]),
        },
    }


def _manifest_row(rng: random.Random, with_content: bool, longest: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "manifest_path": _path(rng, longest, odd=0.01).replace(".parquet", "-m0.avro"),
        "manifest_length": rng.randrange(10**8),
        "partition_spec_id": rng.randrange(4),
        "added_snapshot_id": rng.randrange(2**62)
        if with_content
        else rng.choice([None, rng.randrange(2**62)]),
        "added_files_count": rng.choice([None, rng.randrange(100)]),
        "partitions": [
            {
                "contains_null": rng.random() < 0.5,
                "contains_nan": rng.choice([None, False]),
                "lower_bound": rng.choice([None, b"a"]),
                "upper_bound": rng.choice([None, b"z" * rng.randrange(30)]),
            }
            for _ in range(rng.randrange(0, 3))
        ]
        or None,
        "key_metadata": None,
    }
    if with_content:
        row.update(content=rng.choice([0, 1]), sequence_number=7, min_sequence_number=3)
    return row


def _avro(
    schema: dict[str, Any], records: list[dict[str, Any]], codec: str, block_records: int = 100
) -> bytes:
    out = io.BytesIO()
    fastavro.writer(
        out, fastavro.parse_schema(schema), records, codec=codec, sync_interval=block_records * 200
    )
    return out.getvalue()


def _scanned_by_pattern(schema: dict[str, Any], data: bytes, plans: Any) -> tuple[int, int]:
    """(records the pattern matched, records fastavro decoded) when ``data`` is decoded once more."""
    import json

    from airflow_lakeformat.core import avro_blocks

    container = avro_blocks.split_container(data)
    scanner = plans.get(container.schema_json).scanner
    assert scanner is not None, "the scanner compiles the schema"
    matched = fell_back = 0
    for count, block in avro_blocks.iter_blocks(container):
        hits, rest = scanner.scan(block, count)
        matched, fell_back = matched + len(hits), fell_back + len(rest)
    assert json.loads(container.schema_json)["name"] == schema["name"]
    return matched, fell_back


@pytest.mark.parametrize("codec", CODECS)
def test_manifests_decode_as_fastavro_decodes_them(codec: str) -> None:
    rng = random.Random(f"manifest-{codec}")
    records = [_entry(rng, columns=40, longest=1500, odd=0.005) for _ in range(1500)]
    data = _avro(MANIFEST_SCHEMA, records, codec)
    expected = [
        ContentRef(
            r["data_file"]["file_path"],
            r["data_file"]["content"],
            r["data_file"]["file_format"].lower(),
            r["data_file"]["file_size_in_bytes"],
        )
        for r in records
        if r["status"] != 2
    ]
    assert reference_decode_manifest_paths(data, "m.avro") == expected
    assert decode_manifest_paths(data, "m.avro") == expected
    matched, fell_back = _scanned_by_pattern(MANIFEST_SCHEMA, data, reach_decode.MANIFEST_PLANS)
    # Both paths ran: most records fit the pattern, the wide and long ones went to fastavro.
    assert matched > 500 and fell_back > 10, (matched, fell_back)


def test_manifests_the_pattern_expresses_are_scanned_whole() -> None:
    rng = random.Random("narrow")
    records = [_entry(rng, columns=6, longest=300) for _ in range(2000)]
    data = _avro(MANIFEST_SCHEMA, records, "deflate")
    assert decode_manifest_paths(data, "m.avro") == reference_decode_manifest_paths(data, "m.avro")
    assert _scanned_by_pattern(MANIFEST_SCHEMA, data, reach_decode.MANIFEST_PLANS) == (2000, 0)


@pytest.mark.parametrize("with_content", [True, False], ids=["v2", "v1"])
@pytest.mark.parametrize("codec", CODECS)
def test_manifest_lists_decode_as_fastavro_decodes_them(codec: str, with_content: bool) -> None:
    rng = random.Random(f"list-{codec}-{with_content}")
    schema = _list_schema(with_content)
    rows = [_manifest_row(rng, with_content, longest=1200) for _ in range(1500)]
    data = _avro(schema, rows, codec)
    expected = [
        ManifestRef(
            r["manifest_path"],
            r["manifest_length"],
            r["partition_spec_id"],
            r.get("content", 0),
            r["added_snapshot_id"],
        )
        for r in rows
    ]
    assert reference_decode_manifest_list(data, "snap.avro") == expected
    assert decode_manifest_list(data, "snap.avro") == expected
    matched, fell_back = _scanned_by_pattern(schema, data, reach_decode.LIST_PLANS)
    assert matched > 500 and fell_back > 0, (matched, fell_back)


def test_a_schema_is_scanned_only_after_enough_records(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach_decode, "SCAN_AFTER_RECORDS", 1000)
    rng = random.Random("threshold")
    data = _avro(MANIFEST_SCHEMA, [_entry(rng, 6, 150) for _ in range(400)], "deflate")
    want = reference_decode_manifest_paths(data, "m.avro")
    plan = reach_decode.MANIFEST_PLANS.get(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"].encode())
    for _ in range(2):  # 400, then 800 records seen: no pattern compiled yet
        assert decode_manifest_paths(data, "m.avro") == want
        assert (plan.compiled, plan.scanner) == (False, None)
    assert decode_manifest_paths(data, "m.avro") == want  # 1,200: compiled, this file scanned
    assert plan.compiled and plan.scanner is not None and plan.records_seen == 1200
    assert _scanned_by_pattern(MANIFEST_SCHEMA, data, reach_decode.MANIFEST_PLANS) == (400, 0)


@pytest.mark.parametrize("kind,version", [("hadoop", 2), ("sql", 1)])
def test_files_pyiceberg_and_this_package_write_decode_alike(kind: str, version: int, tmp_path: Path) -> None:
    from tests.iceberg.scenarios import build

    build(kind, version, tmp_path)
    files = sorted(p for p in tmp_path.rglob("*.avro") if "/metadata/" in str(p))
    lists = manifests = 0
    for path in files:
        data = path.read_bytes()
        if path.name.startswith("snap-"):
            lists += 1
            assert decode_manifest_list(data, str(path)) == reference_decode_manifest_list(data, str(path))
        else:
            manifests += 1
            got = decode_manifest_paths(data, str(path))
            assert got == reference_decode_manifest_paths(data, str(path))
    assert lists >= 5 and manifests >= 5, (lists, manifests)


@pytest.mark.parametrize("cut", ["truncated", "garbage", "not-a-manifest"])
def test_corrupt_files_are_refused_by_both_decodes_naming_the_file(cut: str) -> None:
    rng = random.Random("corrupt")
    data = _avro(MANIFEST_SCHEMA, [_entry(rng, 5, 200) for _ in range(300)], "deflate")
    listing = _avro(_list_schema(True), [_manifest_row(rng, True, 200) for _ in range(50)], "null")
    if cut == "truncated":
        manifest, manifest_list = data[: len(data) * 2 // 3], listing[: len(listing) // 2]
    elif cut == "garbage":
        manifest, manifest_list = data[:60] + b"\x00\xff" * 500, b"garbage"
    else:  # valid Avro files of the other kind
        manifest, manifest_list = listing, data
    for decode in (decode_manifest_paths, reference_decode_manifest_paths):
        with pytest.raises(CorruptMetadataError, match="not a valid manifest") as raised:
            decode(manifest, "s3://b/t/metadata/m9.avro")
        assert "s3://b/t/metadata/m9.avro" in str(raised.value)
    for decode_list in (decode_manifest_list, reference_decode_manifest_list):
        with pytest.raises(CorruptMetadataError, match="not a valid manifest list") as raised:
            decode_list(manifest_list, "s3://b/t/metadata/snap-9.avro")
        assert "snap-9.avro" in str(raised.value)
