"""A Paimon table as the facade's read methods show it: snapshots, refs, live files, manifests, statistics.

Each function reads only what its answer needs and returns the neutral records of
``core/table_info.py`` and ``core/statistics.py`` (the same records the Iceberg side builds):

- :func:`snapshot_infos`: every snapshot file of the branch, parsed (no manifest is read).
- :func:`file_infos`: the live data files of a snapshot (``live_files.live_entries``: base then delta
  manifests merged with Paimon's identity rule), paths made full from the table's root.
- :func:`manifest_infos`: the base and delta data manifests of a snapshot's manifest lists.
- :func:`table_statistics`: counts and sizes of the latest snapshot's live data files and manifests,
  the deletion-vector index files of its index manifest (Paimon's delete files), and small files by the
  one rule of ``core/statistics.py`` against ``CoreOptions.targetFileSize(hasPrimaryKey)``.
- :func:`inspect_table`: the statistics with the schema, partition keys, options and refs.
"""

from __future__ import annotations

from typing import Any

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import ManifestFileMeta
from airflow_lakeformat.core.paimon.options import DEFAULTS
from airflow_lakeformat.core.paimon.paths import INDEX_DIR, DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress
from airflow_lakeformat.core.statistics import TableStatistics
from airflow_lakeformat.core.table_info import (
    FileInfo,
    ManifestInfo,
    RefInfo,
    SnapshotInfo,
    TableInspection,
    property_row,
)
from airflow_lakeformat.core.units import parse_memory_size

#: ``CoreOptions.targetFileSize(hasPrimaryKey)`` when ``target-file-size`` is not set.
PRIMARY_KEY_TARGET_FILE_SIZE = 128 * 1024 * 1024
APPEND_TARGET_FILE_SIZE = 256 * 1024 * 1024
#: The index type of a deletion-vector index file (``DeletionVectorsIndexFile.DELETION_VECTORS_INDEX``).
DELETION_VECTORS_INDEX = "DELETION_VECTORS"


def target_file_size(table: Table) -> int:
    """The table's ``target-file-size``, else Paimon's default: 128 MiB with primary keys, 256 MiB without."""
    raw = table.schema.options.get("target-file-size")
    if raw is not None:
        return parse_memory_size(raw)
    return PRIMARY_KEY_TARGET_FILE_SIZE if table.schema.primary_keys else APPEND_TARGET_FILE_SIZE


def snapshot_info(snapshot: Snapshot) -> SnapshotInfo:
    """One snapshot as the facade's record (Paimon's history is linear: the parent is ``id - 1``)."""
    summary = {
        "commitKind": snapshot.commit_kind.value,
        "commitUser": snapshot.commit_user,
        "commitIdentifier": str(snapshot.commit_identifier),
    }
    for key, value in (
        ("deltaRecordCount", snapshot.delta_record_count),
        ("changelogRecordCount", snapshot.changelog_record_count),
        ("watermark", snapshot.watermark),
    ):
        if value is not None:
            summary[key] = str(value)
    return SnapshotInfo(
        id=snapshot.id,
        parent_id=snapshot.id - 1 if snapshot.id > 1 else None,
        timestamp_ms=snapshot.time_millis,
        operation=snapshot.commit_kind.value,
        schema_id=snapshot.schema_id,
        total_record_count=snapshot.total_record_count,
        summary=summary,
    )


def snapshot_infos(table: Table) -> list[SnapshotInfo]:
    """Every snapshot of the table's branch, ascending (one removed while listing is left out)."""
    return [snapshot_info(s) for s in table.read_snapshots(table.snapshot_manager.list_snapshot_ids())]


def ref_infos(table: Table) -> dict[str, RefInfo]:
    """``main`` (the branch opened, at its latest snapshot) and every tag, by name."""
    manager = table.snapshot_manager
    refs = {table.branch: RefInfo(table.branch, "branch", manager.latest_snapshot_id())}
    for name, tag in manager.tags().items():
        refs[name] = RefInfo(name, "tag", tag.id)
    return refs


def file_infos(table: Table, snapshot: Snapshot, progress: Progress = NO_PROGRESS) -> list[FileInfo]:
    """The live data files of ``snapshot``, by path; ``path`` is the full URI (external paths as written)."""
    paths = DataFilePaths(table.schema)
    result = []
    for entry in live_entries(table, snapshot, progress):
        f = entry.file
        path = f.external_path or table.io.uri(table.io.join(table.root, paths.relative_path(entry)))
        extra = {
            "fileName": f.file_name,
            "bucket": entry.bucket,
            "level": f.level,
            "minSequenceNumber": f.min_sequence_number,
            "maxSequenceNumber": f.max_sequence_number,
            "schemaId": f.schema_id,
        }
        partition = paths.partitions.to_json(entry.partition)
        result.append(FileInfo(path, "data", partition, f.row_count, f.file_size, extra))
    return sorted(result, key=lambda info: info.path)


