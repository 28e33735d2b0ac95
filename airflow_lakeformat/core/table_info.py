"""What the facade's read methods return, the same records for both formats.

``table.snapshots()`` gives :class:`SnapshotInfo`, ``table.refs()`` :class:`RefInfo`, ``table.files()``
:class:`FileInfo`, ``table.manifests()`` :class:`ManifestInfo` and ``table.inspect()``
:class:`TableInspection`. Each has ``to_json()``, the document the CLI prints: Iceberg's names for the
shared concepts (``path`` as a full URI, ``recordCount``, ``fileSize``, ``timestampMs``), camelCase keys,
and what only one format has in ``extra`` (flattened into the document) or ``details``.

This module is neutral: it imports no format; each format builds these records from its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.formats import TableFormat
from airflow_lakeformat.core.statistics import TableStatistics


@dataclass(frozen=True)
class SnapshotInfo:
    """One snapshot.

    Attributes:
        id: the snapshot id.
        parent_id: Iceberg's parent snapshot; Paimon's history is linear: ``id - 1`` (None for id 1).
        timestamp_ms: commit time, epoch milliseconds.
        operation: Iceberg's ``operation`` (append, overwrite, delete, replace) or Paimon's commit kind
            (APPEND, COMPACT, OVERWRITE, ANALYZE).
        schema_id: the schema the snapshot was written with.
        total_record_count: records in the table after the commit where the metadata says so (Iceberg
            summary ``total-records``, Paimon ``totalRecordCount``), else None.
        summary: the format's commit summary as a flat string map (Iceberg's snapshot summary; Paimon's
            commitKind, commitUser, commitIdentifier, deltaRecordCount, changelogRecordCount, watermark).
        extra: fields only one format has (Iceberg: sequenceNumber, manifestList).
    """

    id: int
    parent_id: int | None
    timestamp_ms: int
    operation: str | None
    schema_id: int | None
    total_record_count: int | None
    summary: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parentId": self.parent_id,
            "timestampMs": self.timestamp_ms,
            "operation": self.operation,
            "schemaId": self.schema_id,
            "totalRecordCount": self.total_record_count,
            **self.extra,
            "summary": self.summary,
        }

    def __repr__(self) -> str:
        return f"<Snapshot {self.id} {self.operation} at {self.timestamp_ms}>"


@dataclass(frozen=True)
class RefInfo:
    """A branch or tag: the snapshot it points to, and Iceberg's retention settings (None on Paimon)."""

    name: str
    type: str
    snapshot_id: int | None
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "snapshotId": self.snapshot_id,
            "maxRefAgeMs": self.max_ref_age_ms,
            "maxSnapshotAgeMs": self.max_snapshot_age_ms,
            "minSnapshotsToKeep": self.min_snapshots_to_keep,
        }


@dataclass(frozen=True)
class FileInfo:
    """One live file of a snapshot.

    Attributes:
        path: the file's full URI (or absolute local path), as a reader opens it.
        content: ``data``, ``position-deletes`` or ``equality-deletes`` (Paimon: always ``data``).
        partition: the partition values, by partition field name (``{}`` when unpartitioned).
        record_count: records the metadata counts in the file.
        file_size: its size in bytes.
        extra: fields only one format has (Paimon: fileName, bucket, level, sequence numbers, schemaId;
            Iceberg: fileFormat, specId, sequence numbers, deletion-vector fields).
    """

    path: str
    content: str
    partition: dict[str, Any]
    record_count: int
    file_size: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "content": self.content,
            "partition": self.partition,
            "recordCount": self.record_count,
            "fileSize": self.file_size,
            **self.extra,
        }

    def __repr__(self) -> str:
        return f"<FileInfo {self.content} {self.path} ({self.record_count} records, {self.file_size} B)>"


@dataclass(frozen=True)
class ManifestInfo:
    """One manifest a snapshot reads.

    Attributes:
        path: its full URI.
        content: ``data`` or ``deletes`` (Paimon: ``data``).
        file_size: its size in bytes.
        added_files_count: ADD entries it holds.
        deleted_files_count: DELETE entries it holds.
        extra: fields only one format has (Paimon: fileName, list base/delta, schemaId, bucket and level ranges;
            Iceberg: specId, sequence numbers, addedSnapshotId, existing and row counts).
    """

    path: str
    content: str
    file_size: int
    added_files_count: int | None
    deleted_files_count: int | None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "content": self.content,
            "fileSize": self.file_size,
            "addedFilesCount": self.added_files_count,
            "deletedFilesCount": self.deleted_files_count,
            **self.extra,
        }


@dataclass(frozen=True)
class TableInspection:
    """What ``table.inspect()`` returns: the statistics and the table's definition.

    Attributes:
        format: ``"paimon"`` or ``"iceberg"``.
        table: the table's URI or identifier.
        statistics: the :class:`TableStatistics` of the current snapshot.
        schema: ``{"id", "versions", "fields": [{"id", "name", "type", "required"}], "primaryKeys"}``
            (Iceberg's identifier fields are its primary keys).
        partitioning: the partition fields, ``[{"name", "source", "transform"}]`` (Paimon: identity).
        properties: ``{name: {"value", "default", "set"}}``: every property the table sets and every
            maintenance-relevant one with its default (Iceberg: Java's ``TableProperties`` defaults, values
            typed like the default; Paimon: ``CoreOptions`` defaults, values as written).
        refs: branches and tags by name (Paimon: ``main`` and its tags).
        details: what only one format has (Iceberg: format version, locations, uuid, manifest
            breakdown, the split-offsets check; Paimon: snapshot range, consumers, branches).
    """

    format: TableFormat
    table: str
    statistics: TableStatistics
    schema: dict[str, Any]
    partitioning: list[dict[str, Any]]
    properties: dict[str, dict[str, Any]]
    refs: dict[str, RefInfo]
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "format": self.format,
            "statistics": self.statistics.to_json(),
            "schema": self.schema,
            "partitioning": self.partitioning,
            "properties": self.properties,
            "refs": {name: ref.to_json() for name, ref in self.refs.items()},
            "details": self.details,
        }

    def summary(self) -> str:
        return self.statistics.summary()

    def __repr__(self) -> str:
        return f"<TableInspection {self.summary()}>"


def property_row(value: Any, default: Any, is_set: bool) -> dict[str, Any]:
    """One ``properties`` entry of :class:`TableInspection`."""
    return {"value": value, "default": default, "set": is_set}
