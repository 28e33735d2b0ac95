"""Avro codecs for manifest lists and manifests (fastavro).

Reading accepts every shape Paimon has written: Paimon 0.8's nullable top-level and nested
records, the plain records of Java >= 0.9, pypaimon's record names and its extra manifest-list
fields (``_TOTAL_BUCKETS``, ``_EXTRA_FILES``), and the null, deflate, snappy and zstd codecs.
Records are decoded with the file's own writer schema, so fields we do not know survive in the
decoded record.

Writing produces the Java >= 0.9 shape: Java's record names, non-null records, every union
``["null", T]`` with null first (Java readers assume that order), plus any extra fields the caller
carries over from input files.

A manifest read where its manifest list's row is at hand is first checked against that row's
``_FILE_SIZE`` (:func:`check_manifest_size`): a manifest cut at a block boundary is still a valid,
shorter Avro file (Avro has no end marker), so only the recorded size reveals the lost entries.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import fastavro
from fastavro.types import Schema

from airflow_lakeformat.core.errors import CodecUnavailableError, CorruptMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.paimon.manifest import MANIFEST_VERSION, ManifestEntry, ManifestFileMeta

NAMESPACE = "org.apache.paimon.avro.generated"
TOP = f"{NAMESPACE}.record"

# Paimon option value -> Avro codec name.
CODECS = {"zstd": "zstandard", "zstandard": "zstandard", "snappy": "snappy", "deflate": "deflate", "none": "null", "null": "null"}  # fmt: skip


def _nullable(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def _optional(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": _nullable(avro_type), "default": None}


def _stats_record(name: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            _optional("_NULL_COUNTS", {"type": "array", "items": _nullable("long")}),
        ],
    }


def manifest_file_meta_schema(extra_fields: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The manifest-list record as Java master writes it, plus ``extra_fields`` (carried over)."""
    return {
        "type": "record",
        "name": TOP,
        "fields": [
            {"name": "_VERSION", "type": "int"},
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_NUM_ADDED_FILES", "type": "long"},
            {"name": "_NUM_DELETED_FILES", "type": "long"},
            {"name": "_PARTITION_STATS", "type": _stats_record(f"{TOP}__PARTITION_STATS")},
            {"name": "_SCHEMA_ID", "type": "long"},
            _optional("_MIN_BUCKET", "int"),
            _optional("_MAX_BUCKET", "int"),
            _optional("_MIN_LEVEL", "int"),
            _optional("_MAX_LEVEL", "int"),
            _optional("_MIN_ROW_ID", "long"),
            _optional("_MAX_ROW_ID", "long"),
            *[dict(f) for f in extra_fields],
        ],
    }