def manifest_infos(table: Table, snapshot: Snapshot) -> list[ManifestInfo]:
    """The data manifests of ``snapshot``, base list first, then delta."""
    base, delta = table.data_manifests(snapshot)

    def info(meta: ManifestFileMeta, kind: str) -> ManifestInfo:
        return ManifestInfo(
            path=table.io.uri(table.io.join(table.manifest_dir, meta.file_name)),
            content="data",
            file_size=meta.file_size,
            added_files_count=meta.num_added_files,
            deleted_files_count=meta.num_deleted_files,
            extra={
                "fileName": meta.file_name,
                "list": kind,
                "schemaId": meta.schema_id,
                "minBucket": meta.min_bucket,
                "maxBucket": meta.max_bucket,
                "minLevel": meta.min_level,
                "maxLevel": meta.max_level,
            },
        )

    return [info(m, "base") for m in base] + [info(m, "delta") for m in delta]


def deletion_vector_sizes(table: Table, snapshot: Snapshot) -> list[int]:
    """The sizes of the deletion-vector index files ``snapshot``'s index manifest lists (none without one)."""
    if not snapshot.index_manifest:
        return []
    from airflow_lakeformat.core.paimon.maintenance.references import decode_index_manifest

    path = table.io.join(table.manifest_dir, snapshot.index_manifest)
    files = decode_index_manifest(table.io.read_bytes(path), table.io.uri(path))
    sizes = []
    for ref in files:
        if ref.index_type != DELETION_VECTORS_INDEX:
            continue
        if ref.file_size is None:
            location = ref.external_path or table.io.join(table.root, INDEX_DIR, ref.file_name)
            sizes.append(table.io.size(location))
        else:
            sizes.append(ref.file_size)
    return sizes


def table_statistics(
    table: Table,
    snapshot: Snapshot | None = None,
    progress: Progress = NO_PROGRESS,
    snapshot_count: int | None = None,
) -> TableStatistics:
    """The statistics of ``snapshot`` (default: the latest) and the number of snapshots of the branch
    (``snapshot_count`` when the caller counted them, else the snapshot files listed)."""
    manager = table.snapshot_manager
    snapshot = snapshot if snapshot is not None else manager.latest_snapshot()
    if snapshot_count is None:
        snapshot_count = len(manager.list_snapshot_ids())
    entries = live_entries(table, snapshot, progress) if snapshot else []
    manifests = [m for group in table.data_manifests(snapshot) for m in group] if snapshot else []
    return TableStatistics.build(
        format="paimon",
        table=table.uri,
        snapshot_id=snapshot.id if snapshot else None,
        snapshot_count=snapshot_count,
        target_file_size=target_file_size(table),
        data_files=((e.file.file_size, e.file.row_count, e.partition) for e in entries),
        delete_files=deletion_vector_sizes(table, snapshot) if snapshot else [],
        manifests=(m.file_size for m in manifests),
    )


def _properties(table: Table) -> dict[str, dict[str, Any]]:
    options = table.schema.table_options
    defaults = dict(DEFAULTS)
    if table.schema.primary_keys:
        defaults["target-file-size"] = "128 mb"  # CoreOptions.targetFileSize(hasPrimaryKey=true)
    names = sorted(set(defaults) | set(options.raw))
    return {
        name: property_row(
            options.raw[name] if name in options.raw else options.get(name),
            defaults.get(name),
            name in options.raw,
        )
        for name in names
    }


def inspect_table(table: Table, progress: Progress = NO_PROGRESS) -> TableInspection:
    """Statistics, schema, partitioning, options, refs and Paimon's own facts (snapshot range, consumers,
    branches) of the table's latest snapshot.

    Every snapshot file is parsed, since the inspection reports the snapshot range: an unreadable one is
    CorruptMetadataError naming it, not a count that includes it.
    """
    schema = table.schema
    manager = table.snapshot_manager
    latest = manager.latest_snapshot()
    history = table.read_snapshots(manager.list_snapshot_ids())
    return TableInspection(
        format="paimon",
        table=table.uri,
        statistics=table_statistics(table, latest, progress, snapshot_count=len(history)),
        schema={
            "id": schema.id,
            "versions": len(table.schema_ids()),
            "fields": [
                {"id": f.id, "name": f.name, "type": f.type.sql(), "required": not f.type.nullable}
                for f in schema.fields
            ],
            "primaryKeys": list(schema.primary_keys),
        },
        partitioning=[{"name": k, "source": k, "transform": "identity"} for k in schema.partition_keys],
        properties=_properties(table),
        refs=ref_infos(table),
        details={
            "earliestSnapshotId": manager.earliest_snapshot_id(),
            "latestSnapshotId": latest.id if latest else None,
            "latestTimestampMs": latest.time_millis if latest else None,
            "latestOperation": latest.commit_kind.value if latest else None,
            "consumers": {c.consumer_id: c.next_snapshot for c in manager.consumers()},
            "branches": manager.branches(),
        },
    )
