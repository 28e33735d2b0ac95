"""Partition overwrite of an Iceberg table: one ``overwrite`` snapshot that adds the new rows' files and removes
the files they replace, validated against every commit since the write started.

Two scopes, as Spark's writes to Iceberg have them (Java 1.10.2):

* **dynamic** (``INSERT OVERWRITE`` with ``spark.sql.sources.partitionOverwriteMode=dynamic``; Java's
  ``BaseReplacePartitions``): the partitions the new rows fall into, by the current spec's transforms
  (``partitioned.split_by_partition``), are replaced. A live file is replaced when its spec is the current one
  and its partition tuple EQUALS one of them, value by value (a null partition value equals null; a
  ``days(ts)`` partition is the day number), never by path. Delete files of those partitions go too (Java's
  ``dropPartition`` drops both). Files of older specs stay, as in Java. On an unpartitioned spec the whole table
  is replaced. No rows replace nothing and commit nothing.
* **filter** (``INSERT OVERWRITE ... WHERE`` / ``df.writeTo(t).overwrite(condition)``; Java's
  ``OverwriteFiles.overwriteByRowFilter`` with ``validateAddedFilesMatchOverwriteFilter``): every input row must
  satisfy the filter, else :class:`RegisterError` before anything is written ("Cannot append file with rows
  that do not match filter"). A live data file is removed when the filter holds for all its rows (strict
  projection onto its spec's partition, else Java's strict metrics evaluation), kept when it holds for none
  (inclusive projection, then inclusive metrics), and a file where it may hold for some rows only is refused
  as Java refuses it ("Cannot delete file where some, but not all, rows match filter"). A delete file goes
  when the filter holds for its whole partition. ``*`` (or ``k=v`` from the CLI) are filters too.

Each attempt of the one retry loop (``commit.commit_with_retry``) plans on the latest head of ``main``:

1. **Validate** (Java's ``validateNoConflictingData`` / ``validateNoConflictingDeletes``, serializable
   isolation, Spark's default): the starting snapshot must still be an ancestor of the head, and no file
   added since the start by an ``append``, ``overwrite`` or ``delete`` snapshot may lie in the replaced scope
   (a concurrent append to a partition being overwritten would be silently dropped): :class:`CommitConflictError`,
   nothing committed. Files a ``replace`` (compaction) added are not conflicts: they hold the same rows and
   are replaced with the rest.
2. **Plan** the removed files on that head (step above), rewrite the manifests holding them (DELETED entries,
   ``replace.rewrite_manifests_removing``) and write one manifest of the new files (ADDED, sequence numbers
   inherited from the commit).
3. **Stage** the ``overwrite`` snapshot (summary: added/deleted files, records, sizes, totals from the parent)
   with ``AssertRefSnapshotId(main, head)``. A losing attempt's manifests are deleted; the data files are
   written once, before the loop, and deleted when the write fails for sure.

A delete file held in a manifest that also holds an entry with ``referenced_data_file`` is kept (pyiceberg 0.12's
v2 read schema would drop that field when rewriting the manifest); a kept delete file only refers to rows
that are gone or in files it does not apply to (older sequence numbers), so reads are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import ManifestContent
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation

from airflow_lakeformat.core.errors import CommitConflictError, UnsupportedFormatError
from airflow_lakeformat.core.iceberg.metadata.entries import CONTENT_DATA, LiveFile
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests
from airflow_lakeformat.core.iceberg.metadata.partition_values import partition_json, partition_result_types
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore, read_entries
from airflow_lakeformat.core.iceberg.write.overwrite_scope import OverwriteScope, partition_key
from airflow_lakeformat.core.iceberg.write.replace import (
    operation_summary,
    rewrite_manifests_removing,
    stage_replace,
    write_added_manifest,
)

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.snapshots import Snapshot

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

#: Operations whose added files conflict with an overwrite of their scope (Java's validated operations).
CONFLICTING_OPERATIONS = frozenset({Operation.APPEND, Operation.OVERWRITE, Operation.DELETE})


@dataclass
class StagedOverwrite:
    """The outcome of the last attempt: the snapshot, what it removed, the manifests it wrote."""

    snapshot_id: int | None = None
    removed: list[LiveFile] = field(default_factory=list)
    manifests_written: list[str] = field(default_factory=list)
    earlier_manifests: list[str] = field(default_factory=list)


def main_head(metadata: TableMetadata) -> Snapshot | None:
    """``main``'s head snapshot, None for a table without one."""
    ref = metadata.refs.get(MAIN_BRANCH)
    return metadata.snapshot_by_id(ref.snapshot_id) if ref is not None else None


def snapshots_since(metadata: TableMetadata, head: Snapshot | None, start_id: int | None) -> list[Snapshot]:
    """The snapshots of ``main`` after ``start_id`` up to ``head``, newest first.

    Raises:
        CommitConflictError: ``start_id`` is no longer an ancestor of ``head`` (``main`` was rolled back).
    """
    found: list[Snapshot] = []
    current = head
    while current is not None and current.snapshot_id != start_id:
        found.append(current)
        parent = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent) if parent is not None else None
    if start_id is not None and current is None:
        raise CommitConflictError(
            f"overwrite: the starting snapshot {start_id} is no longer an ancestor of main's head "
            f"{head.snapshot_id if head else None} (rolled back?); nothing was committed"
        )
    return found


