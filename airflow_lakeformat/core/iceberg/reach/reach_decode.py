"""What reachability reads from Iceberg manifest lists and manifests: a few fields of many records.

Expiry and orphan cleanup need, of every manifest-list row, the manifest's path, length, spec id, content
and adding snapshot (field ids 500, 501, 502, 517, 503), and of every manifest entry its status and its
file's path, content, format and size (field ids 0; 100, 134, 101, 104 under 2). A table that needs
maintenance has thousands of snapshots, so these are millions of rows; fastavro spends as long skipping the
fields nobody needs (partition summaries, column statistics, bounds) as reading the few that matter.

Algorithm:

1. The writer schema's fields are found **by field id** (Iceberg's rule; names may differ between
   writers), once per distinct schema (:class:`SchemaPlan`).
2. The fast path: :func:`~airflow_lakeformat.core.avro_blocks.split_container` frames the file, each block
   is decompressed, and an :class:`~airflow_lakeformat.core.avro_scan.FieldScanner` (a regular expression
   compiled from the writer schema) captures exactly those fields; records the pattern does not express
   (longer values, more items than its limits) are decoded by fastavro, so every record is decoded exactly
   as fastavro decodes it. The pattern's limits (:data:`ICEBERG_LIMITS`) fit Iceberg's files: absolute
   paths up to 1,023 bytes, per-column statistics of up to 128 columns with bounds up to 63 bytes (Java
   truncates bounds to 16 characters by default). Compiling such a pattern takes a few tenths of a second,
   so a writer schema is scanned only once :data:`SCAN_AFTER_RECORDS` of its records were decoded the
   reference way: small tables never pay for it, large ones pay once. It is compiled first with
   :data:`SMALL_LIMITS` (up to 31 items: a tenth of the time), and with :data:`ICEBERG_LIMITS` once
   :data:`ESCALATE_AFTER` records of the schema were left to fastavro (wider tables).
3. Anything the fast path cannot handle (a codec it lacks, a schema it cannot compile, framing it does not
   understand, a decode error) falls back to the **reference decode**: fastavro over the whole file with
   a field-id-projected reader schema for manifests (no reader schema for manifest lists: their records
   are small and schema resolution costs more than the skipped fields). The reference decode names the
   file in a :class:`~airflow_lakeformat.core.errors.CorruptMetadataError` when it cannot decode it either.

Both paths give the same rows: ``tests/unit/test_iceberg_reach_decode.py`` checks them against each other
on generated Java-shaped files and pyiceberg-written ones, and that corrupt files are refused by both; the
Iceberg and Java interop tests scan from the first record, so Java-written tables take the scanned path
(their results are compared with Java 1.10.2's ``expire_snapshots`` and ``remove_orphan_files``).

4. Files whose blocks are many and small (pyiceberg writes one block per manifest entry) are framed and
   scanned in one pass over their blocks' data joined (:mod:`~airflow_lakeformat.core.iceberg.reach.reach_frames`),
   when every block ends on a record boundary. Orphan cleanup
   takes only the live paths (:func:`decode_manifest_live_paths`), and manifest lists of fast appends,
   which carry the previous list's rows over unchanged, are decoded only as far as they are new
   (:func:`~airflow_lakeformat.core.iceberg.reach.reach_lists.decode_manifest_list_shared`), by fastavro record
   by record until a scanner pays (a chain of fast appends adds about one row per list, so it never
   compiles the lists' pattern).
5. Deflate blocks are inflated with ISA-L where installed (:func:`avro_blocks.inflate_blocks`).

Example::

    refs = decode_manifest_list(data, "s3://b/t/metadata/snap-1.avro")
    files = decode_manifest_paths(data, "s3://b/t/metadata/m0.avro")
"""

from __future__ import annotations

