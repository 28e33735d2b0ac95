"""The ``files`` JSON document: the live data and delete files of a snapshot, branch or tag.

Built on ``live_files.live_files`` (each manifest decoded once, inheritance applied, reference 1.5/1.7),
with partitions rendered by ``partition_values``. Sorted deterministically by content (data, position
deletes, equality deletes), path, then content offset (several v3 deletion vectors can share a Puffin
file), then manifest path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.types import IcebergType

from airflow_lakeformat.core.iceberg.metadata.entries import LiveFile
from airflow_lakeformat.core.iceberg.metadata.live_files import ManifestDecoder, live_files
from airflow_lakeformat.core.iceberg.metadata.partition_values import partition_json, partition_result_types
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress
from airflow_lakeformat.core.table_info import FileInfo


class PartitionRenderer:
    """Renders partition tuples of any spec of one table (result types computed once per spec)."""

    def __init__(self, table: IcebergTable) -> None:
        metadata = table.metadata
        self._specs = metadata.specs()
        current = metadata.schema()
        self._schemas = [current, *[s for s in metadata.schemas if s.schema_id != current.schema_id]]
        self._types: dict[int, tuple[PartitionSpec | None, Sequence[IcebergType | None]]] = {}

    def __call__(self, spec_id: int, values: tuple[object, ...]) -> dict[str, Any]:
        if spec_id not in self._types:
            found = self._specs.get(spec_id)
            self._types[spec_id] = (found, partition_result_types(found, self._schemas) if found else [])
        spec, types = self._types[spec_id]
        return partition_json(spec, types, values)


def sort_key(f: LiveFile) -> tuple[int, str, int, str]:
    return (f.content, f.path, f.content_offset if f.content_offset is not None else -1, f.manifest_path)


def file_info(f: LiveFile, render: PartitionRenderer) -> FileInfo:
    """One live file as the facade's record (v3 deletion-vector fields only when present)."""
    extra: dict[str, Any] = {
        "fileFormat": f.file_format,
        "specId": f.spec_id,
        "dataSequenceNumber": f.data_sequence_number,
        "fileSequenceNumber": f.file_sequence_number,
    }
    if f.referenced_data_file is not None:
        extra["referencedDataFile"] = f.referenced_data_file
    if f.content_offset is not None:
        extra["contentOffset"] = f.content_offset
        extra["contentSizeInBytes"] = f.content_size
    return FileInfo(
        path=f.path,
        content=f.content_name,
        partition=render(f.spec_id, f.partition),
        record_count=f.record_count,
        file_size=f.file_size,
        extra=extra,
    )


def file_row(f: LiveFile, render: PartitionRenderer) -> dict[str, Any]:
    """One live file as a JSON object, the record's ``to_json()``."""
    return file_info(f, render).to_json()


def file_infos(
    table: IcebergTable,
    snapshot_id: int | None = None,
    ref: str | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> tuple[int | None, list[FileInfo]]:
    """The snapshot id chosen (None for an empty table) and its live files, sorted (see the module)."""
    snapshot = table.snapshot(snapshot_id, ref)
    files = [] if snapshot is None else live_files(table, snapshot, decoder, progress)
    render = PartitionRenderer(table)
    chosen = None if snapshot is None else snapshot.snapshot_id
    return chosen, [file_info(f, render) for f in sorted(files, key=sort_key)]


def files_document(
    table: IcebergTable,
    snapshot_id: int | None = None,
    ref: str | None = None,
    decoder: ManifestDecoder | None = None,
    progress: Progress = NO_PROGRESS,
) -> dict[str, Any]:
    """The live data and delete files at a snapshot (default: current), or at the head of a branch or tag.

    Args:
        table: The table.
        snapshot_id: A snapshot id.
        ref: A branch or tag name (exclusive with ``snapshot_id``).
        decoder: Manifest decoder (default: fastavro, projected).
        progress: Progress reporter.

    Returns:
        ``{"table", "format": "iceberg", "snapshot", "files": [{path, content, partition, recordCount,
        fileSize, fileFormat, specId, dataSequenceNumber, fileSequenceNumber}]}``; ``snapshot`` is None and ``files``
        empty for a table without snapshots. Deletion vectors also carry ``referencedDataFile``,
        ``contentOffset`` and ``contentSizeInBytes``.

    Raises:
        SnapshotNotFoundError: Unknown snapshot id.
        TagNotFoundError: Unknown branch or tag.
        MissingMetadataError: A manifest list or manifest is missing.
        CorruptMetadataError: One cannot be decoded.

    Example:
        >>> doc = files_document(open_table("/wh/events"), ref="nightly")  # doctest: +SKIP
        >>> sum(f["recordCount"] for f in doc["files"] if f["content"] == "data")  # doctest: +SKIP
    """
    chosen, files = file_infos(table, snapshot_id, ref, decoder, progress)
    return {
        "table": table.name,
        "format": "iceberg",
        "snapshot": chosen,
        "files": [f.to_json() for f in files],
    }
