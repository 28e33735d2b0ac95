"""Building blocks of a ``replace`` snapshot on ``main``: manifests without some files, added manifests, the commit.

A ``replace`` snapshot (spec: "files added and removed without changing table data") is what Java's
``BaseRewriteFiles`` commits for data compaction and for ``rewrite_position_delete_files``. Its pieces, each usable
inside one attempt of the retry loop (``commit.commit_with_retry``):

* :func:`rewrite_manifests_removing`: the head's manifest list with every manifest that holds a removed file
  rewritten, that file as a DELETED entry (its sequence numbers kept) and the others as EXISTING; untouched
  manifests carried over, data manifests first, then delete manifests (Java's order).
* :func:`write_added_manifest`: one new manifest (data or deletes) of ADDED entries with an explicit data sequence
  number (Java's ``addFile(file, dataSeq)``) and a null file sequence number (inherited from the commit).
* :func:`replace_summary`: the snapshot summary (pyiceberg's collector for added/removed counts, totals carried
  from the parent when it has them).
* :func:`stage_replace`: write the manifest list and stage ``AddSnapshot`` + ``SetSnapshotRef(main)`` with
  ``AssertRefSnapshotId(main, head)``; the branch's retention settings are kept.

Manifests are written through ``manifest_blocks``: pyiceberg's writers (header, counts, partition summaries), records
framed in Avro blocks of about 64 KB as Java frames them (pyiceberg writes one block per entry), and a ``content``
of ``deletes`` for delete manifests (pyiceberg 0.12 writes data manifests only). pyiceberg's v2 read schema lacks
``referenced_data_file``: callers must not rewrite a delete manifest holding an entry with that field set.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pyiceberg.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriter,
    write_manifest_list,
)
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.write.manifest_blocks import blocked_manifest_writer
from airflow_lakeformat.core.iceberg.write.manifest_cache import manifest_cache
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore, writer_schema

if TYPE_CHECKING:
    from pyiceberg.avro.codecs import AvroCompressionCodec
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import TableVersion

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def _codec(metadata: TableMetadata) -> AvroCompressionCodec:
    return cast("AvroCompressionCodec", metadata.properties.get("write.avro.compression-codec", "gzip"))


def manifest_writer(
    metadata: TableMetadata, content: ManifestContent, spec: PartitionSpec, output: Any, snapshot_id: int
) -> ManifestWriter:
    """A writer of a data or delete manifest of ``spec`` for the snapshot ``snapshot_id`` (~64 KB Avro blocks,
    ``manifest_blocks``)."""
    schema = writer_schema(spec, metadata)
    version = int(metadata.format_version)
    return blocked_manifest_writer(version, content, spec, schema, output, snapshot_id, _codec(metadata))


def write_added_manifest(
    table: IcebergTable,
    metadata: TableMetadata,
    store: ManifestStore,
    snapshot_id: int,
    content: ManifestContent,
    files: Iterable[tuple[DataFile, int | None]],
    spec: PartitionSpec | None = None,
) -> ManifestFile | None:
    """One manifest of ADDED entries of ``spec`` (default: the current one): ``(file, explicit data sequence
    number or None)``."""
    files = list(files)
    if not files:
        return None
    location = store.manifest_location()
    store.written.append(location)
    output = table.table.io.new_output(location)
    with manifest_writer(metadata, content, spec or metadata.spec(), output, snapshot_id) as writer:
        for data_file, sequence_number in files:
            entry = ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=snapshot_id,
                sequence_number=sequence_number,
                data_file=data_file,
            )
            writer.add(entry)
    return writer.to_manifest_file()


def deleted_entry(entry: ManifestEntry, snapshot_id: int) -> ManifestEntry:
    """``entry`` as a DELETED entry of the snapshot ``snapshot_id``, its sequence numbers kept (what pyiceberg's
    ``ManifestWriter.delete`` writes; the file itself stays until an expiry deletes it)."""
    return ManifestEntry.from_args(
        status=ManifestEntryStatus.DELETED,
        snapshot_id=snapshot_id,
        sequence_number=entry.sequence_number,
        file_sequence_number=entry.file_sequence_number,
        data_file=entry.data_file,
    )


def rewrite_manifests_removing(
    table: IcebergTable,
    metadata: TableMetadata,
    head: Snapshot,
    snapshot_id: int,
    removed: set[str],
    store: ManifestStore,
    removed_files: list[DataFile] | None = None,
) -> list[ManifestFile]:
    """The head's manifests, data then deletes, each holding a removed file rewritten without it (DELETED);
    the ``DataFile`` of each removed entry is appended to ``removed_files`` when given."""
    manifests = read_manifests(table, head)
    cache = manifest_cache(table)
    holders = {f.manifest_path for f in cache.live_files(table, head) if f.path in removed}
    rewritten: dict[str, ManifestFile] = {}
    to_rewrite = [m for m in manifests if m.manifest_path in holders]
    for manifest, entries in cache.entries(table, to_rewrite, f"snapshot {head.snapshot_id}"):
        location = store.manifest_location()
        store.written.append(location)
        output = table.table.io.new_output(location)
        spec = metadata.specs()[manifest.partition_spec_id]
        with manifest_writer(metadata, manifest.content, spec, output, snapshot_id) as writer:
            for entry in entries:
                if entry.data_file.file_path in removed:
                    writer.add_entry(
                        deleted_entry(entry, snapshot_id)
                    )  # a manifest entry, not a file removal
                    if removed_files is not None:
                        removed_files.append(entry.data_file)
                else:
                    writer.existing(entry)
        rewritten[manifest.manifest_path] = writer.to_manifest_file()
    ordered: list[ManifestFile] = []
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        ordered += [rewritten.get(m.manifest_path, m) for m in manifests if m.content == content]
    return ordered


def operation_summary(
    metadata: TableMetadata,
    head: Snapshot | None,
    removed: Sequence[DataFile],
    added: Sequence[DataFile],
    extra: Mapping[str, str],
) -> Summary:
    """An ``overwrite`` summary (pyiceberg's collector) with the totals carried from ``head`` when it has them."""
    collector = SnapshotSummaryCollector()
    schema = metadata.schema()
    for data_file in added:
        collector.add_file(data_file, schema, metadata.specs()[data_file.spec_id])
    for data_file in removed:
        collector.remove_file(data_file, schema, metadata.specs()[data_file.spec_id])
    properties = {**{str(k): str(v) for k, v in extra.items()}, **collector.build()}
    previous = head.summary.additional_properties if head is not None and head.summary else None
    return update_snapshot_summaries(Summary(Operation.OVERWRITE, **properties), previous_summary=previous)


def replace_summary(
    metadata: TableMetadata,
    head: Snapshot,
    removed: Sequence[DataFile],
    added: Sequence[DataFile],
    extra: Mapping[str, str],
) -> Summary:
    """The ``replace`` snapshot's summary: added/removed counts and, when the parent has them, the totals."""
    # pyiceberg computes totals for append/overwrite/delete only; the arithmetic is the same for replace
    with_totals = operation_summary(metadata, head, removed, added, extra)
    return Summary(Operation.REPLACE, **with_totals.additional_properties)


def stage_replace(
    tx: Transaction,
    table: IcebergTable,
    head: Snapshot | None,
    snapshot_id: int,
    manifests: Sequence[ManifestFile],
    summary: Summary,
    store: ManifestStore,
) -> None:
    """Write the manifest list and stage the snapshot (its operation is the summary's) on ``main`` over ``head``
    (None: a table without snapshots, where ``main`` must still be missing)."""
    metadata = tx.table_metadata
    parent_id = head.snapshot_id if head is not None else None
    sequence_number = metadata.next_sequence_number()
    list_location = store.manifest_list_location(snapshot_id, 0)
    store.written.append(list_location)
    with write_manifest_list(
        cast("TableVersion", int(metadata.format_version)),
        table.table.io.new_output(list_location),
        snapshot_id,
        parent_id,
        sequence_number,
        _codec(metadata),
    ) as list_writer:
        list_writer.add_manifests(list(manifests))
    ref = metadata.refs.get(MAIN_BRANCH)
    snapshot = Snapshot.model_validate(
        {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": parent_id,
            "sequence-number": sequence_number,
            "timestamp-ms": max(int(time.time() * 1000), metadata.last_updated_ms),
            "manifest-list": list_location,
            "summary": summary,
            "schema-id": metadata.current_schema_id,
        }
    )
    set_ref = SetSnapshotRefUpdate.model_validate(
        {
            "snapshot-id": snapshot_id,
            "ref-name": MAIN_BRANCH,
            "type": SnapshotRefType.BRANCH,
            # pyiceberg's producers drop a branch's retention settings here; keep them.
            "max-ref-age-ms": ref.max_ref_age_ms if ref is not None else None,
            "max-snapshot-age-ms": ref.max_snapshot_age_ms if ref is not None else None,
            "min-snapshots-to-keep": ref.min_snapshots_to_keep if ref is not None else None,
        }
    )
    requirement = AssertRefSnapshotId.model_validate({"snapshot-id": parent_id, "ref": MAIN_BRANCH})
    tx._apply((AddSnapshotUpdate(snapshot=snapshot), set_ref), (requirement,))