import copy
import functools
import io
import json
import operator
import re
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from airflow_lakeformat.core import avro_blocks, avro_scan
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.metadata.entries import STATUS_DELETED
from airflow_lakeformat.core.iceberg.metadata.manifest_decode import read_avro_metadata, record_of
from airflow_lakeformat.core.iceberg.metadata.manifests import AVRO_DECODE_ERRORS
from airflow_lakeformat.core.iceberg.reach.reach_frames import payloads_of, scan_whole, split

_DECODE_ERRORS: tuple[type[BaseException], ...] = (*AVRO_DECODE_ERRORS, StopIteration)
# What the fast path may raise on input it does not understand: the reference decode then decides.
FAST_PATH_ERRORS: tuple[type[BaseException], ...] = (
    *_DECODE_ERRORS,
    avro_blocks.UnsupportedCodec,
    avro_scan.ScanUnsupported,
    struct.error,
    *avro_blocks.INFLATE_ERRORS,
    UnicodeDecodeError,
    OverflowError,
)
ICEBERG_LIMITS = avro_scan.Limits(length=1023, items=255, long_items=128, item_length=63)
SMALL_LIMITS = avro_scan.Limits(length=1023, items=31, long_items=31, item_length=63)
ESCALATE_AFTER = 1_000  # records the SMALL_LIMITS pattern left to fastavro before ICEBERG_LIMITS is compiled
SCAN_AFTER_RECORDS = 5_000  # records of one writer schema decoded by fastavro before its pattern is compiled

MANIFEST_LIST_FIELD_IDS = {
    500: "path",
    501: "length",
    502: "spec_id",
    517: "content",
    503: "added_snapshot_id",
}
ENTRY_FIELD_IDS = {0: "status", 2: "data_file"}
DATA_FILE_FIELD_IDS = {134: "content", 100: "file_path", 101: "file_format", 104: "file_size"}
_LIST_KEYS = ("path", "length", "spec_id", "content", "added_snapshot_id")
_FILE_KEYS = ("file_path", "content", "file_format", "file_size")


CONTENT_KINDS = {0: "data-file", 1: "position-delete-file", 2: "equality-delete-file"}


@dataclass(frozen=True, slots=True)
class ManifestRef:
    """One manifest-list row, reduced to what reachability and expiry need."""

    path: str
    length: int
    spec_id: int
    content: int  # 0 data, 1 deletes (v1 lists have no content column: 0)
    added_snapshot_id: int | None


@dataclass(frozen=True, slots=True)
class ContentRef:
    """One live content file: data, position deletes (deletion-vector Puffin files too), equality deletes."""

    path: str
    content: int
    file_format: str
    file_size: int

    @property
    def kind(self) -> str:
        """The deletion-module kind (``data-file``, ``position-delete-file``, ``equality-delete-file``)."""
        return CONTENT_KINDS.get(self.content, "data-file")


def _by_id(fields: Sequence[dict[str, Any]], ids: dict[int, str]) -> dict[str, dict[str, Any]]:
    """Our key -> the writer's field, for the fields whose ``field-id`` is in ``ids``."""
    found = {}
    for fld in fields:
        key = ids.get(fld.get("field-id"))  # type: ignore[arg-type]
        if key is not None:
            found[key] = fld
    return found


