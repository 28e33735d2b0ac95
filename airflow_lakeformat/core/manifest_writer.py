"""Writing manifests and manifest lists, with the statistics Paimon readers prune by.

Readers skip a manifest whose ``_PARTITION_STATS`` cannot contain the partition they look for, so
stats that are too narrow silently hide data. They are computed here from the decoded partition
values of every entry, column by column (each field's own min and max, as Java's "full" mode).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow_lakeformat.core import avro, binary_row
from airflow_lakeformat.core.manifest import FileKind, ManifestEntry, ManifestFileMeta, SimpleStats
from airflow_lakeformat.core.types import DataType


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
