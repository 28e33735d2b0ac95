"""Rewriting data manifests: Java's ``RewriteManifests`` clustering, and the ``split_offsets`` repair.

Java's ``RewriteManifestsSparkAction`` / ``rewrite_manifests`` procedure (reference 3c) over one spec's data
manifests:

1. A spec group is left alone when it is a single manifest and ``ceil(length / target) == 1`` (Java: "if
   that is 1 and only one manifest matches, nothing happens"), unless that manifest needs the
   ``split_offsets`` repair below (Java 1.10.2 would null such lists on any rewrite) or holds no live file.
2. The live entries (status ADDED or EXISTING; DELETED tombstones are dropped) of every manifest of the
   group are read with their resolved snapshot ids and sequence numbers.
3. They are clustered by partition: sorted by the partition tuple, nulls first (Spark's
   ``repartitionByRange(n, data_file.partition)`` + ``sortWithinPartitions``), ties in manifest-list then
   manifest order.
4. They are written as EXISTING entries, ids and sequence numbers preserved, through
   ``manifest_writer.RollingManifestWriter``, cut at ``commit.manifest.target-size-bytes``.

``split_offsets`` (reference 4.7; apache/iceberg #8863, #9689): before writing, every source manifest's live
entries are checked with ``split_offsets.check_manifest`` (out of ``[0, file_size)``, not strictly ascending,
or a 2+-offset list copied across files of different sizes within one manifest); the offending entries
are written with ``split_offsets`` null, as Iceberg's fix (#8860, ``BaseFile.hasWellDefinedOffsets``)
reads them. Valid lists are kept as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyiceberg.manifest import ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table.metadata import TableMetadata

from airflow_lakeformat.core.iceberg.metadata.entries import LiveFile
from airflow_lakeformat.core.iceberg.metadata.split_offsets import check_manifest
from airflow_lakeformat.core.iceberg.write.manifest_writer import (
    ManifestStore,
    RollingManifestWriter,
    clear_split_offsets,
    existing_entry,
    sort_key_of_partition,
)


@dataclass(frozen=True)
class RewrittenGroup:
    """What rewriting one group of manifests produced.

    Attributes:
        replaced: The source manifests (leave the manifest list).
        created: The manifest-list rows of the new manifests.
        entries: Live entries written.
        split_offsets_cleared: Entries written with ``split_offsets`` null because theirs were invalid.
    """

    replaced: tuple[ManifestFile, ...]
    created: tuple[ManifestFile, ...]
    entries: int
    split_offsets_cleared: int


def invalid_split_offset_paths(manifest: ManifestFile, entries: Sequence[ManifestEntry]) -> set[str]:
    """Paths of the entries of one manifest whose ``split_offsets`` the 4.7 checks reject."""
    files = []
    for entry in entries:
        df = entry.data_file
        offsets = df.split_offsets
        if not offsets:
            continue
        files.append(
            LiveFile(
                path=df.file_path,
                content=int(df.content),
                file_format="",
                spec_id=manifest.partition_spec_id,
                partition=(),
                record_count=df.record_count,
                file_size=df.file_size_in_bytes,
                data_sequence_number=entry.sequence_number,
                file_sequence_number=entry.file_sequence_number,
                snapshot_id=entry.snapshot_id,
                status=int(entry.status),
                manifest_path=manifest.manifest_path,
                split_offsets=tuple(offsets),
            )
        )
    if not files:
        return set()
    report = check_manifest(manifest.manifest_path, files, sample_size=len(files))
    return set() if report is None else {row["path"] for row in report.sample}


def repair_split_offsets(decoded: Sequence[tuple[ManifestFile, list[ManifestEntry]]]) -> int:
    """Null the invalid ``split_offsets`` of the decoded entries in place; how many were cleared."""
    cleared = 0
    for manifest, entries in decoded:
        bad = invalid_split_offset_paths(manifest, entries)
        if not bad:
            continue
        for entry in entries:
            if entry.data_file.file_path in bad and entry.data_file.split_offsets is not None:
                clear_split_offsets(entry)
                cleared += 1
    return cleared


def needs_rewrite(
    decoded: Sequence[tuple[ManifestFile, list[ManifestEntry]]], target_size_bytes: int
) -> bool:
    """Java's skip rule (step 1): more than one manifest, or more than one target's worth, or a repair."""
    if len(decoded) != 1:
        return True
    manifest, entries = decoded[0]
    if math.ceil(manifest.manifest_length / max(1, target_size_bytes)) > 1:
        return True
    if not entries:
        return True  # nothing live: the manifest can go
    return bool(invalid_split_offset_paths(manifest, entries))


def rewrite_group(
    metadata: TableMetadata,
    spec: PartitionSpec,
    decoded: Sequence[tuple[ManifestFile, list[ManifestEntry]]],
    *,
    snapshot_id: int,
    store: ManifestStore,
    target_size_bytes: int | None,
    cluster: bool,
) -> RewrittenGroup:
    """Write the live entries of ``decoded`` as EXISTING entries into new manifests.

    Args:
        metadata: The base metadata.
        spec: The spec of every manifest in ``decoded``.
        decoded: (manifest, its live entries) in manifest-list order.
        snapshot_id: The id of the snapshot that will commit the new manifests.
        store: Where the new manifests go.
        target_size_bytes: Cut at this size (None: one manifest, as Java's merge writes a bin).
        cluster: Sort the entries by partition (full rewrite) or keep their order (merge).

    Returns:
        The replaced and created manifests and counts.
    """
    cleared = repair_split_offsets(decoded)
    entries = [entry for _manifest, group in decoded for entry in group]
    if cluster:
        entries.sort(key=lambda e: sort_key_of_partition(e.data_file.partition))
    writer = RollingManifestWriter(metadata, spec, snapshot_id, store, target_size_bytes=target_size_bytes)
    for entry in entries:
        writer.add(existing_entry(entry))
    created = writer.close()
    return RewrittenGroup(
        replaced=tuple(m for m, _ in decoded),
        created=tuple(created),
        entries=len(entries),
        split_offsets_cleared=cleared,
    )