class SchemaPlan:
    """How the rows of one writer schema are decoded: the reference reader schema and, once it pays, the
    scanner (compiled after :data:`SCAN_AFTER_RECORDS` records; None before, or if the schema cannot be
    expressed)."""

    def __init__(self, schema_json: bytes, reader_schema: Any, paths: dict[str, tuple[str, ...]]) -> None:
        self.schema_json = schema_json
        self.reader_schema = reader_schema  # None: decode with the writer schema
        self.paths = paths  # our key -> the Avro path of the field (its writer names)
        self.index = {key: i for i, key in enumerate(paths)}
        self.scanner: avro_scan.FieldScanner | None = None
        self.converters: dict[Any, Any] = {}  # converter factory -> the scanner's match converter
        self.records_seen = 0
        self.compiled = False
        self.limits = SMALL_LIMITS
        self.fell_back = 0  # records the pattern of SMALL_LIMITS left to fastavro
        self.writer: Any = None  # the parsed writer schema, for fastavro's record-by-record decode
        self.lock = threading.Lock()

    def scanner_for(self, records: int) -> avro_scan.FieldScanner | None:
        """The scanner once enough records of this schema were seen (``records`` more now); else None."""
        if self.compiled:
            return self.scanner
        self.records_seen += records
        if self.records_seen < SCAN_AFTER_RECORDS:
            return None
        captures = list(self.paths.values())
        scanner = avro_scan.FieldScanner(
            self.schema_json, captures, reader_schema=self.reader_schema, limits=self.limits
        )
        self.scanner = scanner if scanner.pattern is not None else None
        self.compiled = True
        return self.scanner

    def fell_back_on(self, records: int) -> None:
        """Count records the pattern did not express; past :data:`ESCALATE_AFTER` (with the small limits),
        compile the pattern of :data:`ICEBERG_LIMITS` for the files to come (called under ``lock``)."""
        if not records or self.limits is ICEBERG_LIMITS:
            return
        self.fell_back += records
        if self.fell_back >= ESCALATE_AFTER:
            self.limits, self.compiled, self.converters = ICEBERG_LIMITS, False, {}
            self.scanner_for(0)


def _list_plan(schema_json: bytes) -> SchemaPlan:
    writer = json.loads(schema_json)
    fields = _by_id(writer.get("fields", []), MANIFEST_LIST_FIELD_IDS)
    if "path" not in fields:
        raise ValueError("the Avro schema is not an Iceberg manifest_file schema (field id 500 missing)")
    return SchemaPlan(schema_json, None, {key: (fld["name"],) for key, fld in fields.items()})


def _manifest_plan(schema_json: bytes) -> SchemaPlan:
    writer = json.loads(schema_json)
    top = _by_id(writer.get("fields", []), ENTRY_FIELD_IDS)
    data_file = record_of(top["data_file"]["type"]) if "data_file" in top else None
    if data_file is None or "status" not in top:
        raise ValueError(
            "the Avro schema is not an Iceberg manifest_entry schema (field ids 0 and 2 missing)"
        )
    nested = _by_id(data_file.get("fields", []), DATA_FILE_FIELD_IDS)
    if "file_path" not in nested:
        raise ValueError("the data_file schema lacks field id 100 (file_path)")
    df_name = top["data_file"]["name"]
    paths: dict[str, tuple[str, ...]] = {"status": (top["status"]["name"],)}
    paths.update({key: (df_name, fld["name"]) for key, fld in nested.items()})
    # The reference reader schema: the writer's, keeping only the fields above (fastavro skips the rest).
    projected = copy.deepcopy(writer)
    projected["fields"] = [f for f in projected["fields"] if f.get("field-id") in ENTRY_FIELD_IDS]
    for fld in projected["fields"]:
        record = record_of(fld["type"])
        if fld.get("field-id") == 2 and record is not None:
            record["fields"] = [
                f for f in record.get("fields", []) if f.get("field-id") in DATA_FILE_FIELD_IDS
            ]
    return SchemaPlan(schema_json, fastavro.parse_schema(projected), paths)


class _Plans:
    """One plan per distinct writer schema (thread-safe; the schema's JSON bytes are the key)."""

    def __init__(self, build: Callable[[bytes], SchemaPlan]) -> None:
        self._build = build
        self._cache: dict[bytes, SchemaPlan] = {}
        self._lock = threading.Lock()

    def get(self, schema_json: bytes) -> SchemaPlan:
        with self._lock:
            found = self._cache.get(schema_json)
        if found is None:
            found = self._build(schema_json)
            with self._lock:
                found = self._cache.setdefault(schema_json, found)
        return found

    def compile_all(self) -> None:
        """Compile the scanner of every schema seen so far (see :func:`scanners_ready`)."""
        with self._lock:
            plans = list(self._cache.values())
        for plan in plans:
            with plan.lock:
                if not plan.compiled:
                    plan.records_seen = max(plan.records_seen, SCAN_AFTER_RECORDS)
                    plan.scanner_for(0)

    def all_compiled(self) -> bool:
        """Whether a schema was seen and every one seen has had its scanner compiled (or found none)."""
        with self._lock:
            return bool(self._cache) and all(plan.compiled for plan in self._cache.values())


