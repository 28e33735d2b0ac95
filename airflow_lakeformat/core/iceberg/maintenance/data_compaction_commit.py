"""The ``replace`` commit of an Iceberg data compaction, validated against every commit since it started.

Follows Java's ``RewriteDataFilesCommitManager`` + ``BaseRewriteFiles`` (1.10.2), stricter where Java is wrong.
Each attempt of the one retry loop (``write.commit.commit_with_retry``) works on the latest metadata:

1. **Validate** against the head of ``main`` (Java's ``MergingSnapshotProducer.validate``):

   * the starting snapshot must still be an ancestor of the head (a rollback past it fails the whole commit);
   * every replaced data file must still be live ("Missing required files to delete": a concurrent
     compaction or copy-on-write delete of the same file);
   * no delete file committed after the start may apply to a replaced file, evaluated at the starting sequence
     number: a position delete always conflicts (its path disappears with the file); an equality delete only
     when the new files do not carry the starting sequence number (with it, the delete still applies to them).

   Unlike Java, a conflict does not fail everything: the groups whose files conflict are dropped from this
   commit (their new files discarded by the caller) and reported; the others commit.
2. **Write manifests**: every data manifest of the head that holds a replaced file is rewritten with the
   replaced entries as DELETED (original sequence numbers kept) and the others as EXISTING; the new files go
   into one new manifest as ADDED entries with an explicit data sequence number, the starting snapshot's
   (Java's ``use-starting-sequence-number``), and a null file sequence number, which inherits the commit's.
   Untouched data manifests and every delete manifest are carried over. Delete files are never dropped here:
   unlike Java's ``dropDeleteFilesOlderThan`` (apache/iceberg #10312: it drops an equality delete the compacted
   files still need when an append landed in between), a delete that no longer applies stays until a
   dangling-delete removal proves it so.
3. **Stage** a ``replace`` snapshot (summary: added/deleted files, records and sizes, totals carried from the
   parent) with ``AssertRefSnapshotId(main, head)``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from pyiceberg.manifest import (
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriter,
    ManifestWriterV2,
    write_manifest,
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

from airflow_lakeformat.core.errors import CommitConflictError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_deletes import DeleteIndex, dangling_deletes
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import (
    data_files_by_path,
    snapshot_delete_entries,
)
from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore, read_entries, writer_schema

if TYPE_CHECKING:
    from pyiceberg.avro.codecs import AvroCompressionCodec
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.typedef import TableVersion

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


@dataclass(frozen=True)
class RewriteCommit:
    """What one commit replaces: per group, the input data files and the new files written for them."""

    starting_snapshot_id: int
    starting_sequence_number: int
    groups: Sequence[tuple[Sequence[DataFile], Sequence[DataFile]]]
    use_starting_sequence_number: bool = True
    remove_dangling_deletes: bool = False
    snapshot_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass
class StagedRewrite:
    """The outcome of the last attempt: which groups it committed, which it dropped and why."""

    snapshot_id: int | None = None
    committed_groups: list[int] = field(default_factory=list)
    conflicts: dict[int, str] = field(default_factory=dict)
    deletes_removed: list[str] = field(default_factory=list)
    manifests_written: list[str] = field(default_factory=list)


def _ancestors(metadata: TableMetadata, head: Snapshot, stop_at: int) -> bool:
    """Whether ``stop_at`` is ``head`` or one of its ancestors."""
    current: Snapshot | None = head
    while current is not None:
        if current.snapshot_id == stop_at:
            return True
        parent = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent) if parent is not None else None
    return False


def find_conflicts(
    table: IcebergTable, metadata: TableMetadata, head: Snapshot, commit: RewriteCommit
) -> dict[int, str]:
    """Step 1: the groups that may not be committed on ``head``, each with the reason (group index -> why)."""
    if not _ancestors(metadata, head, commit.starting_snapshot_id):
        raise CommitConflictError(
            f"{table.name}: data compaction: the starting snapshot {commit.starting_snapshot_id} is no longer an "
            f"ancestor of main's head {head.snapshot_id} (rolled back?); nothing was committed"
        )
    files = live_files(table, head)
    live = {f.path for f in files if f.content == CONTENT_DATA}
    start_seq = commit.starting_sequence_number
    new_deletes = [e for e in snapshot_delete_entries(table, head, files) if e.sequence_number > start_seq]
    index = DeleteIndex(new_deletes)
    conflicts: dict[int, str] = {}
    for number, (inputs, _outputs) in enumerate(commit.groups):
        for data_file in inputs:
            if data_file.file_path not in live:
                conflicts[number] = (
                    f"{data_file.file_path} is no longer live (replaced or deleted concurrently)"
                )
                break
            applying = index.for_data_file(
                data_file.file_path,
                data_file.spec_id,
                tuple(data_file.partition[i] for i in range(len(data_file.partition))),
                data_sequence_number=start_seq,
            )
            blocking = [
                d for d in applying if d.content == "position" or not commit.use_starting_sequence_number
            ]
            if blocking:
                conflicts[number] = (
                    f"a {blocking[0].content} delete committed since the start ({blocking[0].path}) applies to "
                    f"{data_file.file_path}"
                )
                break
    return conflicts


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg 0.12 writes data manifests only; a delete manifest differs in its ``content``."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def dangling_after(
    table: IcebergTable,
    head: Snapshot,
    commit: RewriteCommit,
    removed: Mapping[str, DataFile],
    added: Sequence[DataFile],
) -> list[str]:
    """Delete files of ``head`` that no live data file takes once ``removed`` are replaced by ``added``.

    Delete files in a manifest holding any entry with ``referenced_data_file`` set are kept: pyiceberg 0.12's v2
    read schema lacks that field, so rewriting such a manifest would drop it from the other entries.
    """
    files = live_files(table, head)
    index = DeleteIndex(snapshot_delete_entries(table, head, files))
    start_seq = (
        commit.starting_sequence_number
        if commit.use_starting_sequence_number
        else (head.sequence_number or 0) + 1  # at most the commit's: errs towards keeping deletes
    )
    after = [
        (f.path, f.spec_id, f.partition, f.data_sequence_number or 0)
        for f in files
        if f.content == CONTENT_DATA and f.path not in removed
    ]
    after += [
        (d.file_path, d.spec_id, tuple(d.partition[i] for i in range(len(d.partition))), start_seq or 0)
        for d in added
    ]
    unsafe = {f.manifest_path for f in files if f.referenced_data_file is not None}
    keep = {f.path for f in files if f.manifest_path in unsafe}
    return [path for path in dangling_deletes(index, after) if path not in keep]


def _delete_data_files(table: IcebergTable, head: Snapshot, paths: Sequence[str]) -> list[DataFile]:
    """The ``DataFile`` records of the dangling delete files (for the snapshot summary's removed counts)."""
    if not paths:
        return []
    found = data_files_by_path(table, head, paths)
    return [found[p] for p in paths]


def _summary(
    metadata: TableMetadata,
    head: Snapshot,
    removed: Sequence[DataFile],
    added: Sequence[DataFile],
    extra: Mapping[str, str],
) -> Summary:
    collector = SnapshotSummaryCollector()
    schema = metadata.schema()
    for data_file in added:
        collector.add_file(data_file, schema, metadata.specs()[data_file.spec_id])
    for data_file in removed:
        collector.remove_file(data_file, schema, metadata.specs()[data_file.spec_id])
    properties = {**{str(k): str(v) for k, v in extra.items()}, **collector.build()}
    with_totals = update_snapshot_summaries(
        Summary(Operation.OVERWRITE, **properties),
        previous_summary=head.summary.additional_properties if head.summary else None,
    )
    return Summary(Operation.REPLACE, **with_totals.additional_properties)


def _manifest_writer(
    metadata: TableMetadata, manifest: ManifestFile, output: Any, snapshot_id: int, codec: Any
) -> ManifestWriter:
    spec = metadata.specs()[manifest.partition_spec_id]
    schema = writer_schema(spec, metadata)
    if manifest.content == ManifestContent.DELETES:
        return _DeleteManifestWriter(spec, schema, output, snapshot_id, codec)
    return write_manifest(
        cast("TableVersion", int(metadata.format_version)), spec, schema, output, snapshot_id, codec
    )


def _write_manifests(
    table: IcebergTable,
    metadata: TableMetadata,
    head: Snapshot,
    snapshot_id: int,
    commit: RewriteCommit,
    removed: set[str],
    added: Sequence[DataFile],
    store: ManifestStore,
) -> list[ManifestFile]:
    """Step 2: the new manifest list's manifests (new, rewritten, untouched data, then delete manifests).

    ``removed`` holds the replaced data files and the dangling delete files: every manifest holding one is
    rewritten with it as DELETED and the rest as EXISTING.
    """
    codec: Any = metadata.properties.get("write.avro.compression-codec", "gzip")
    manifests = read_manifests(table, head)
    holders = {f.manifest_path for f in live_files(table, head) if f.path in removed}
    result: list[ManifestFile] = []
    if added:
        spec = metadata.spec()
        location = store.manifest_location()
        store.written.append(location)
        output = table.table.io.new_output(location)
        version = cast("TableVersion", int(metadata.format_version))
        sequence = commit.starting_sequence_number if commit.use_starting_sequence_number else None
        with write_manifest(
            version, spec, writer_schema(spec, metadata), output, snapshot_id, codec
        ) as writer:
            for data_file in added:
                entry = ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=snapshot_id,
                    sequence_number=sequence,
                    data_file=data_file,
                )
                writer.add(entry)
        result.append(writer.to_manifest_file())
    rewritten: dict[str, ManifestFile] = {}
    to_rewrite = [m for m in manifests if m.manifest_path in holders]
    for manifest, entries in read_entries(table, to_rewrite, f"snapshot {head.snapshot_id}"):
        location = store.manifest_location()
        store.written.append(location)
        output = table.table.io.new_output(location)
        with _manifest_writer(metadata, manifest, output, snapshot_id, codec) as rewriter:
            for entry in entries:
                if entry.data_file.file_path in removed:
                    rewriter.delete(entry)
                else:
                    rewriter.existing(entry)
        rewritten[manifest.manifest_path] = rewriter.to_manifest_file()
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        result += [rewritten.get(m.manifest_path, m) for m in manifests if m.content == content]
    return result


