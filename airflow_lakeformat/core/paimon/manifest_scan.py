"""What maintenance reads from manifests and manifest lists, decoded with the regex scanner.

Orphan cleanup and expiry need few fields of many records: the file names of every manifest entry,
and the name, size and extra files of every manifest-list row. Both are decoded here with
:mod:`airflow_lakeformat.core.avro_scan` (a pattern per writer schema, fastavro for any record the
pattern does not express), with ``_VERSION`` pinned to 2 so that any other version goes to the full
decode, which refuses it.

Manifest lists repeat themselves: every commit writes a new base list holding the previous
snapshot's manifests, so a table with ``n`` snapshots of ``m`` manifests has ``n`` lists that are
mostly the same rows, and reading every snapshot's list costs ``n * m`` rows. Avro writers cut a
file into blocks at a fixed byte size, so equal leading rows give byte-identical blocks.
:class:`ManifestListDecoder` decodes each distinct block once:

1. a block whose compressed bytes (with the same writer schema and codec) were seen before is the
   same rows: reused without decompressing;
2. otherwise it is decompressed; if it starts with the complete bytes of an earlier block of the
   same schema that the pattern tiled exactly (the tail block of the previous list, which this
   list's tail extends), its first rows are that block's rows and only the rest is decoded;
3. otherwise all of it is decoded.

Decoding is deterministic and records are self-delimiting, so equal bytes are equal rows: the
result is the one a full decode of every list gives, at the cost of the distinct rows.

Any file the scanner cannot take (framing, codec, schema) and any failure of the fast path goes to
the full fastavro decode in :mod:`airflow_lakeformat.core.paimon.avro`, which returns the same
values or raises the errors maintenance reports (corrupt file, unsupported version, missing codec).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_lakeformat.core import avro_blocks, avro_scan
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.paimon import avro
from airflow_lakeformat.core.paimon.manifest import (
    MANIFEST_VERSION,
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
)

_VERSION_PATH = ("_VERSION",)
_ENTRY_NAMES = [("_FILE", "_FILE_NAME"), ("_FILE", "_EXTRA_FILES")]
_LIST_FIELDS = [("_FILE_NAME",), ("_FILE_SIZE",)]
_EXTRA = ("_EXTRA_FILES",)
_PREFIX_KEY = 64  # bytes of a decompressed block that index it for prefix matches


class _FastPathFailed(Exception):
    """Something the fast path does not handle: the full decode decides."""


@dataclass(frozen=True, slots=True)
class ManifestRef:
    """A manifest as a manifest list names it: what maintenance keeps or deletes."""

    file_name: str
    file_size: int | None
    extra_files: tuple[str, ...] = ()


_entry_scanners: dict[bytes, avro_scan.FieldScanner] = {}


def _entry_scanner(schema_json: bytes) -> avro_scan.FieldScanner:
    scanner = _entry_scanners.get(schema_json)
    if scanner is None:
        writer = json.loads(schema_json)
        projected = avro._project(
            writer if not isinstance(writer, list) else next((s for s in writer if isinstance(s, dict)), {}),
            avro._NAME_FIELDS,
        )
        scanner = avro_scan.FieldScanner(
            schema_json, _ENTRY_NAMES, {_VERSION_PATH: MANIFEST_VERSION}, reader_schema=projected
        )
        _entry_scanners[schema_json] = scanner
    return scanner


def manifest_file_names(data: bytes, path: str) -> list[str]:
    """The data, changelog and extra file names every entry of a manifest mentions (ADD and DELETE).

    The same names and the same refusals as :func:`avro.manifest_file_names` (which decides whenever
    the fast path cannot).
    """
    try:
        return _scan_names(data)
    except Exception:
        return avro.manifest_file_names(data, path)


def _scan_names(data: bytes) -> list[str]:
    container = avro_blocks.split_container(data)
    scanner = _entry_scanner(container.schema_json)
    pattern = scanner.pattern
    if pattern is None:
        raise _FastPathFailed("schema")
    name_group, _ = pattern.group_of(_ENTRY_NAMES[0])
    extra_group, read_extra = pattern.group_of(_ENTRY_NAMES[1])
    names: list[str] = []
    append, extend = names.append, names.extend
    for count, block in avro_blocks.iter_blocks(container):
        matches, rest = scanner.scan(block, count)
        for match in matches:
            name = match.group(name_group)
            # A string's length prefix is one byte below 64 bytes, two up to the pattern's limit.
            append((name[1:] if name[0] < 0x80 else name[2:]).decode("utf-8"))
            extra = match.group(extra_group)
            if extra != b"\x00":
                extend(read_extra(extra))
        for record in rest:
            if record.get("_VERSION") != MANIFEST_VERSION:
                raise _FastPathFailed("version")
            file = record["_FILE"]
            append(file["_FILE_NAME"])
            extend(file.get("_EXTRA_FILES") or ())
    return names


class ManifestListDecoder:
    """Manifest-list rows as :class:`ManifestRef`, each distinct block decoded once (see the module)."""

    def __init__(self) -> None:
        self._ids: dict[tuple[bytes, str, bytes], int] = {}
        self._tails: dict[tuple[bytes, bytes], tuple[bytes, int]] = {}
        self._scanners: dict[bytes, avro_scan.FieldScanner | None] = {}
        self.blocks: list[tuple[ManifestRef, ...]] = []
        # Per block: the earlier block whose rows it starts with (or -1), and how many those are.
        self.prefixes: list[tuple[int, int]] = []
        self.blocks_read = 0
        self.rows_read = 0
        self.rows_decoded = 0

    def decode(self, data: bytes, path: str) -> tuple[int, ...]:
        """Ids of the blocks of one manifest list (rows: :attr:`blocks`), in order."""
        try:
            return self._decode_blocks(data)
        except Exception:
            metas = avro.decode_manifest_list(data, path)  # the canonical decode and its refusals
            try:
                refs = tuple(ManifestRef(m.file_name, m.file_size, tuple(m.extra_files)) for m in metas)
            except (KeyError, TypeError) as exc:
                raise CorruptMetadataError(path, f"manifest list record lacks {exc}") from exc
            self.rows_read += len(refs)
            self.rows_decoded += len(refs)
            return (self._add(refs),)

    def refs(self, block_ids: tuple[int, ...]) -> list[ManifestRef]:
        return [ref for block in block_ids for ref in self.blocks[block]]

    def _add(self, refs: tuple[ManifestRef, ...], prefix: int = -1, known: int = 0) -> int:
        self.blocks.append(refs)
        self.prefixes.append((prefix, known))
        return len(self.blocks) - 1

    def new_rows(self, block_id: int, seen: set[int]) -> tuple[ManifestRef, ...]:
        """The rows of a block, without those of the earlier block it extends if that one is in ``seen``."""
        prefix, known = self.prefixes[block_id]
        rows = self.blocks[block_id]
        return rows[known:] if prefix in seen else rows

    def _scanner(self, schema_json: bytes) -> avro_scan.FieldScanner | None:
        if schema_json not in self._scanners:
            writer = json.loads(schema_json)
            fields = {f.get("name") for f in writer.get("fields", [])} if isinstance(writer, dict) else set()
            captures = [*_LIST_FIELDS, _EXTRA] if _EXTRA[0] in fields else list(_LIST_FIELDS)
            keep = {name[0]: None for name in (*captures, _VERSION_PATH)}
            scanner = avro_scan.FieldScanner(
                schema_json,
                captures,
                {_VERSION_PATH: MANIFEST_VERSION},
                reader_schema=avro._project(writer, keep) if isinstance(writer, dict) else None,
            )
            self._scanners[schema_json] = scanner if scanner.pattern is not None else None
        return self._scanners[schema_json]

    def _decode_blocks(self, data: bytes) -> tuple[int, ...]:
        container = avro_blocks.split_container(data)
        schema = container.schema_json
        scanner = self._scanner(schema)
        if scanner is None:
            raise _FastPathFailed("schema")
        ids = []
        for count, compressed in container.blocks:
            self.blocks_read += 1
            self.rows_read += count
            key = (schema, container.codec, compressed)
            block_id = self._ids.get(key)
            if block_id is None:
                block = avro_blocks.decompress(container.codec, compressed)
                block_id = self._add(*self._rows(scanner, schema, block, count))
                self._ids[key] = block_id
            ids.append(block_id)
        return tuple(ids)

    def _rows(
        self, scanner: avro_scan.FieldScanner, schema: bytes, block: bytes, count: int
    ) -> tuple[tuple[ManifestRef, ...], int, int]:
        """(the block's rows, the block it extends or -1, how many rows of it)."""
        prefix_key = (schema, block[:_PREFIX_KEY])
        known: tuple[ManifestRef, ...] = ()
        start = 0
        prefix = -1
        tail = self._tails.get(prefix_key)
        if tail is not None and len(tail[0]) <= len(block) and block.startswith(tail[0]):
            known = self.blocks[tail[1]]
            start = len(tail[0])
            prefix = tail[1]
            if len(known) > count:
                known, start, prefix = (), 0, -1
        rest_count = count - len(known)
        matches, end = scanner.pattern.scan(block[start:], rest_count) if scanner.pattern else ([], 0)
        values = scanner.pattern.values if scanner.pattern else None
        refs = [ManifestRef(*_ref_values(values(m))) for m in matches] if values else []
        tiled = len(matches) == rest_count and start + end == len(block)
        if len(matches) < rest_count:
            records = avro_blocks.decode_records(
                schema, block[start + end :], rest_count - len(matches), scanner.reader_schema
            )
            scanner._fell_back(len(records))
            for record in records:
                if not isinstance(record, dict) or record.get("_VERSION") != MANIFEST_VERSION:
                    raise _FastPathFailed("version")
                refs.append(
                    ManifestRef(
                        record["_FILE_NAME"], record["_FILE_SIZE"], tuple(record.get("_EXTRA_FILES") or ())
                    )
                )
        self.rows_decoded += rest_count
        result = known + tuple(refs)
        if tiled:
            # Only a block whose bytes are exactly its rows can be the prefix of a later one.
            self._tails[prefix_key] = (block, len(self.blocks))
        return result, prefix, len(known)


def _ref_values(values: tuple[Any, ...]) -> tuple[str, int, tuple[str, ...]]:
    if len(values) == 2:
        return values[0], values[1], ()
    return values[0], values[1], tuple(values[2] or ())


# -- planning: entries with their identity decoded, the rest of each record on first use ---------

# The ``record`` slots of the base classes, which the scanned subclasses fill on first use.
_FILE_RECORD: Any = vars(DataFileMeta)["record"]
_ENTRY_RECORD: Any = vars(ManifestEntry)["record"]

_PLAN_TOP = ["_KIND", "_PARTITION", "_BUCKET", "_TOTAL_BUCKETS"]
_PLAN_FILE = [
    "_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT", "_MIN_SEQUENCE_NUMBER", "_MAX_SEQUENCE_NUMBER",
    "_SCHEMA_ID", "_LEVEL", "_EXTRA_FILES", "_DELETE_ROW_COUNT", "_EMBEDDED_FILE_INDEX",
    "_FILE_SOURCE", "_EXTERNAL_PATH", "_FIRST_ROW_ID",
]  # fmt: skip
# Fields older writers did not have: absent from the writer schema, they read as None.
_OPTIONAL = {"_TOTAL_BUCKETS", "_DELETE_ROW_COUNT", "_EMBEDDED_FILE_INDEX", "_FILE_SOURCE", "_EXTERNAL_PATH", "_FIRST_ROW_ID"}  # fmt: skip
_KINDS = {0: FileKind.ADD, 1: FileKind.DELETE}
_NULL = b"\x00"  # a ["null", T] union holding null


class _Block:
    """The records of one block the pattern matched, decoded by fastavro when first asked for."""

    __slots__ = ("count", "data", "records", "schema_json")

    def __init__(self, schema_json: bytes, data: bytes, count: int) -> None:
        self.schema_json = schema_json
        self.data = data
        self.count = count
        self.records: list[dict[str, Any]] | None = None

    def record(self, index: int) -> dict[str, Any]:
        if self.records is None:
            self.records = avro_blocks.decode_records(self.schema_json, self.data, self.count)
        return self.records[index]


class _EntryPlan:
    """How one writer schema's entries are decoded for planning: which group holds which field."""

    def __init__(self, schema_json: bytes) -> None:
        writer = json.loads(schema_json)
        top = {f["name"]: f["type"] for f in writer.get("fields", [])} if isinstance(writer, dict) else {}
        file_type = top.get("_FILE")
        nested = (
            {f["name"]: f["type"] for f in file_type.get("fields", [])} if isinstance(file_type, dict) else {}
        )
        paths = [(n,) for n in _PLAN_TOP if n in top] + [("_FILE", n) for n in _PLAN_FILE if n in nested]
        self.scanner = avro_scan.FieldScanner(schema_json, paths, {_VERSION_PATH: MANIFEST_VERSION})
        pattern = self.scanner.pattern
        self.groups: dict[str, tuple[int, Callable[[bytes], Any]]] = {}
        # Fields whose null is the single byte 0 (a union with null first), checked without a call.
        self.null_first = {
            n for n, t in {**top, **nested}.items() if isinstance(t, list) and t[:1] == ["null"]
        }
        required = {"_KIND", "_PARTITION", "_BUCKET", "_FILE_NAME", "_LEVEL", "_EXTRA_FILES"}
        if pattern is None or not required <= {p[-1] for p in paths}:
            self.scanner.pattern = None
            return
        for path in paths:
            self.groups[path[-1]] = pattern.group_of(path)

    def get(self, match: re.Match[bytes], key: str) -> Any:
        group = self.groups.get(key)
        if group is None:
            return _MISSING
        span = match.group(group[0])
        if span == _NULL and key in self.null_first:
            return None
        return group[1](span)


_MISSING = object()


class ScannedDataFileMeta(DataFileMeta):
    """A ``_FILE`` record the pattern matched: name, level, extra files, embedded index and external
    path decoded (the identity), other fields decoded from the match when read, the full record
    (statistics, keys) from the block on first use. Once the record exists every property reads it,
    as :class:`DataFileMeta`'s do (so changes to the record show)."""

    __slots__ = ("_embedded", "_entry", "_external", "_extra", "_full", "_level", "_name")
    _name: str
    _level: int
    _extra: tuple[str, ...]
    _embedded: bytes | None
    _external: str | None

    def __init__(self, entry: ScannedManifestEntry) -> None:
        self._entry = entry
        self._full = False

    @property
    def record(self) -> dict[str, Any]:  # type: ignore[override]
        if self._full:
            return _FILE_RECORD.__get__(self, DataFileMeta)  # type: ignore[no-any-return]
        return self._entry.record["_FILE"]  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the plain :class:`DataFileMeta` of its full record (see the entry's)."""
        return (DataFileMeta, (self.record,))

    def _field(self, key: str) -> Any:
        value = self._entry._plan.get(self._entry._match, key)
        if value is _MISSING:
            return None if key in _OPTIONAL else self.record[key]
        return value

    @property
    def file_name(self) -> str:
        return self.record["_FILE_NAME"] if self._full else self._name

    @property
    def level(self) -> int:
        return self.record["_LEVEL"] if self._full else self._level

    @property
    def extra_files(self) -> list[str]:
        return (self.record.get("_EXTRA_FILES") or []) if self._full else list(self._extra)

    @property
    def embedded_index(self) -> bytes | None:
        return self.record.get("_EMBEDDED_FILE_INDEX") if self._full else self._embedded

    @property
    def external_path(self) -> str | None:
        return self.record.get("_EXTERNAL_PATH") if self._full else self._external

    @property
    def file_size(self) -> int:
        return self.record["_FILE_SIZE"] if self._full else self._field("_FILE_SIZE")  # type: ignore[no-any-return]

    @property
    def row_count(self) -> int:
        return self.record["_ROW_COUNT"] if self._full else self._field("_ROW_COUNT")  # type: ignore[no-any-return]

    @property
    def min_sequence_number(self) -> int:
        key = "_MIN_SEQUENCE_NUMBER"
        return self.record[key] if self._full else self._field(key)  # type: ignore[no-any-return]

    @property
    def max_sequence_number(self) -> int:
        key = "_MAX_SEQUENCE_NUMBER"
        return self.record[key] if self._full else self._field(key)  # type: ignore[no-any-return]

    @property
    def schema_id(self) -> int:
        return self.record["_SCHEMA_ID"] if self._full else self._field("_SCHEMA_ID")  # type: ignore[no-any-return]

    @property
    def delete_row_count(self) -> int | None:
        key = "_DELETE_ROW_COUNT"
        return self.record.get(key) if self._full else self._field(key)

    @property
    def file_source(self) -> FileSource | None:
        value = self.record.get("_FILE_SOURCE") if self._full else self._field("_FILE_SOURCE")
        return None if value is None else FileSource(value)

    @property
    def first_row_id(self) -> int | None:
        key = "_FIRST_ROW_ID"
        return self.record.get(key) if self._full else self._field(key)


class ScannedManifestEntry(ManifestEntry):
    """A manifest entry the pattern matched: kind, partition, bucket and identity decoded, the record
    from its block on first use. Every value equals the full decode's."""

    __slots__ = ("_block", "_identity", "_index", "_match", "_plan")
    _identity: tuple[Any, ...]

    def __init__(self, block: _Block, index: int, match: re.Match[bytes], plan: _EntryPlan) -> None:
        self._block = block
        self._index = index
        self._match = match
        self._plan = plan

    @property
    def record(self) -> dict[str, Any]:  # type: ignore[override]
        try:
            return _ENTRY_RECORD.__get__(self, ManifestEntry)  # type: ignore[no-any-return]
        except AttributeError:  # not decoded yet
            record = self._block.record(self._index)
            _ENTRY_RECORD.__set__(self, record)
            file = self.file
            if isinstance(file, ScannedDataFileMeta) and not file._full:
                _FILE_RECORD.__set__(file, record["_FILE"])
                file._full = True
            return record

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (for Spark tasks, process pools) as the plain entry of its full record: a match and
        its block stay in this process."""
        return (ManifestEntry, (self.record,))

    def identifier(self) -> tuple[Any, ...]:
        file = self.file
        if isinstance(file, ScannedDataFileMeta) and not file._full:
            return self._identity
        return super().identifier()  # the record exists: read it, as a decoded entry does


_entry_plans: dict[bytes, _EntryPlan] = {}


def entry_plan(schema_json: bytes) -> _EntryPlan:
    """The planning decode's plan of a writer schema (its pattern and groups), compiled once per process."""
    plan = _entry_plans.get(schema_json)
    if plan is None:
        plan = _entry_plans[schema_json] = _EntryPlan(schema_json)
    return plan


def decode_manifest_for_planning(data: bytes, path: str) -> list[ManifestEntry]:
    """A manifest's entries as :func:`avro.decode_manifest` gives them (same values, same refusals),
    with each entry's identity decoded now and the rest of it when first read."""
    try:
        return _scan_entries(data)
    except Exception:
        return avro.decode_manifest(data, path)


def _scan_entries(data: bytes) -> list[ManifestEntry]:
    container = avro_blocks.split_container(data)
    plan = entry_plan(container.schema_json)
    scanner = plan.scanner
    if scanner.pattern is None:
        raise _FastPathFailed("schema")
    groups, null_first = plan.groups, plan.null_first
    kind_g, kind_read = groups["_KIND"]
    partition_g, partition_read = groups["_PARTITION"]
    bucket_g, bucket_read = groups["_BUCKET"]
    name_g, name_read = groups["_FILE_NAME"]
    level_g, level_read = groups["_LEVEL"]
    extra_g, extra_read = groups["_EXTRA_FILES"]
    optional = [
        (groups[key][0], groups[key][1], key in null_first) if key in groups else None
        for key in ("_TOTAL_BUCKETS", "_EMBEDDED_FILE_INDEX", "_EXTERNAL_PATH")
    ]

    def read_optional(match: re.Match[bytes], which: int) -> Any:
        spec = optional[which]
        if spec is None:
            return None
        span = match.group(spec[0])
        return None if spec[2] and span == _NULL else spec[1](span)

    entries: list[ManifestEntry] = []
    append = entries.append
    for count, block in avro_blocks.iter_blocks(container):
        matches, rest = scanner.scan(block, count)
        if matches:
            source = _Block(container.schema_json, block[: matches[-1].end()], len(matches))
            for index, match in enumerate(matches):
                group = match.group
                kind = _KINDS.get(kind_read(group(kind_g)))
                if kind is None:
                    raise _FastPathFailed("kind")
                entry = ScannedManifestEntry(source, index, match, plan)
                entry.kind = kind
                entry.partition = partition = partition_read(group(partition_g))
                entry.bucket = bucket = bucket_read(group(bucket_g))
                entry.total_buckets = read_optional(match, 0)
                file = ScannedDataFileMeta(entry)
                file._name = name = name_read(group(name_g))
                file._level = level = level_read(group(level_g))
                extra = group(extra_g)
                file._extra = extra = () if extra == _NULL else tuple(extra_read(extra))
                file._embedded = embedded = read_optional(match, 1)
                file._external = external = read_optional(match, 2)
                entry.file = file
                entry._identity = (partition, bucket, level, name, extra, embedded, external)
                append(entry)
        for record in rest:
            if not isinstance(record, dict) or record.get("_VERSION") != MANIFEST_VERSION:
                raise _FastPathFailed("version")
            append(ManifestEntry(record))
    return entries