LIST_PLANS = _Plans(_list_plan)
MANIFEST_PLANS = _Plans(_manifest_plan)


def scanners_ready(kind: str, *, compile_now: bool = False) -> bool:
    """Whether the writer schemas of ``kind`` (``"manifest-list"`` or ``"manifest"``) seen so far all have
    their scanner compiled: work split over processes after that point is not compiled twice.

    Args:
        kind: ``"manifest-list"`` or ``"manifest"``.
        compile_now: Compile the scanners of the schemas seen so far without waiting for
            :data:`SCAN_AFTER_RECORDS` records (the caller knows a large read follows).
    """
    plans = LIST_PLANS if kind == "manifest-list" else MANIFEST_PLANS
    if compile_now:
        plans.compile_all()
    return plans.all_compiled()


Converter = Callable[["re.Match[bytes]"], Any]


def converter_for(plan: SchemaPlan, make: Callable[[SchemaPlan, avro_scan.RecordPattern], Converter],
               pattern: avro_scan.RecordPattern) -> Converter:  # fmt: skip
    convert = plan.converters.get(make)
    if convert is None:
        convert = plan.converters[make] = make(plan, pattern)
    return convert


def _scan(data: bytes, plans: _Plans, make: Callable[[SchemaPlan, avro_scan.RecordPattern], Converter],
          of_record: Callable[[SchemaPlan, tuple[Any, ...]], Any]) -> list[Any] | None:  # fmt: skip
    """The converted records of the file, in file order (None where a converter says to drop one), or None
    when the reference decode is to run. ``make`` builds a plan's converter of pattern matches (once per
    plan); ``of_record`` converts the captured fields of a record fastavro decoded."""
    container = split(data)
    plan = plans.get(container.schema_json)
    with plan.lock:  # the threads reading files of one schema share its plan and scanner
        scanner = plan.scanner_for(sum(count for count, _ in container.blocks))
        if scanner is None or scanner.pattern is None:
            return None
        convert = converter_for(plan, make, scanner.pattern)
        payloads = payloads_of(container)
        whole = scan_whole(scanner.pattern, payloads)
        if whole is not None:
            return list(map(convert, whole[0]))
        out: list[Any] = []
        fell_back = 0
        for count, block in payloads:
            matches, rest = scanner.scan(block, count)
            out.extend(map(convert, matches))
            out.extend(of_record(plan, scanner.row_of(record)) for record in rest)
            fell_back += len(rest)
        plan.fell_back_on(fell_back)
    return out


def _int(value: Any) -> int:
    return int(value or 0)


_ROW_CACHE_LIMIT = 100_000  # distinct manifest-list rows remembered per schema (each a few hundred bytes)


def _list_ref(plan: SchemaPlan, row: tuple[Any, ...]) -> ManifestRef:
    path_i, len_i, spec_i, content_i, added_i = (plan.index.get(key) for key in _LIST_KEYS)
    return ManifestRef(
        path=row[path_i],  # type: ignore[index]
        length=_int(row[len_i]) if len_i is not None else 0,
        spec_id=_int(row[spec_i]) if spec_i is not None else 0,
        content=_int(row[content_i]) if content_i is not None else 0,
        added_snapshot_id=row[added_i] if added_i is not None else None,
    )