def stage_rewrite(
    tx: Transaction, table: IcebergTable, commit: RewriteCommit, staged: StagedRewrite
) -> StagedRewrite:
    """One attempt: validate on the transaction's metadata, write manifests and stage the ``replace`` snapshot.

    Args:
        tx: a fresh transaction (``commit_with_retry`` passes it).
        table: the table.
        commit: what to replace.
        staged: filled in with this attempt's outcome (its manifests, for discarding if it does not land).

    Raises:
        CommitConflictError: the starting snapshot is no longer an ancestor, or every group conflicts.
    """
    metadata = tx.table_metadata
    staged.snapshot_id, staged.committed_groups, staged.conflicts = None, [], {}
    head = metadata.snapshot_by_id(metadata.refs[MAIN_BRANCH].snapshot_id)
    assert head is not None
    staged.conflicts = find_conflicts(table, metadata, head, commit)
    staged.committed_groups = [n for n in range(len(commit.groups)) if n not in staged.conflicts]
    if not staged.committed_groups:
        raise CommitConflictError(
            f"{table.name}: data compaction: every group conflicts with a concurrent commit "
            f"({'; '.join(staged.conflicts.values())}); nothing was committed"
        )
    removed = {f.file_path: f for n in staged.committed_groups for f in commit.groups[n][0]}
    added = [f for n in staged.committed_groups for f in commit.groups[n][1]]
    staged.deletes_removed = (
        dangling_after(table, head, commit, removed, added) if commit.remove_dangling_deletes else []
    )
    snapshot_id = metadata.new_snapshot_id()
    store = ManifestStore(table, metadata, dry_run=False)
    try:
        gone = set(removed) | set(staged.deletes_removed)
        manifests = _write_manifests(table, metadata, head, snapshot_id, commit, gone, added, store)
        sequence_number = metadata.next_sequence_number()
        list_location = store.manifest_list_location(snapshot_id, 0)
        store.written.append(list_location)
        with write_manifest_list(
            cast("TableVersion", int(metadata.format_version)),
            table.table.io.new_output(list_location),
            snapshot_id,
            head.snapshot_id,
            sequence_number,
            cast("AvroCompressionCodec", metadata.properties.get("write.avro.compression-codec", "gzip")),
        ) as list_writer:
            list_writer.add_manifests(manifests)
    finally:
        staged.manifests_written = list(store.written)
    ref = metadata.refs[MAIN_BRANCH]
    dropped = list(removed.values()) + _delete_data_files(table, head, staged.deletes_removed)
    summary = _summary(metadata, head, dropped, added, commit.snapshot_properties)
    snapshot = Snapshot.model_validate(
        {
            "snapshot-id": snapshot_id,
            "parent-snapshot-id": head.snapshot_id,
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
            "max-ref-age-ms": ref.max_ref_age_ms,
            "max-snapshot-age-ms": ref.max_snapshot_age_ms,
            "min-snapshots-to-keep": ref.min_snapshots_to_keep,
        }
    )
    requirement = AssertRefSnapshotId.model_validate({"snapshot-id": head.snapshot_id, "ref": MAIN_BRANCH})
    tx._apply((AddSnapshotUpdate(snapshot=snapshot), set_ref), (requirement,))
    staged.snapshot_id = snapshot_id
    return staged
