"""The scanner-based manifest readers give exactly what the full fastavro decode gives."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_lakeformat.core.errors import CorruptMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro, manifest_scan
from airflow_lakeformat.core.paimon.manifest import (
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    ManifestFileMeta,
    SimpleStats,
)
from airflow_lakeformat.core.paimon.manifest_scan import (
    ManifestListDecoder,
    ScannedManifestEntry,
    decode_manifest_for_planning,
)
from tests.unit.test_avro import _record_08, paimon_08_entry_schema

CODECS = {"null": "none", "deflate": "deflate", "snappy": "snappy", "zstandard": "zstd"}
FILE_PROPERTIES = [
    "file_name", "file_size", "row_count", "min_key", "max_key", "key_stats", "value_stats",
    "min_sequence_number", "max_sequence_number", "schema_id", "level", "extra_files", "creation_time",
    "delete_row_count", "embedded_index", "file_source", "value_stats_cols", "external_path", "first_row_id",
]  # fmt: skip

longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
names = st.one_of(st.text(min_size=1, max_size=60), st.text(min_size=64, max_size=300))
short_bytes = st.binary(max_size=120)


@st.composite
def entries(draw: Any) -> ManifestEntry:
    stats = st.builds(
        SimpleStats, short_bytes, short_bytes, st.none() | st.lists(st.none() | longs, max_size=8)
    )
    meta = DataFileMeta.create(
        draw(names),
        draw(longs),
        draw(longs),
        min_key=draw(short_bytes),
        max_key=draw(short_bytes),
        key_stats=draw(stats),
        value_stats=draw(stats),
        min_sequence_number=draw(longs),
        max_sequence_number=draw(longs),
        schema_id=draw(longs),
        level=draw(st.integers(min_value=-(2**31), max_value=2**31 - 1)),
        extra_files=draw(st.lists(names, max_size=3)),
        creation_time=draw(st.none() | st.just(datetime(2026, 3, 1, 2, 3, 4, 5000, tzinfo=timezone.utc))),
        delete_row_count=draw(st.none() | longs),
        embedded_index=draw(st.none() | short_bytes),
        file_source=draw(st.none() | st.sampled_from(list(FileSource))),
        value_stats_cols=draw(st.none() | st.lists(st.text(max_size=10), max_size=4)),
        external_path=draw(st.none() | names),
        first_row_id=draw(st.none() | longs),
    )
    kind = draw(st.sampled_from(list(FileKind)))
    return ManifestEntry.create(
        kind, draw(short_bytes), draw(st.integers(-5, 2**31 - 1)), draw(ints32()), meta
    )


def ints32() -> st.SearchStrategy[int]:
    return st.integers(min_value=-(2**31), max_value=2**31 - 1)


def assert_same_entries(scanned: list[ManifestEntry], full: list[ManifestEntry]) -> None:
    assert len(scanned) == len(full)
    for a, b in zip(scanned, full, strict=True):
        # Before anything materializes the record: the values the pattern decoded.
        assert (a.kind, a.partition, a.bucket, a.total_buckets) == (
            b.kind,
            b.partition,
            b.bucket,
            b.total_buckets,
        )
        assert a.identifier() == b.identifier()
        for name in FILE_PROPERTIES:
            assert getattr(a.file, name) == getattr(b.file, name), name
        assert a.record == b.record
        assert a.file.record is a.record["_FILE"]
        assert a.to_delete().record == b.to_delete().record


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(entries(), min_size=1, max_size=25), codec=st.sampled_from(list(CODECS)))
def test_planning_entries_equal_the_full_decode(batch: list[ManifestEntry], codec: str) -> None:
    data = avro.encode_manifest(batch, compression=CODECS[codec])
    scanned = decode_manifest_for_planning(data, "m")
    assert_same_entries(scanned, avro.decode_manifest(data, "m"))
    expected = [n for e in avro.decode_manifest(data, "m") for n in (e.file.file_name, *e.file.extra_files)]
    assert manifest_scan.manifest_file_names(data, "m") == expected


def test_the_common_entries_are_scanned_not_decoded() -> None:
    batch = [
        ManifestEntry.create(
            FileKind.ADD, b"\x00" * 16, 0, -1, DataFileMeta.create(f"data-{i}.parquet", 10, 1)
        )
        for i in range(300)
    ]
    scanned = decode_manifest_for_planning(avro.encode_manifest(batch), "m")
    assert all(type(e) is ScannedManifestEntry for e in scanned)
    assert_same_entries(scanned, batch)


@pytest.mark.parametrize("codec", list(CODECS))
def test_paimon_08_nullable_records(codec: str) -> None:
    buffer = io.BytesIO()
    records = [_record_08(1, "f1.parquet"), _record_08(0, "f2.parquet")]
    fastavro.writer(buffer, fastavro.parse_schema(paimon_08_entry_schema()), records, codec=codec)
    data = buffer.getvalue()
    assert_same_entries(decode_manifest_for_planning(data, "m"), avro.decode_manifest(data, "m"))
    assert manifest_scan.manifest_file_names(data, "m") == ["f1.parquet", "f2.parquet"]


def test_pypaimon_manifests(sample_tables: Path) -> None:
    manifests = [
        p for p in sample_tables.glob("*/manifest/manifest-*") if not p.name.startswith("manifest-list-")
    ]
    assert len(manifests) >= 10
    for path in manifests:
        data = path.read_bytes()
        assert_same_entries(
            decode_manifest_for_planning(data, str(path)), avro.decode_manifest(data, str(path))
        )
        assert manifest_scan.manifest_file_names(data, str(path)) == avro.manifest_file_names(data, str(path))


def test_refusals_are_the_full_decodes() -> None:
    record = ManifestEntry.create(FileKind.ADD, b"", 0, 1, DataFileMeta.create("a.parquet", 1, 1)).record
    old = avro.encode(avro.manifest_entry_schema(), [{**record, "_VERSION": 1}])
    bad_kind = avro.encode(avro.manifest_entry_schema(), [{**record, "_KIND": 7}])
    good = avro.encode_manifest([ManifestEntry(record)] * 50)
    for read in (decode_manifest_for_planning, manifest_scan.manifest_file_names):
        with pytest.raises(UnsupportedFormatError, match="_VERSION 1"):
            read(old, "manifest-old")
        for cut in (10, 60, -5):
            with pytest.raises(CorruptMetadataError, match="manifest-trunc"):
                read(good[:cut], "manifest-trunc")
    with pytest.raises(CorruptMetadataError, match="_KIND"):
        decode_manifest_for_planning(bad_kind, "manifest-kind")


def _list_rows(count: int, extra: bool) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        row = ManifestFileMeta(
            {
                "_VERSION": 2, "_FILE_NAME": f"manifest-{i:05d}-{'x' * (i % 40)}", "_FILE_SIZE": 1000 + i,
                "_NUM_ADDED_FILES": i, "_NUM_DELETED_FILES": 0,
                "_PARTITION_STATS": SimpleStats(bytes(12), bytes(12 + i % 9), [None, i]).to_record(),
                "_SCHEMA_ID": 0, "_MIN_BUCKET": 0, "_MAX_BUCKET": i % 4, "_MIN_LEVEL": 0, "_MAX_LEVEL": 0,
                "_MIN_ROW_ID": None, "_MAX_ROW_ID": None,
            }
        ).record  # fmt: skip
        if extra:
            row["_EXTRA_FILES"] = [f"side-{i}"] if i % 5 == 0 else None
        rows.append(row)
    return rows


@pytest.mark.parametrize("extra", [False, True])
@pytest.mark.parametrize("codec", ["zstd", "none", "snappy"])
def test_manifest_lists_that_grow_by_commits_decode_as_the_full_decode(extra: bool, codec: str) -> None:
    extra_fields = [
        {"name": "_EXTRA_FILES", "type": ["null", {"type": "array", "items": "string"}], "default": None}
    ]
    schema = avro.manifest_file_meta_schema(extra_fields if extra else ())
    rows = _list_rows(700, extra)
    decoder = ManifestListDecoder()
    for count in [*range(1, 40, 3), *range(40, 700, 37)]:
        data = avro.encode(schema, rows[:count], compression=codec)  # the base list of a later commit
        got = decoder.refs(decoder.decode(data, f"list-{count}"))
        want = avro.decode_manifest_list(data, "x")
        assert [(r.file_name, r.file_size, list(r.extra_files)) for r in got] == [
            (m.file_name, m.file_size, m.extra_files) for m in want
        ]
    # Shared blocks were decoded once: far fewer rows than were read.
    assert decoder.rows_decoded < decoder.rows_read / 5


def test_manifest_list_refusals_are_the_full_decodes() -> None:
    rows = _list_rows(3, False)
    decoder = ManifestListDecoder()
    with pytest.raises(UnsupportedFormatError, match="_VERSION 1"):
        decoder.decode(
            avro.encode(avro.manifest_file_meta_schema(), [{**rows[0], "_VERSION": 1}]), "list-old"
        )
    data = avro.encode(avro.manifest_file_meta_schema(), rows)
    with pytest.raises(CorruptMetadataError, match="list-trunc"):
        decoder.decode(data[:-5], "list-trunc")
    entry = avro.encode_manifest(
        [ManifestEntry.create(FileKind.ADD, b"", 0, 1, DataFileMeta.create("a", 1, 1))]
    )
    with pytest.raises(CorruptMetadataError, match="list-kind"):
        decoder.decode(entry, "list-kind")


def test_once_the_record_exists_the_properties_read_it() -> None:
    """As for a decoded entry: a changed record shows in the properties and the identity."""
    batch = [ManifestEntry.create(FileKind.ADD, b"p", 1, 2, DataFileMeta.create("a.parquet", 10, 5, level=1))]
    scanned = decode_manifest_for_planning(avro.encode_manifest(batch), "m")[0]
    assert type(scanned) is ScannedManifestEntry and scanned.file.row_count == 5
    scanned.file.record["_ROW_COUNT"] += 1
    scanned.file.record["_LEVEL"] = 3
    assert (scanned.file.row_count, scanned.file.level) == (6, 3)
    assert scanned.identifier()[2] == 3 and scanned.record["_FILE"] is scanned.file.record


def test_scanned_entries_pickle_as_the_plain_entries_of_their_records() -> None:
    """Spark ships plan entries to executors by pickling them; a scanned entry holds a regex match,
    which does not pickle, so it travels as the decoded entry, equal to the full decode's."""
    import pickle

    batch = [
        ManifestEntry.create(
            FileKind.ADD, b"\x00" * 16, i % 3, -1, DataFileMeta.create(f"data-{i}.parquet", 10 + i, 1 + i)
        )
        for i in range(50)
    ]
    data = avro.encode_manifest(batch)
    scanned = decode_manifest_for_planning(data, "m")
    full = avro.decode_manifest(data, "m")
    assert scanned and any(isinstance(e, ScannedManifestEntry) for e in scanned)
    copies = pickle.loads(pickle.dumps(scanned))
    assert [type(e) for e in copies] == [ManifestEntry] * len(full)
    assert [e.record for e in copies] == [e.record for e in full]
    assert [e.identifier() for e in copies] == [e.identifier() for e in full]
    files = pickle.loads(pickle.dumps([e.file for e in scanned]))
    assert [f.record for f in files] == [e.file.record for e in full]