def list_converter(plan: SchemaPlan, pattern: avro_scan.RecordPattern) -> Converter:
    """Manifest-list rows repeat from one snapshot's list to the next (every list carries the manifests of
    the previous one): a row whose bytes were decoded before is that same :class:`ManifestRef`."""
    values = pattern.values
    seen: dict[bytes, ManifestRef] = {}

    def convert(match: re.Match[bytes]) -> ManifestRef:
        raw = match.group(0)
        ref = seen.get(raw)
        if ref is None:
            ref = _list_ref(plan, values(match))
            if len(seen) >= _ROW_CACHE_LIMIT:
                seen.clear()
            seen[raw] = ref
        return ref

    return convert


def _content_ref(plan: SchemaPlan, row: tuple[Any, ...]) -> ContentRef | None:
    if row[plan.index["status"]] == STATUS_DELETED:
        return None
    path_i, content_i, format_i, size_i = (plan.index.get(key) for key in _FILE_KEYS)
    return ContentRef(
        path=row[path_i],  # type: ignore[index]
        content=_int(row[content_i]) if content_i is not None else 0,
        file_format=str(row[format_i] or "").lower() if format_i is not None else "",
        file_size=_int(row[size_i]) if size_i is not None else 0,
    )


def _entry_converter(plan: SchemaPlan, pattern: avro_scan.RecordPattern) -> Converter:
    """Status first: a DELETED entry is dropped before anything else of it is decoded."""
    fields = {key: pattern.group_of(path) for key, path in plan.paths.items()}
    status_g, status_r = fields["status"]
    path_g, path_r = fields["file_path"]
    optional = [fields.get(key) for key in ("content", "file_format", "file_size")]
    content_f, format_f, size_f = optional

    def convert(match: re.Match[bytes]) -> ContentRef | None:
        group = match.group
        if status_r(group(status_g)) == STATUS_DELETED:
            return None
        return ContentRef(
            path=path_r(group(path_g)),
            content=_int(content_f[1](group(content_f[0]))) if content_f else 0,
            file_format=str(format_f[1](group(format_f[0])) or "").lower() if format_f else "",
            file_size=_int(size_f[1](group(size_f[0]))) if size_f else 0,
        )

    return convert


def _path_of(plan: SchemaPlan, row: tuple[Any, ...]) -> str | None:
    if row[plan.index["status"]] == STATUS_DELETED:
        return None
    return row[plan.index["file_path"]]  # type: ignore[no-any-return]


_LIVE = (b"\x00", b"\x02")  # status EXISTING (0) and ADDED (1), as one-byte varints


def _path_converter(plan: SchemaPlan, pattern: avro_scan.RecordPattern) -> Converter:
    """Only the path of a live entry (orphan cleanup needs nothing else); None for a DELETED one."""
    status_g, status_r = pattern.group_of(plan.paths["status"])
    path_g, path_r = pattern.group_of(plan.paths["file_path"])

    def convert(match: re.Match[bytes]) -> str | None:
        status = match.group(status_g)
        if status not in _LIVE and status_r(status) == STATUS_DELETED:
            return None
        return path_r(match.group(path_g))  # type: ignore[no-any-return]

    return convert


def decode_manifest_list(data: bytes, location: str) -> list[ManifestRef]:
    """The rows of a manifest list, reduced to :class:`ManifestRef` (module docstring).

    Args:
        data: The file's bytes.
        location: Its location, named in errors.

    Raises:
        CorruptMetadataError: Not an Iceberg manifest list, or undecodable (truncated, garbage).
    """
    try:
        refs = _scan(data, LIST_PLANS, list_converter, _list_ref)
    except FAST_PATH_ERRORS:
        refs = None
    return _reference_manifest_list(data, location) if refs is None else refs


def decode_manifest_paths(data: bytes, location: str) -> list[ContentRef]:
    """The live content files of one manifest (status ADDED or EXISTING), in file order (module docstring).

    Args:
        data: The file's bytes.
        location: Its location, named in errors.

    Raises:
        CorruptMetadataError: Not an Iceberg manifest, or undecodable (truncated, garbage).
    """
    try:
        refs = _scan(data, MANIFEST_PLANS, _entry_converter, _content_ref)
    except FAST_PATH_ERRORS:
        refs = None
    if refs is None:
        return _reference_manifest_paths(data, location)
    return [ref for ref in refs if ref is not None]


