"""The starting snapshot of an Iceberg data compaction as the planner takes it: data files with their deletes.

Java's ``RewriteDataFilesSparkAction`` scans the starting snapshot with ``ignoreResiduals`` and gets one task per
live data file together with ``task.deletes()``. Here the same comes from our own manifest readers:

1. every live file of the snapshot (``metadata.live_files``: data and delete manifests, sequence numbers
   inherited);
2. for position-delete files without ``referenced_data_file``, the ``file_path`` bounds (field 2147483546) of
   their manifest entries, read whole only for the delete manifests: equal bounds make the file file-scoped
   (Java's ``ContentFileUtil.referencedDataFile``);

Every manifest is decoded through the table's ``write.manifest_cache`` (once per kind of read: live-file rows,
whole entries), which the commit's validation, dangling-delete check and manifest rewrite share.
3. the delete index (``data_compaction_deletes.DeleteIndex``) attaches the applicable deletes to each data file.

Deletion vectors (format v3) are refused before this runs.

Example:
    >>> scan = scan_for_compaction(table, table.snapshot(ref="main"))  # doctest: +SKIP
    >>> sum(len(c.deletes) for c in scan.candidates)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.manifest import DataFile, ManifestContent

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_deletes import DeleteEntry, DeleteIndex
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import CompactionCandidate
from airflow_lakeformat.core.iceberg.metadata.entries import (
    CONTENT_DATA,
    CONTENT_EQUALITY_DELETES,
    CONTENT_POSITION_DELETES,
    LiveFile,
)
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.write.manifest_cache import manifest_cache

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import Snapshot

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

# The reserved field id of a position-delete file's ``file_path`` column (Iceberg spec, "Reserved Field IDs").
FILE_PATH_FIELD_ID = 2147483546


@dataclass(frozen=True)
class CompactionScan:
    """What the planner and the rewrite need from the starting snapshot."""

    snapshot_id: int
    sequence_number: int
    candidates: tuple[CompactionCandidate, ...]
    deletes: DeleteIndex
    data_files: tuple[LiveFile, ...]


def scan_for_compaction(table: IcebergTable, snapshot: Snapshot) -> CompactionScan:
    """Every live data file of ``snapshot`` with the deletes that apply to it (Java's planned scan tasks).

    Args:
        table: the table.
        snapshot: the starting snapshot (the branch head when the compaction starts).

    Raises:
        MissingMetadataError, CorruptMetadataError: a manifest cannot be read (nothing is planned).
    """
    files = manifest_cache(table).live_files(table, snapshot)
    data = [f for f in files if f.content == CONTENT_DATA]
    index = DeleteIndex(snapshot_delete_entries(table, snapshot, files))
    candidates = tuple(
        CompactionCandidate(
            path=f.path,
            spec_id=f.spec_id,
            partition=f.partition,
            file_size=f.file_size,
            record_count=f.record_count,
            deletes=tuple(
                e.attached()
                for e in index.for_data_file(
                    f.path, f.spec_id, f.partition, data_sequence_number=f.data_sequence_number or 0
                )
            ),
        )
        for f in data
    )
    return CompactionScan(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=snapshot.sequence_number or 0,
        candidates=candidates,
        deletes=index,
        data_files=tuple(data),
    )


def _has_unscoped_position_deletes(files: Iterable[LiveFile]) -> bool:
    return any(f.content == CONTENT_POSITION_DELETES and f.referenced_data_file is None for f in files)


def snapshot_delete_entries(
    table: IcebergTable, snapshot: Snapshot, files: Sequence[LiveFile]
) -> list[DeleteEntry]:
    """The live delete files among ``files`` (the snapshot's live files) as the delete index takes them."""
    scoped = position_delete_targets(table, snapshot) if _has_unscoped_position_deletes(files) else {}
    specs = table.metadata.specs()
    entries = []
    for f in files:
        if f.content not in (CONTENT_POSITION_DELETES, CONTENT_EQUALITY_DELETES):
            continue
        position = f.content == CONTENT_POSITION_DELETES
        spec = specs.get(f.spec_id)
        entries.append(
            DeleteEntry(
                path=f.path,
                content="position" if position else "equality",
                spec_id=f.spec_id,
                partition=f.partition,
                sequence_number=f.data_sequence_number or 0,
                record_count=f.record_count,
                referenced_path=(f.referenced_data_file or scoped.get(f.path)) if position else None,
                spec_unpartitioned=spec is None or spec.is_unpartitioned(),
                equality_ids=f.equality_ids or (),
            )
        )
    return entries


def position_delete_targets(table: IcebergTable, snapshot: Snapshot) -> dict[str, str]:
    """Position-delete file path -> the one data file it names, where its ``file_path`` bounds are equal."""
    targets: dict[str, str] = {}
    deletes = [m for m in read_manifests(table, snapshot) if m.content == ManifestContent.DELETES]
    for _manifest, entries in manifest_cache(table).entries(
        table, deletes, f"snapshot {snapshot.snapshot_id}"
    ):
        for entry in entries:
            data_file = entry.data_file
            if int(data_file.content) != CONTENT_POSITION_DELETES:
                continue
            lower = (data_file.lower_bounds or {}).get(FILE_PATH_FIELD_ID)
            upper = (data_file.upper_bounds or {}).get(FILE_PATH_FIELD_ID)
            if lower is not None and lower == upper:
                targets[data_file.file_path] = bytes(lower).decode("utf-8")
    return targets


def data_files_by_path(table: IcebergTable, snapshot: Snapshot, paths: Iterable[str]) -> dict[str, DataFile]:
    """pyiceberg ``DataFile`` records of the given live data and delete files of ``snapshot``, by path.

    Reads (fully) only the manifests that hold one of them: those the live-file rows name for data files, and
    every delete manifest.

    Raises:
        CorruptMetadataError: a path is not a live file of the snapshot (the plan does not match it).
    """
    wanted = set(paths)
    cache = manifest_cache(table)
    holders = {f.manifest_path for f in cache.live_files(table, snapshot) if f.path in wanted}
    found: dict[str, DataFile] = {}
    manifests = [
        m
        for m in read_manifests(table, snapshot)
        if m.manifest_path in holders or m.content == ManifestContent.DELETES
    ]
    for _manifest, entries in cache.entries(table, manifests, f"snapshot {snapshot.snapshot_id}"):
        for entry in entries:
            if entry.data_file.file_path in wanted:
                found[entry.data_file.file_path] = entry.data_file
    missing = sorted(wanted - set(found))
    if missing:
        raise CorruptMetadataError(missing[0], f"not a live file of snapshot {snapshot.snapshot_id}")
    return found
