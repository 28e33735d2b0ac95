"""Snapshot and schema JSON: every field, unknown fields carried, Paimon's option defaults."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from airflow_lakeformat.core.paimon.options import TableOptions, parse_duration, parse_memory_size
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.snapshot import CommitKind, Snapshot
from airflow_lakeformat.core.paimon.types import MAX_LENGTH, parse_type

FULL_SNAPSHOT = {
    "version": 3,
    "id": 7,
    "schemaId": 1,
    "baseManifestList": "manifest-list-a-0",
    "baseManifestListSize": 100,
    "deltaManifestList": "manifest-list-a-1",
    "deltaManifestListSize": 90,
    "changelogManifestList": "manifest-list-a-2",
    "changelogManifestListSize": 80,
    "indexManifest": "index-manifest-b-0",
    "commitUser": "user",
    "commitIdentifier": 9223372036854775807,
    "commitKind": "COMPACT",
    "timeMillis": 1795307285012,
    "totalRecordCount": 10,
    "deltaRecordCount": -2,
    "changelogRecordCount": 3,
    "watermark": -9223372036854775808,
    "statistics": "stat-c-0",
    "properties": {"spark.write.operation": "append"},
    "nextRowId": 0,
    "uuid": "85cca34d-6885-4347-adfd-6ff66b3eea5b",
    "writerVersion": "python-2.1.0-3a5ffe7",
    "operation": "WRITE",
    "logOffsets": {"0": 5},
    "someFutureField": {"nested": [1, 2]},
}


def test_every_version_3_field_is_read_and_unknown_fields_survive_a_rewrite() -> None:
    snapshot = Snapshot.from_json(FULL_SNAPSHOT)
    assert snapshot.commit_kind is CommitKind.COMPACT
    assert snapshot.changelog_manifest_list_size == 80 and snapshot.index_manifest == "index-manifest-b-0"
    assert snapshot.watermark == -(2**63) and snapshot.next_row_id == 0
    assert snapshot.extra["someFutureField"] == {"nested": [1, 2]}
    assert json.loads(snapshot.to_bytes()) == FULL_SNAPSHOT


def test_null_fields_are_omitted_like_jackson_non_null() -> None:
    minimal = {k: FULL_SNAPSHOT[k] for k in ("version", "id", "schemaId", "baseManifestList", "deltaManifestList",
                                              "commitUser", "commitIdentifier", "commitKind", "timeMillis")}  # fmt: skip
    minimal["statistics"] = None
    out = Snapshot.from_json(minimal).to_json()
    assert "statistics" not in out and "totalRecordCount" not in out


def test_unknown_commit_kind_is_rejected() -> None:
    with pytest.raises(ValueError):
        Snapshot.from_json({**FULL_SNAPSHOT, "commitKind": "MERGE_INTO"})


@pytest.mark.parametrize(
    ("text", "root", "attrs"),
    [
        ("STRING", "VARCHAR", {"length": MAX_LENGTH, "nullable": True}),
        ("BIGINT NOT NULL", "BIGINT", {"nullable": False}),
        ("DECIMAL(10, 2)", "DECIMAL", {"precision": 10, "scale": 2}),
        ("DECIMAL", "DECIMAL", {"precision": 10, "scale": 0}),
        ("TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP_LTZ", {"precision": 3}),
        ("TIMESTAMP", "TIMESTAMP", {"precision": 6}),
        ("TIMESTAMP(9) WITHOUT TIME ZONE NOT NULL", "TIMESTAMP", {"precision": 9, "nullable": False}),
        ("VARCHAR(10)", "VARCHAR", {"length": 10}),
        ("BYTES", "VARBINARY", {"length": MAX_LENGTH}),
        ("INTEGER", "INT", {}),
        ("TIME(3)", "TIME", {"precision": 3}),
    ],
)
def test_type_strings_parse(text: str, root: str, attrs: dict) -> None:
    dtype = parse_type(text)
    assert dtype.root == root
    for key, value in attrs.items():
        assert getattr(dtype, key) == value
    assert dtype.to_json() == text  # written back exactly as read


def test_sql_spelling_of_constructed_types() -> None:
    assert (
        parse_type("TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL").sql()
        == "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"
    )
    assert parse_type("STRING NOT NULL").sql() == "STRING NOT NULL"
    assert parse_type("DEC(5,1)").sql() == "DECIMAL(5, 1)"


def test_compound_types_and_unknown_type() -> None:
    row = parse_type(
        {
            "type": "ROW NOT NULL",
            "fields": [{"id": 5, "name": "x", "type": {"type": "ARRAY", "element": "INT"}}],
        }
    )
    assert row.root == "ROW" and not row.nullable and row.fields[0].type.element.root == "INT"  # type: ignore[union-attr]
    assert parse_type({"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT"}).key.nullable is False  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown Paimon data type"):
        parse_type("GEOMETRY")


SCHEMA = {
    "version": 3,
    "id": 2,
    "fields": [
        {"id": 0, "name": "dt", "type": "STRING NOT NULL"},
        {"id": 1, "name": "pk", "type": "BIGINT NOT NULL", "description": "key"},
        {"id": 2, "name": "v", "type": "STRING"},
    ],
    "highestFieldId": 2,
    "partitionKeys": ["dt"],
    "primaryKeys": ["dt", "pk"],
    "options": {"bucket": "2"},
    "comment": None,
    "timeMillis": 1795307284964,
    "futureKey": True,
}


def test_schema_round_trip_keeps_unknown_keys_and_computes_key_types() -> None:
    schema = TableSchema.from_json(SCHEMA)
    assert schema.trimmed_primary_keys == ("pk",)
    assert [t.root for t in schema.partition_types] == ["VARCHAR"]
    assert schema.table_options.bucket == 2
    out = schema.to_json()
    assert out["futureKey"] is True and out["fields"] == SCHEMA["fields"]


@pytest.mark.parametrize(("version", "bucket", "fmt"), [(1, 1, "orc"), (2, -1, "orc"), (3, -1, "parquet")])
def test_version_dependent_option_defaults(version: int, bucket: int, fmt: str) -> None:
    options = TableOptions({}, version)
    assert options.bucket == bucket and options.file_format == fmt


def test_option_defaults_and_parsers() -> None:
    options = TableOptions({"snapshot.time-retained": "30 min", "manifest.target-file-size": "2MB"})
    assert options.snapshot_time_retained == timedelta(minutes=30)
    assert options.manifest_target_file_size == 2 * 1024 * 1024
    assert options.manifest_full_compaction_threshold_size == 16 * 1024 * 1024
    assert options.manifest_merge_min_count == 30
    assert options.snapshot_num_retained_min == 10 and options.snapshot_expire_limit == 50
    assert options.partition_default_name == "__DEFAULT_PARTITION__" and options.partition_legacy_name is True
    assert parse_duration("1h") == timedelta(hours=1) and parse_duration("100") == timedelta(milliseconds=100)
    assert parse_memory_size("1 kb") == 1024
    for bad in ("1 fortnight", "x"):
        with pytest.raises(ValueError):
            parse_duration(bad)
    with pytest.raises(ValueError):
        parse_memory_size("3 parsecs")
