"""The data files a snapshot (or tag) references: its ADD and DELETE entries folded in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_lakeformat.core.collector import gc_paused
from airflow_lakeformat.core.paimon.manifest import ManifestEntry, iter_added, merge_entries
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress


@dataclass(frozen=True)
class LiveFile:
    """A live data file with its path (relative to the table root, or full if external)."""

    entry: ManifestEntry
    path: str
    partition: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        f = self.entry.file
        return {
            "path": self.path,
            "fileName": f.file_name,
            "partition": self.partition,
            "bucket": self.entry.bucket,
            "level": f.level,
            "rowCount": f.row_count,
            "fileSize": f.file_size,
            "minSequenceNumber": f.min_sequence_number,
            "maxSequenceNumber": f.max_sequence_number,
            "schemaId": f.schema_id,
        }


def live_entries(table: Table, snapshot: Snapshot, progress: Progress = NO_PROGRESS) -> list[ManifestEntry]:
    """ADD entries live in ``snapshot``: base then delta manifests, merged with Paimon's identity rule.

    Manifests are decoded by :func:`~airflow_lakeformat.core.paimon.manifest_scan.
    decode_manifest_for_planning`: the identity and the fields a plan reads at once, each entry's
    statistics and keys only when something asks for them (the values are the full decode's).
    """
    from airflow_lakeformat.core.paimon.manifest_scan import decode_manifest_for_planning

    base, delta = table.data_manifests(snapshot)
    merged: dict[tuple[Any, ...], ManifestEntry] = {}
    with gc_paused():
        owner = f"snapshot {snapshot.id}"
        for entries in table.read_manifests(base + delta, owner, progress, decode_manifest_for_planning):
            merge_entries(entries, merged)
    return list(iter_added(merged))


def live_files(table: Table, snapshot: Snapshot, progress: Progress = NO_PROGRESS) -> list[LiveFile]:
    paths = DataFilePaths(table.schema)
    return [
        LiveFile(entry, paths.relative_path(entry), paths.partitions.to_json(entry.partition))
        for entry in live_entries(table, snapshot, progress)
    ]