def manifest_entry_schema(extra_file_fields: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The manifest-entry record as Java master writes it, plus extra ``_FILE`` fields (carried over)."""
    file_record = f"{TOP}__FILE"
    return {
        "type": "record",
        "name": TOP,
        "fields": [
            {"name": "_VERSION", "type": "int"},
            {"name": "_KIND", "type": "int"},
            {"name": "_PARTITION", "type": "bytes"},
            {"name": "_BUCKET", "type": "int"},
            {"name": "_TOTAL_BUCKETS", "type": "int"},
            {
                "name": "_FILE",
                "type": {
                    "type": "record",
                    "name": file_record,
                    "fields": [
                        {"name": "_FILE_NAME", "type": "string"},
                        {"name": "_FILE_SIZE", "type": "long"},
                        {"name": "_ROW_COUNT", "type": "long"},
                        {"name": "_MIN_KEY", "type": "bytes"},
                        {"name": "_MAX_KEY", "type": "bytes"},
                        {"name": "_KEY_STATS", "type": _stats_record(f"{file_record}__KEY_STATS")},
                        {"name": "_VALUE_STATS", "type": _stats_record(f"{file_record}__VALUE_STATS")},
                        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
                        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
                        {"name": "_SCHEMA_ID", "type": "long"},
                        {"name": "_LEVEL", "type": "int"},
                        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
                        _optional("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
                        _optional("_DELETE_ROW_COUNT", "long"),
                        _optional("_EMBEDDED_FILE_INDEX", "bytes"),
                        _optional("_FILE_SOURCE", "int"),
                        _optional("_VALUE_STATS_COLS", {"type": "array", "items": "string"}),
                        _optional("_EXTERNAL_PATH", "string"),
                        _optional("_FIRST_ROW_ID", "long"),
                        _optional("_WRITE_COLS", {"type": "array", "items": "string"}),
                        _optional("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
                        *[dict(f) for f in extra_file_fields],
                    ],
                },
            },
        ],
    }


def check_manifest_size(data: bytes, path: str, expected_size: int | None) -> None:
    """Refuse a manifest whose byte count is not the ``_FILE_SIZE`` its manifest list records.

    A manifest truncated at an Avro block boundary decodes as a shorter valid file, so without this
    check its lost entries would vanish silently (and their data files would look orphaned). A writer
    that records a wrong size is refused too: the safe direction for deletions. ``None``: no size known.

    Raises:
        CorruptMetadataError: The sizes differ.
    """
    if expected_size is not None and len(data) != expected_size:
        raise CorruptMetadataError(
            path, f"is {len(data)} bytes, the manifest list records {expected_size} (truncated or replaced)"
        )


def read_records(data: bytes, path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode an Avro object container file; any decoding failure names the file."""
    try:
        reader = fastavro.reader(io.BytesIO(data))
        records = cast(list[dict[str, Any]], list(reader))
        writer_schema: Any = reader.writer_schema
    except Exception as exc:  # fastavro raises many types (EOFError, ValueError, KeyError...)
        if "you need to install" in str(exc):
            raise CodecUnavailableError(path, str(exc)) from exc
        raise CorruptMetadataError(path, f"not a readable Avro file ({type(exc).__name__}: {exc})") from exc
    if not isinstance(writer_schema, dict):
        # Paimon 0.8 wrote the top level as ["null", record].
        writer_schema = next((s for s in writer_schema if isinstance(s, dict)), {})
    return writer_schema, records


def _record_fields(avro_type: Any) -> list[dict[str, Any]]:
    """Fields of a record type, looking through a ``["null", record]`` union."""
    if isinstance(avro_type, list):
        avro_type = next((t for t in avro_type if isinstance(t, dict)), {})
    return list(avro_type.get("fields", [])) if isinstance(avro_type, dict) else []


def extra_fields(writer_schema: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fields of a manifest's writer schema that Java master's schema lacks: (top level, ``_FILE``).

    A rewrite adds them to its own writer schema so that what a newer Paimon wrote is carried, not
    dropped. Only nullable fields can be carried (a non-null one would need a value for every entry).
    """
    known_top = {f["name"] for f in manifest_entry_schema()["fields"]}
    known_file = {f["name"] for f in _record_fields(manifest_entry_schema()["fields"][5]["type"])}
    fields = _record_fields(writer_schema)
    top = [dict(f) for f in fields if f["name"] not in known_top]
    file_type: Any = next((f["type"] for f in fields if f["name"] == "_FILE"), {})
    nested = [dict(f) for f in _record_fields(file_type) if f["name"] not in known_file]
    for f in top + nested:
        if not (isinstance(f["type"], list) and "null" in f["type"]):
            raise UnsupportedFormatError(
                "manifest", f"unknown non-nullable field {f['name']} cannot be carried"
            )
    return top, nested


def _check_versions(records: Iterable[Mapping[str, Any]], path: str) -> None:
    for record in records:
        if record is None:
            raise CorruptMetadataError(path, "null record")
        version = record.get("_VERSION")
        if version != MANIFEST_VERSION:
            raise UnsupportedFormatError(
                path,
                f"_VERSION {version} (only {MANIFEST_VERSION} is supported; version 1 tables must be recreated)",
            )


def decode_manifest_list(data: bytes, path: str) -> list[ManifestFileMeta]:
    _, records = read_records(data, path)
    _check_versions(records, path)
    try:
        return [ManifestFileMeta(r) for r in records]
    except (KeyError, TypeError) as exc:
        raise CorruptMetadataError(path, f"manifest list record lacks {exc}") from exc


def decode_manifest(data: bytes, path: str) -> list[ManifestEntry]:
    return decode_manifest_with_schema(data, path)[0]


def decode_manifest_with_schema(data: bytes, path: str) -> tuple[list[ManifestEntry], dict[str, Any]]:
    """Entries and the writer schema, from one decode (a rewrite needs both)."""
    schema, records = read_records(data, path)
    return _entries(records, path), schema


def _entries(records: list[dict[str, Any]], path: str) -> list[ManifestEntry]:
    _check_versions(records, path)
    try:
        return [ManifestEntry(r) for r in records]
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptMetadataError(
            path, f"manifest entry is malformed ({type(exc).__name__}: {exc})"
        ) from exc


# Orphan cleanup needs only the file names of millions of entries; resolving against a reader schema of
# just these fields makes fastavro skip the statistics instead of building them (about half the time).
_NAME_FIELDS = {"_VERSION": None, "_FILE": ("_FILE_NAME", "_EXTRA_FILES")}
_name_schemas: dict[str, Any] = {}


def _project(record_type: Any, keep: Mapping[str, Any] | Sequence[str]) -> Any:
    """``record_type`` (or a ``["null", record]`` union) with only the fields in ``keep``; None if not a record."""
    if isinstance(record_type, list):
        branches = [_project(t, keep) if isinstance(t, dict) else t for t in record_type]
        return None if any(b is None for b in branches) else branches
    if not isinstance(record_type, dict) or record_type.get("type") != "record":
        return None
    fields = []
    for field in record_type.get("fields", []):
        if field["name"] not in keep:
            continue
        nested = keep[field["name"]] if isinstance(keep, Mapping) else None
        if nested is not None:
            projected = _project(field["type"], nested)
            if projected is None:
                return None
            field = {**field, "type": projected}
        fields.append(field)
    return {**record_type, "fields": fields}


def _names_reader_schema(writer_schema: Any) -> Any:
    key = repr(writer_schema)
    if key not in _name_schemas:
        projected = _project(writer_schema, _NAME_FIELDS)
        _name_schemas[key] = fastavro.parse_schema(projected) if projected is not None else None
    return _name_schemas[key]


def manifest_file_names(data: bytes, path: str) -> list[str]:
    """The data, changelog and extra file names every entry of a manifest mentions (ADD and DELETE alike).

    The same names as :func:`decode_manifest` gives, and the same refusals (unreadable Avro, ``_VERSION``
    other than 2, an entry without ``_FILE``), without decoding the statistics. A writer schema this
    projection does not understand falls back to the full decode.
    """
    try:
        writer_schema = fastavro.reader(io.BytesIO(data)).writer_schema
        reader_schema = _names_reader_schema(writer_schema)
    except Exception:
        reader_schema = None  # read_records below reports an unreadable file with its name
    if reader_schema is None:
        return [name for e in decode_manifest(data, path) for name in (e.file.file_name, *e.file.extra_files)]
    names: list[str] = []
    try:
        # Streamed: one small record at a time instead of a list of every entry of the manifest.
        for item in fastavro.reader(io.BytesIO(data), reader_schema=reader_schema):
            record = cast(dict[str, Any], item)
            _check_versions((record,), path)
            file = record["_FILE"]
            names.append(file["_FILE_NAME"])
            names.extend(file.get("_EXTRA_FILES") or ())
    except (CorruptMetadataError, UnsupportedFormatError):
        raise
    except (KeyError, TypeError) as exc:
        raise CorruptMetadataError(
            path, f"manifest entry is malformed ({type(exc).__name__}: {exc})"
        ) from exc
    except Exception as exc:  # fastavro raises many types (EOFError, ValueError, ...)
        if "you need to install" in str(exc):
            raise CodecUnavailableError(path, str(exc)) from exc
        raise CorruptMetadataError(path, f"not a readable Avro file ({type(exc).__name__}: {exc})") from exc
    return names


def encode(
    schema: Mapping[str, Any], records: Iterable[Mapping[str, Any]], compression: str = "zstd"
) -> bytes:
    """Write records as an Avro object container file with Paimon's codec naming."""
    codec = CODECS.get(compression.lower())
    if codec is None:
        raise ValueError(f"unsupported manifest.compression {compression!r}")
    parsed: Schema = fastavro.parse_schema(dict(schema))
    buffer = io.BytesIO()
    fastavro.writer(buffer, parsed, records, codec=codec)
    return buffer.getvalue()


def encode_manifest_list(
    metas: Iterable[ManifestFileMeta],
    compression: str = "zstd",
    extra_fields: Sequence[Mapping[str, Any]] = (),
) -> bytes:
    return encode(manifest_file_meta_schema(extra_fields), (m.record for m in metas), compression)


def encode_manifest(
    entries: Iterable[ManifestEntry],
    compression: str = "zstd",
    extra_file_fields: Sequence[Mapping[str, Any]] = (),
) -> bytes:
    return encode(manifest_entry_schema(extra_file_fields), (e.record for e in entries), compression)
