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

**Ahead of the commit** (:class:`Prestaged`): the rewritten manifests of step 2 depend only on the head and on the
replaced files, both known from the plan, so they can be written while the groups are rewritten (forked workers
busy, this process waiting: ``data_compaction_workers``), under a snapshot id chosen then. The first attempt uses
them only when nothing at all was committed since (the head's snapshot id *and* the metadata's
``last-updated-ms`` unchanged), the replaced files are exactly those (no group conflicts, no dangling delete to
remove) and the snapshot id is still unused; validation (step 1) runs on the attempt's own metadata first, as
always. Otherwise they are written again for that attempt and the early ones discarded by the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.manifest import (
    ManifestContent,
)
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import (
    Snapshot,
)

from airflow_lakeformat.core.errors import CommitConflictError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_deletes import DeleteIndex, dangling_deletes
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import (
    data_files_by_path,
    snapshot_delete_entries,
)
from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA
from airflow_lakeformat.core.iceberg.write.manifest_cache import manifest_cache
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore
from airflow_lakeformat.core.iceberg.write.replace import (
    replace_summary,
    rewrite_manifests_removing,
    stage_replace,
    write_added_manifest,
)

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile, ManifestFile
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata

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
    prestaged: Prestaged | None = None


@dataclass
class Prestaged:
    """Step 2's rewritten manifests, written ahead of the commit (module docstring, "Ahead of the commit")."""

    head_snapshot_id: int | None = None
    last_updated_ms: int | None = None
    snapshot_id: int | None = None
    removed: frozenset[str] = frozenset()
    manifests: list[ManifestFile] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # every location written, for discarding
    used: bool = False

    def write(self, table: IcebergTable, removed: Iterable[str]) -> None:
        """Write the head's manifests without ``removed``, on the table's current metadata.

        Args:
            table: the table (its metadata is the plan's).
            removed: the paths of every input file of the batch.
        """
        metadata = table.metadata
        ref = metadata.refs.get(MAIN_BRANCH)
        head = metadata.snapshot_by_id(ref.snapshot_id) if ref is not None else None
        if head is None:
            return
        store = ManifestStore(table, metadata, dry_run=False)
        snapshot_id = metadata.new_snapshot_id()
        paths = frozenset(removed)
        try:
            manifests = rewrite_manifests_removing(table, metadata, head, snapshot_id, set(paths), store)
        finally:
            self.written = list(store.written)
        self.head_snapshot_id, self.last_updated_ms = head.snapshot_id, metadata.last_updated_ms
        self.snapshot_id, self.removed, self.manifests = snapshot_id, paths, manifests

    def take(
        self, metadata: TableMetadata, head: Snapshot, gone: set[str]
    ) -> tuple[int, list[ManifestFile]] | None:
        """``(snapshot id, manifests)`` when they fit this attempt (once), else None."""
        fits = (
            not self.used
            and self.snapshot_id is not None
            and head.snapshot_id == self.head_snapshot_id
            and metadata.last_updated_ms == self.last_updated_ms
            and gone == self.removed
            and metadata.snapshot_by_id(self.snapshot_id) is None
        )
        if not fits or self.snapshot_id is None:
            return None
        self.used = True
        return self.snapshot_id, self.manifests

    def unused(self) -> list[str]:
        """The locations to discard once the commit is done: all of them unless an attempt took them."""
        return [] if self.used else self.written


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
    files = manifest_cache(table).live_files(table, head)
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
    files = manifest_cache(table).live_files(table, head)
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
    gone = set(removed) | set(staged.deletes_removed)
    taken = commit.prestaged.take(metadata, head, gone) if commit.prestaged is not None else None
    snapshot_id = taken[0] if taken is not None else metadata.new_snapshot_id()
    store = ManifestStore(table, metadata, dry_run=False)
    if taken is not None and commit.prestaged is not None:
        store.written += commit.prestaged.written  # this attempt's now: discarded with it if it does not land
    sequence = commit.starting_sequence_number if commit.use_starting_sequence_number else None
    dropped = list(removed.values()) + _delete_data_files(table, head, staged.deletes_removed)
    try:
        new = write_added_manifest(
            table, metadata, store, snapshot_id, ManifestContent.DATA, [(f, sequence) for f in added]
        )
        kept = (
            taken[1]
            if taken is not None
            else rewrite_manifests_removing(table, metadata, head, snapshot_id, gone, store)
        )
        summary = replace_summary(metadata, head, dropped, added, commit.snapshot_properties)
        stage_replace(tx, table, head, snapshot_id, ([new] if new else []) + kept, summary, store)
    finally:
        staged.manifests_written = list(store.written)
    staged.snapshot_id = snapshot_id
    return staged