def find_conflicts(
    metadata: TableMetadata,
    head: Snapshot | None,
    start_id: int | None,
    scope: OverwriteScope,
    live: Sequence[LiveFile],
) -> list[str]:
    """Step 1: the files added since the start, by a conflicting operation, in the replaced scope."""
    operations = {
        s.snapshot_id: s.summary.operation if s.summary is not None else None
        for s in snapshots_since(metadata, head, start_id)
    }
    found = []
    for f in live:
        operation = operations.get(f.snapshot_id) if f.snapshot_id is not None else None
        if operation in CONFLICTING_OPERATIONS and scope.may_touch(f.spec_id, f.partition):
            kind = operation.value if operation is not None else "?"
            found.append(f"{f.path} ({f.content_name}, added by {kind} snapshot {f.snapshot_id})")
    return found


def _data_files(table: IcebergTable, head: Snapshot, paths: set[str]) -> dict[str, DataFile]:
    """The ``DataFile`` records (metrics included) of live files of ``head`` by path."""
    if not paths:
        return {}
    holders = {f.manifest_path for f in live_files(table, head) if f.path in paths}
    manifests = [m for m in read_manifests(table, head) if m.manifest_path in holders]
    found: dict[str, DataFile] = {}
    for _manifest, entries in read_entries(table, manifests, f"snapshot {head.snapshot_id}"):
        for entry in entries:
            if entry.data_file.file_path in paths:
                found[entry.data_file.file_path] = entry.data_file
    return found


def plan_removed(
    table: IcebergTable, head: Snapshot | None, scope: OverwriteScope, live: Sequence[LiveFile]
) -> list[LiveFile]:
    """Step 2's choice: the live data and delete files the overwrite removes (module docstring).

    Raises:
        UnsupportedFormatError: the filter selects some but not all rows of a data file.
    """
    if head is None:
        return []
    unsafe = {f.manifest_path for f in live if f.referenced_data_file is not None}
    removed: list[LiveFile] = []
    undecided: list[LiveFile] = []
    for live_file in live:
        verdict = scope.partition_verdict(live_file.spec_id, live_file.partition)
        if verdict is True and not (live_file.content != CONTENT_DATA and live_file.manifest_path in unsafe):
            removed.append(live_file)
        elif verdict is None and live_file.content == CONTENT_DATA:
            undecided.append(live_file)
    records = _data_files(table, head, {f.path for f in undecided})
    for live_file in undecided:
        verdict = scope.metrics_verdict(records[live_file.path])
        if verdict is None:
            raise UnsupportedFormatError(
                table.name,
                f"overwrite filter {scope.describe()!r} matches some but not all rows of data file {live_file.path} "
                "(Java refuses it too: 'Cannot delete file where some, but not all, rows match filter'); "
                "filter on partition columns; nothing was written",
            )
        if verdict:
            removed.append(live_file)
    return removed


def stage_overwrite(
    tx: Transaction,
    table: IcebergTable,
    *,
    start_id: int | None,
    scope: OverwriteScope,
    added: Sequence[DataFile],
    properties: Mapping[str, str],
    staged: StagedOverwrite,
) -> StagedOverwrite:
    """One attempt (module docstring, steps 1-3), on the transaction's metadata.

    Raises:
        CommitConflictError: a concurrent commit added files to the replaced scope, or rolled ``main`` back.
        UnsupportedFormatError: the filter selects some but not all rows of a data file.
    """
    metadata = tx.table_metadata
    staged.earlier_manifests += staged.manifests_written
    staged.snapshot_id, staged.removed, staged.manifests_written = None, [], []
    head = main_head(metadata)
    live = live_files(table, head) if head is not None else []
    conflicts = find_conflicts(metadata, head, start_id, scope, live)
    if conflicts:
        raise CommitConflictError(
            f"{table.name}: overwrite of {scope.describe()}: {len(conflicts)} file(s) committed since the write "
            f"started lie in the replaced partitions ({'; '.join(conflicts[:3])}); nothing was committed, "
            "re-run the write to replace them too"
        )
    staged.removed = plan_removed(table, head, scope, live)
    snapshot_id = metadata.new_snapshot_id()
    store = ManifestStore(table, metadata, dry_run=False)
    removed_records: list[DataFile] = []
    try:
        new = write_added_manifest(
            table, metadata, store, snapshot_id, ManifestContent.DATA, [(f, None) for f in added]
        )
        kept: list[Any] = []
        if head is not None:
            gone = {f.path for f in staged.removed}
            kept = rewrite_manifests_removing(
                table, metadata, head, snapshot_id, gone, store, removed_records
            )
        summary = operation_summary(metadata, head, removed_records, added, properties)
        stage_replace(tx, table, head, snapshot_id, ([new] if new else []) + kept, summary, store)
    finally:
        staged.manifests_written = list(store.written)
    staged.snapshot_id = snapshot_id
    return staged


def describe_partitions(metadata: TableMetadata, files: Sequence[LiveFile]) -> list[dict[str, Any]]:
    """The distinct partitions of ``files`` as JSON objects (``{"specId", "partition"}``), in a stable order."""
    seen: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] = {}
    specs, schemas = metadata.specs(), metadata.schemas
    for live_file in files:
        key = (live_file.spec_id, partition_key(live_file.partition))
        if key not in seen:
            spec = specs.get(live_file.spec_id)
            types = partition_result_types(spec, schemas) if spec is not None else []
            seen[key] = {
                "specId": live_file.spec_id,
                "partition": partition_json(spec, types, live_file.partition),
            }
    return sorted(seen.values(), key=lambda item: (item["specId"], repr(sorted(item["partition"].items()))))
