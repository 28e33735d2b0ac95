"""Writing manifests and manifest lists, with the statistics Paimon readers prune by.

Readers skip a manifest whose ``_PARTITION_STATS`` cannot contain the partition they look for, so
stats that are too narrow silently hide data. They are computed here from the decoded partition
values of every entry, column by column (each field's own min and max, as Java's "full" mode).
"""

from __future__ import annotations

import io
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import fastavro
from fastavro import write as fastavro_write

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon import avro, binary_row
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, ManifestFileMeta, SimpleStats
from airflow_lakeformat.core.paimon.types import DataType


def partition_stats(partitions: Sequence[bytes], types: Sequence[DataType]) -> SimpleStats:
    """Column-wise min, max and null count over distinct partition rows."""
    arity = len(types)
    mins: list[Any] = [None] * arity
    maxs: list[Any] = [None] * arity
    nulls = [0] * arity
    for partition in partitions:
        for i, value in enumerate(binary_row.decode(partition, types)):
            if value is None:
                nulls[i] += 1
                continue
            if mins[i] is None or value < mins[i]:
                mins[i] = value
            if maxs[i] is None or value > maxs[i]:
                maxs[i] = value
    return SimpleStats(
        binary_row.encode(mins, types),
        binary_row.encode(maxs, types),
        [n for n in nulls] if arity else [],
    )


def new_file_name(prefix: str, writer_id: str | None = None, counter: int = 0) -> str:
    """Paimon's ``<prefix>-<uuid>-<n>`` naming; nothing parses these names, they only need to be unique."""
    return f"{prefix}-{writer_id or uuid.uuid4()}-{counter}"


def manifest_file_meta(
    file_name: str,
    file_size: int,
    entries: Sequence[ManifestEntry],
    partition_types: Sequence[DataType],
    schema_id: int,
    extra: Mapping[str, Any] | None = None,
) -> ManifestFileMeta:
    """The manifest-list row describing a manifest that holds ``entries``."""
    added = sum(1 for e in entries if e.kind is FileKind.ADD)
    distinct_partitions = list(dict.fromkeys(e.partition for e in entries))
    stats = partition_stats(distinct_partitions, partition_types)
    buckets = [e.bucket for e in entries]
    levels = [e.file.level for e in entries]
    row_ids = [e.file.first_row_id for e in entries]
    has_row_ids = bool(entries) and all(r is not None for r in row_ids)
    record: dict[str, Any] = {
        "_VERSION": 2,
        "_FILE_NAME": file_name,
        "_FILE_SIZE": file_size,
        "_NUM_ADDED_FILES": added,
        "_NUM_DELETED_FILES": len(entries) - added,
        "_PARTITION_STATS": stats.to_record(),
        "_SCHEMA_ID": max((e.file.schema_id for e in entries), default=schema_id),
        "_MIN_BUCKET": min(buckets) if buckets else None,
        "_MAX_BUCKET": max(buckets) if buckets else None,
        "_MIN_LEVEL": min(levels) if levels else None,
        "_MAX_LEVEL": max(levels) if levels else None,
        "_MIN_ROW_ID": min(r for r in row_ids if r is not None) if has_row_ids else None,
        "_MAX_ROW_ID": (
            max(
                e.file.first_row_id + e.file.row_count - 1 for e in entries if e.file.first_row_id is not None
            )
            if has_row_ids
            else None
        ),
    }
    record.update(extra or {})
    return ManifestFileMeta(record)


def write_manifest(
    write_bytes: Callable[[str, bytes], None],
    entries: Sequence[ManifestEntry],
    partition_types: Sequence[DataType],
    schema_id: int,
    compression: str = "zstd",
    file_name: str | None = None,
) -> ManifestFileMeta:
    """Encode ``entries`` as one manifest, store it with ``write_bytes(name, data)``, return its meta."""
    name = file_name or new_file_name("manifest")
    data = avro.encode_manifest(entries, compression)
    write_bytes(name, data)
    return manifest_file_meta(name, len(data), entries, partition_types, schema_id)