def decode_manifest_live_paths(data: bytes, location: str) -> list[str]:
    """The paths of the live content files of one manifest, in file order: :func:`decode_manifest_paths`
    without building a :class:`ContentRef` per entry (what orphan cleanup's valid set needs).

    Args:
        data: The file's bytes.
        location: Its location, named in errors.

    Raises:
        CorruptMetadataError: Not an Iceberg manifest, or undecodable (truncated, garbage).
    """
    try:
        paths = _scan(data, MANIFEST_PLANS, _path_converter, _path_of)
    except FAST_PATH_ERRORS:
        paths = None
    if paths is None:
        return [ref.path for ref in _reference_manifest_paths(data, location)]
    return list(filter(functools.partial(operator.is_not, None), paths))


# -- the reference decode (fastavro over the whole file) -----------------------------------------


def _reference_manifest_list(data: bytes, location: str) -> list[ManifestRef]:
    try:
        plan = LIST_PLANS.get(read_avro_metadata(data)["avro.schema"])
        records: Any = fastavro.reader(io.BytesIO(data))
        return [list_ref_of_record(plan, record) for record in records]
    except _DECODE_ERRORS as exc:
        raise CorruptMetadataError(
            location, f"not a valid manifest list ({type(exc).__name__}: {exc})"
        ) from exc


def list_ref_of_record(plan: SchemaPlan, record: dict[str, Any]) -> ManifestRef:
    p = plan.paths
    return ManifestRef(
        path=record[p["path"][0]],
        length=_int(record.get(p["length"][0])) if "length" in p else 0,
        spec_id=_int(record.get(p["spec_id"][0])) if "spec_id" in p else 0,
        content=_int(record.get(p["content"][0])) if "content" in p else 0,
        added_snapshot_id=record.get(p["added_snapshot_id"][0]) if "added_snapshot_id" in p else None,
    )


def _reference_manifest_paths(data: bytes, location: str) -> list[ContentRef]:
    try:
        plan = MANIFEST_PLANS.get(read_avro_metadata(data)["avro.schema"])
        p = plan.paths
        status_k, (df_k, path_k) = p["status"][0], p["file_path"]
        content_k, format_k, size_k = (
            p[k][1] if k in p else None for k in ("content", "file_format", "file_size")
        )
        rows = []
        records: Any = fastavro.reader(io.BytesIO(data), reader_schema=plan.reader_schema)
        for record in records:
            if record[status_k] == STATUS_DELETED:
                continue
            df = record[df_k]
            rows.append(
                ContentRef(
                    path=df[path_k],
                    content=_int(df.get(content_k)) if content_k else 0,
                    file_format=str(df.get(format_k) or "").lower() if format_k else "",
                    file_size=_int(df.get(size_k)) if size_k else 0,
                )
            )
        return rows
    except _DECODE_ERRORS as exc:
        raise CorruptMetadataError(location, f"not a valid manifest ({type(exc).__name__}: {exc})") from exc


def reference_decode_manifest_list(data: bytes, location: str) -> list[ManifestRef]:
    """:func:`decode_manifest_list` through fastavro only (what the fast path is checked against)."""
    return _reference_manifest_list(data, location)


def reference_decode_manifest_paths(data: bytes, location: str) -> list[ContentRef]:
    """:func:`decode_manifest_paths` through fastavro only (what the fast path is checked against)."""
    return _reference_manifest_paths(data, location)


__all__ = [
    "CONTENT_KINDS",
    "DATA_FILE_FIELD_IDS",
    "ENTRY_FIELD_IDS",
    "MANIFEST_LIST_FIELD_IDS",
    "ContentRef",
    "ManifestRef",
    "decode_manifest_list",
    "decode_manifest_live_paths",
    "decode_manifest_paths",
    "reference_decode_manifest_list",
    "reference_decode_manifest_paths",
]
