"""Manifest codecs: every shape Paimon has written, every codec, and the shape we write."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path

import fastavro
import pytest

from airflow_lakeformat.core.errors import CorruptMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.manifest import (
    DataFileMeta,
    FileKind,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from airflow_lakeformat.core.paimon.manifest_writer import manifest_file_meta
from airflow_lakeformat.core.paimon.types import parse_type


def _stats(name: str, nullable: bool) -> object:
    record = {
        "type": "record",
        "name": name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {
                "name": "_NULL_COUNTS",
                "type": ["null", {"type": "array", "items": ["null", "long"]}],
                "default": None,
            },
        ],
    }
    return ["null", record] if nullable else record


def paimon_08_entry_schema() -> object:
    """The shape Paimon <= 0.8 wrote: nullable top level and nested records, fields up to _EMBEDDED_FILE_INDEX."""
    ns = "org.apache.paimon.avro.generated.record"
    file_fields = [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": _stats(f"{ns}__FILE__KEY_STATS", True), "default": None},
        {"name": "_VALUE_STATS", "type": _stats(f"{ns}__FILE__VALUE_STATS", True), "default": None},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        {
            "name": "_CREATION_TIME",
            "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            "default": None,
        },
        {"name": "_DELETE_ROW_COUNT", "type": ["null", "long"], "default": None},
        {"name": "_EMBEDDED_FILE_INDEX", "type": ["null", "bytes"], "default": None},
    ]
    return [
        "null",
        {
            "type": "record",
            "name": ns,
            "fields": [
                {"name": "_VERSION", "type": "int"},
                {"name": "_KIND", "type": "int"},
                {"name": "_PARTITION", "type": "bytes"},
                {"name": "_BUCKET", "type": "int"},
                {"name": "_TOTAL_BUCKETS", "type": "int"},
                {
                    "name": "_FILE",
                    "type": ["null", {"type": "record", "name": f"{ns}__FILE", "fields": file_fields}],
                    "default": None,
                },
            ],
        },
    ]


EMPTY = bytes(12)
INT_ROW = bytes.fromhex("0000000100000000000000000100000000000000")


def _record_08(kind: int, name: str) -> dict:
    stats = {"_MIN_VALUES": EMPTY, "_MAX_VALUES": EMPTY, "_NULL_COUNTS": []}
    return {
        "_VERSION": 2,
        "_KIND": kind,
        "_PARTITION": INT_ROW,
        "_BUCKET": 1,
        "_TOTAL_BUCKETS": 10,
        "_FILE": {
            "_FILE_NAME": name,
            "_FILE_SIZE": 10,
            "_ROW_COUNT": 100,
            "_MIN_KEY": EMPTY,
            "_MAX_KEY": EMPTY,
            "_KEY_STATS": stats,
            "_VALUE_STATS": stats,
            "_MIN_SEQUENCE_NUMBER": 1,
            "_MAX_SEQUENCE_NUMBER": 100,
            "_SCHEMA_ID": 0,
            "_LEVEL": 1,
            "_EXTRA_FILES": [],
            "_CREATION_TIME": datetime(2024, 9, 6, 7, 45, 55, 39000, tzinfo=timezone.utc),
            "_DELETE_ROW_COUNT": 0,
            "_EMBEDDED_FILE_INDEX": None,
        },
    }


def _write(schema: object, records: list[dict], codec: str) -> bytes:
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), records, codec=codec)
    return buffer.getvalue()


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
def test_reads_paimon_08_nullable_records_with_every_codec(codec: str) -> None:
    data = _write(paimon_08_entry_schema(), [_record_08(1, "f1.parquet"), _record_08(0, "f2.parquet")], codec)
    entries = avro.decode_manifest(data, "manifest-x")
    assert [e.kind for e in entries] == [FileKind.DELETE, FileKind.ADD]
    assert entries[1].file.file_name == "f2.parquet"
    assert entries[1].partition == INT_ROW
    # Fields 0.8 did not have read as None.
    assert entries[0].file.file_source is None and entries[0].file.external_path is None
    assert entries[0].file.level == 1 and entries[0].file.row_count == 100


def _java_entry(name: str, kind: FileKind = FileKind.ADD, **fields: object) -> ManifestEntry:
    meta = DataFileMeta.create(
        name, 123, 7, creation_time=datetime(2026, 1, 1, tzinfo=timezone.utc), **fields
    )  # type: ignore[arg-type]
    return ManifestEntry.create(kind, INT_ROW, 0, 2, meta)


@pytest.mark.parametrize("compression", ["zstd", "snappy", "deflate", "none"])
def test_written_manifest_has_java_shape_and_round_trips(compression: str) -> None:
    entries = [
        _java_entry("a.parquet"),
        _java_entry("b.parquet", FileKind.DELETE, extra_files=["b.parquet.index"]),
    ]
    data = avro.encode_manifest(entries, compression)
    reader = fastavro.reader(io.BytesIO(data))
    schema = reader.writer_schema
    assert reader.codec == avro.CODECS[compression]
    assert schema["name"] == "org.apache.paimon.avro.generated.record"
    file_schema = next(f for f in schema["fields"] if f["name"] == "_FILE")["type"]
    assert file_schema["name"] == "org.apache.paimon.avro.generated.record__FILE"
    # Every union is ["null", T], null first: Java readers take types[1].
    for f in file_schema["fields"]:
        if isinstance(f["type"], list):
            assert f["type"][0] == "null" and len(f["type"]) == 2, f
    names = [f["name"] for f in file_schema["fields"]]
    assert names[:12] == [
        "_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT", "_MIN_KEY", "_MAX_KEY", "_KEY_STATS", "_VALUE_STATS",
        "_MIN_SEQUENCE_NUMBER", "_MAX_SEQUENCE_NUMBER", "_SCHEMA_ID", "_LEVEL", "_EXTRA_FILES",
    ]  # fmt: skip
    back = avro.decode_manifest(data, "m")
    assert [e.identifier() for e in back] == [e.identifier() for e in entries]
    assert back[1].file.extra_files == ["b.parquet.index"]
    assert back[0].file.creation_time == datetime(2026, 1, 1, tzinfo=timezone.utc)


def test_manifest_list_round_trip_and_pypaimon_extra_fields_are_carried() -> None:
    int_type = [parse_type("INT")]
    entries = [_java_entry("a.parquet")]
    meta = manifest_file_meta("manifest-1", 999, entries, int_type, 0)
    assert meta.num_added_files == 1 and meta.min_bucket == 0 and meta.max_level == 0
    assert meta.partition_stats.min_values == INT_ROW and meta.partition_stats.null_counts == [0]
    # pypaimon 2.1 adds _TOTAL_BUCKETS and _EXTRA_FILES to the manifest list; a rewrite must keep them.
    extra_fields = [
        {"name": "_TOTAL_BUCKETS", "type": ["null", "int"], "default": None},
        {"name": "_EXTRA_FILES", "type": ["null", {"type": "array", "items": "string"}], "default": None},
    ]
    meta.record["_TOTAL_BUCKETS"] = 2
    meta.record["_EXTRA_FILES"] = ["manifest-1.avro.sidecar"]
    data = avro.encode_manifest_list([meta], extra_fields=extra_fields)
    back = avro.decode_manifest_list(data, "list")
    assert back[0].extra_files == ["manifest-1.avro.sidecar"]
    assert back[0].record["_TOTAL_BUCKETS"] == 2
    writer_schema, _ = avro.read_records(data, "list")
    assert [f["name"] for f in writer_schema["fields"]][-2:] == ["_TOTAL_BUCKETS", "_EXTRA_FILES"]


def test_unknown_fields_survive_a_rewrite_when_their_schema_is_carried() -> None:
    schema = avro.manifest_entry_schema(
        [{"name": "_FUTURE_FIELD", "type": ["null", "string"], "default": None}]
    )
    record = _java_entry("a.parquet").record
    record["_FILE"]["_FUTURE_FIELD"] = "kept"
    data = avro.encode(schema, [record])
    entry = avro.decode_manifest(data, "m")[0]
    assert entry.file.record["_FUTURE_FIELD"] == "kept"
    rewritten = avro.encode(schema, [entry.record])
    assert avro.decode_manifest(rewritten, "m")[0].file.record["_FUTURE_FIELD"] == "kept"


def test_version_other_than_2_is_refused_naming_the_file() -> None:
    record = _java_entry("a.parquet").record
    record["_VERSION"] = 1
    data = avro.encode(avro.manifest_entry_schema(), [record])
    with pytest.raises(UnsupportedFormatError, match=r"manifest-old.*_VERSION 1"):
        avro.decode_manifest(data, "manifest-old")


@pytest.mark.parametrize("cut", [10, 60, -5])
def test_truncated_or_garbage_avro_is_corrupt_metadata_naming_the_file(cut: int) -> None:
    data = avro.encode_manifest([_java_entry(f"f{i}.parquet") for i in range(50)])
    with pytest.raises(CorruptMetadataError, match="manifest-trunc"):
        avro.decode_manifest(data[:cut], "manifest-trunc")
    with pytest.raises(CorruptMetadataError, match="manifest-garbage"):
        avro.decode_manifest(b"{not avro}", "manifest-garbage")


def test_manifest_list_decoded_as_manifest_is_reported_as_malformed() -> None:
    meta = ManifestFileMeta(
        {
            "_VERSION": 2, "_FILE_NAME": "m", "_FILE_SIZE": 1, "_NUM_ADDED_FILES": 0, "_NUM_DELETED_FILES": 0,
            "_PARTITION_STATS": SimpleStats(EMPTY, EMPTY, []).to_record(), "_SCHEMA_ID": 0,
        }
    )  # fmt: skip
    data = avro.encode_manifest_list([meta])
    with pytest.raises(CorruptMetadataError, match="wrong-kind"):
        avro.decode_manifest(data, "wrong-kind")


def test_unknown_codec_option_is_refused() -> None:
    with pytest.raises(ValueError, match="lz4"):
        avro.encode_manifest([], "lz4")


def test_schema_constants_are_valid_avro() -> None:
    for schema in (avro.manifest_entry_schema(), avro.manifest_file_meta_schema()):
        fastavro.parse_schema(json.loads(json.dumps(schema)))


def _full_decode_names(data: bytes) -> list[str]:
    return [n for e in avro.decode_manifest(data, "m") for n in (e.file.file_name, *e.file.extra_files)]


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "zstandard"])
def test_file_names_only_equal_the_full_decode(codec: str) -> None:
    java = avro.encode_manifest(
        [
            _java_entry("a.parquet", extra_files=["a.parquet.index"]),
            _java_entry("b.parquet", FileKind.DELETE),
            _java_entry("c.orc", extra_files=["c.idx", "c.dv"]),
        ],
        compression={"null": "none", "zstandard": "zstd"}.get(codec, codec),
    )
    assert avro.manifest_file_names(java, "m") == [
        "a.parquet", "a.parquet.index", "b.parquet", "c.orc", "c.idx", "c.dv"
    ]  # fmt: skip
    nullable_08 = _write(
        paimon_08_entry_schema(), [_record_08(1, "f1.parquet"), _record_08(0, "f2.parquet")], codec
    )
    for data in (java, nullable_08):
        assert avro.manifest_file_names(data, "m") == _full_decode_names(data)


def test_file_names_only_equal_the_full_decode_on_pypaimon_manifests(sample_tables: Path) -> None:
    manifests = [
        p for p in sample_tables.glob("*/manifest/manifest-*") if not p.name.startswith("manifest-list-")
    ]
    assert len(manifests) >= 10
    for path in manifests:
        data = path.read_bytes()
        names = avro.manifest_file_names(data, str(path))
        assert names and names == _full_decode_names(data), path


def test_file_names_only_fall_back_to_the_full_decode_for_schemas_they_cannot_project() -> None:
    # _FILE's record type is defined by an earlier field and referenced by name: no projection keeps it.
    file_type = avro.manifest_entry_schema()["fields"][5]["type"]
    assert file_type["name"].endswith("_FILE")
    schema = dict(avro.manifest_entry_schema())
    schema["fields"] = [{"name": "_PREVIOUS", "type": file_type}] + [
        {**f, "type": file_type["name"]} if f["name"] == "_FILE" else f for f in schema["fields"]
    ]
    records = [
        {**e.record, "_PREVIOUS": e.record["_FILE"]} for e in (_java_entry("x.parquet", extra_files=["x.i"]),)
    ]
    data = avro.encode(schema, records)
    assert avro.manifest_file_names(data, "m") == ["x.parquet", "x.i"] == _full_decode_names(data)


def test_file_names_only_refuse_what_the_full_decode_refuses() -> None:
    record = _java_entry("a.parquet").record
    record["_VERSION"] = 1
    with pytest.raises(UnsupportedFormatError, match=r"manifest-old.*_VERSION 1"):
        avro.manifest_file_names(avro.encode(avro.manifest_entry_schema(), [record]), "manifest-old")
    data = avro.encode_manifest([_java_entry(f"f{i}.parquet") for i in range(50)])
    for cut in (10, 60, -5):
        with pytest.raises(CorruptMetadataError, match="manifest-trunc"):
            avro.manifest_file_names(data[:cut], "manifest-trunc")
    with pytest.raises(CorruptMetadataError, match="manifest-garbage"):
        avro.manifest_file_names(b"{not avro}", "manifest-garbage")
    meta = ManifestFileMeta(
        {
            "_VERSION": 2, "_FILE_NAME": "m", "_FILE_SIZE": 1, "_NUM_ADDED_FILES": 0, "_NUM_DELETED_FILES": 0,
            "_PARTITION_STATS": SimpleStats(EMPTY, EMPTY, []).to_record(), "_SCHEMA_ID": 0,
        }
    )  # fmt: skip
    with pytest.raises(CorruptMetadataError, match="wrong-kind: manifest entry is malformed"):
        avro.manifest_file_names(avro.encode_manifest_list([meta]), "wrong-kind")