def _file_record(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for field in schema.get("fields", []):
        if field.get("name") == "_FILE":
            file_type = field["type"]
            if isinstance(file_type, list):  # Paimon 0.8 wrote nested records as ["null", record]
                file_type = next((t for t in file_type if isinstance(t, dict)), None)
            return file_type if isinstance(file_type, dict) else None
    return None


class RollingManifestWriter:
    """Writes manifest entries into manifests of about ``target_file_size`` bytes each.

    Java's rolling writer checks the bytes written so far every N records and starts a new file once
    they reach the target. This one writes Avro blocks and checks the file's exact size after each
    block; block lengths adapt to the measured bytes per entry so that a file closes within about one
    entry of the target (never below it). Every file but the last of a :meth:`write` call is therefore
    at least ``target_file_size`` bytes, as in Java.

    The writer schema is :func:`avro.manifest_entry_schema` plus ``extra_file_fields``. A record with
    a field outside that schema is refused (:class:`UnsupportedFormatError`) rather than silently
    losing the field, which is what fastavro would do.

    Files are stored with ``write_bytes(name, data)`` only once complete. :attr:`written` lists the
    metas of every file stored so far, across calls, so a caller can clean up after a failure.
    """

    MAX_BLOCK_RECORDS = 1000

    def __init__(
        self,
        write_bytes: Callable[[str, bytes], None],
        *,
        partition_types: Sequence[DataType],
        schema_id: int,
        target_file_size: int,
        compression: str = "zstd",
        extra_file_fields: Sequence[Mapping[str, Any]] = (),
        name_prefix: str = "manifest",
    ) -> None:
        codec = avro.CODECS.get(compression.lower())
        if codec is None:
            raise ValueError(f"unsupported manifest.compression {compression!r}")
        self._write_bytes = write_bytes
        self.partition_types = list(partition_types)
        self.schema_id = schema_id
        self.target_file_size = max(1, target_file_size)
        self._codec = codec
        schema = avro.manifest_entry_schema(extra_file_fields)
        self._parsed = fastavro.parse_schema(schema)
        self._top_fields = frozenset(f["name"] for f in schema["fields"])
        file_record = _file_record(schema)
        assert file_record is not None
        self._file_fields = frozenset(f["name"] for f in file_record["fields"])
        self._writer_id = str(uuid.uuid4())
        self._counter = 0
        self._bytes_per_entry: float | None = None
        self.written: list[ManifestFileMeta] = []

    def __call__(self, entries: Iterable[ManifestEntry]) -> list[ManifestFileMeta]:
        return self.write(entries)

    def write(self, entries: Iterable[ManifestEntry]) -> list[ManifestFileMeta]:
        """Write ``entries`` in order into one or more new manifests; return their metas in order."""
        source = iter(entries)
        metas: list[ManifestFileMeta] = []
        pending = next(source, None)
        while pending is not None:
            buffer = io.BytesIO()
            writer = fastavro_write.Writer(buffer, self._parsed, codec=self._codec, sync_interval=1 << 62)
            header = buffer.tell()
            file_entries: list[ManifestEntry] = []
            while pending is not None:
                block = [pending, *itertools.islice(source, self._block_length(buffer.tell()) - 1)]
                for entry in block:
                    self._check_fields(entry)
                    writer.write(entry.record)
                writer.flush()
                file_entries.extend(block)
                pending = next(source, None)
                self._bytes_per_entry = (buffer.tell() - header) / len(file_entries)
                if buffer.tell() >= self.target_file_size:
                    break
            metas.append(self._store(buffer.getvalue(), file_entries))
        return metas

    def _block_length(self, size: int) -> int:
        """Entries for the next block: about what is left to the target, at most MAX_BLOCK_RECORDS."""
        per_entry = self._bytes_per_entry or 64.0
        wanted = -(-(self.target_file_size - size) // max(per_entry, 1.0))
        return int(min(max(wanted, 1), self.MAX_BLOCK_RECORDS))

    def _check_fields(self, entry: ManifestEntry) -> None:
        record = entry.record
        unknown = (record.keys() - self._top_fields) | (record["_FILE"].keys() - self._file_fields)
        if unknown:
            raise UnsupportedFormatError(
                entry.file.file_name,
                f"manifest entry fields {sorted(unknown)} are not in the writer schema; "
                "pass them as extra_file_fields or they would be lost",
            )

    def _store(self, data: bytes, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        name = new_file_name("manifest", self._writer_id, self._counter)
        self._counter += 1
        self._write_bytes(name, data)
        meta = manifest_file_meta(name, len(data), entries, self.partition_types, self.schema_id)
        self.written.append(meta)
        return meta
