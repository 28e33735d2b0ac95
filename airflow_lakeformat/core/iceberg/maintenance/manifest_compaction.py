"""Iceberg manifest compaction, the analog of Paimon's full/minor: Java's ``RewriteManifests`` and merge policy.

**full** follows Java's ``BaseRewriteManifests`` / ``RewriteManifestsSparkAction`` (procedure
``rewrite_manifests``; reference 3c), over every partition spec of the branch head's data manifests:

1. Read the head snapshot's manifest list; split data from delete manifests (delete manifests are carried
   over untouched).
2. Per spec (``manifest_rewrite``): unless the group is one manifest under the target, read the live entries
   (DELETED tombstones dropped), repair invalid ``split_offsets`` (reference 4.7), cluster by partition and
   write them as EXISTING entries with their snapshot ids and data/file sequence numbers preserved,
   explicitly, cut at ``commit.manifest.target-size-bytes`` (default 8 MiB; ``manifest_writer``).
3. Commit a ``replace`` snapshot whose manifest list is: the new manifests, the kept data manifests, the
   delete manifests (``BaseRewriteManifests.apply`` order). Summary: ``manifests-created``,
   ``manifests-kept``, ``manifests-replaced``, ``entries-processed`` (Java's keys), ``changed-partition-count``
   0 and the parent's ``total-*`` figures (nothing changed). Parent: the head; schema id: the current one;
   sequence number: the next one (v2), while the rewritten entries keep their own.

**minor** applies Java's commit-time ``ManifestMergeManager`` policy (``manifest_merge``) to the data
manifests: ``commit.manifest-merge.enabled`` (Java default true), ``commit.manifest.min-count-to-merge``
(100) and the target size; a merged bin becomes one manifest (DELETED entries dropped, ADDED turned
EXISTING; invalid ``split_offsets`` nulled as in a full rewrite). When no bin is merged, nothing is
committed, even if manifests without live files could be dropped.

Delete manifests are never rewritten: Java's ``BaseRewriteManifests`` leaves them alone, and pyiceberg 0.12's
v2 ``data_file`` read schema lacks ``referenced_data_file`` (field 143), so a rewrite through it would lose
that field of position-delete files.

**Commit** (``commit.commit_with_retry``, the one retry loop): every attempt plans on the latest metadata,
writes its manifests and manifest list, and stages ``AddSnapshotUpdate`` + ``SetSnapshotRefUpdate`` with
``AssertRefSnapshotId(branch, head)``. A concurrent commit fails the requirement and the plan is rebuilt on
the new head (stricter than Java, which re-validates and keeps its manifests when the replaced ones are
still there), so the manifests it replaces are in the current snapshot (Java's
``validateDeletedManifests``, re-checked by :func:`validate_replace`); before staging, the live-file count of created and replaced manifests must
match (``validateFilesCounts``). Files of an attempt are discarded (``maintenance.deletion
.discard_unpublished``) only when that attempt definitely did not land: a conflict, exhausted retries, a
validation failure, or a failure before the commit was sent. After ``CommitStateUnknownError`` they are kept.

Planning (which manifests a run replaces and writes) is ``manifest_compaction_plan``; this module commits a
plan and returns the result.

**Dry run** plans identically, encoding the manifests in memory, so it reports the figures a real run
reaches; it writes and commits nothing. Format v3 is refused (``UnsupportedWriteVersionError``), and so are
tables opened read-only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import write_manifest_list
from pyiceberg.table import Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
)
from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction_plan import (
    ManifestCompactionPlan,
    Mode,
    build_plan,
    check_arguments,
    plan_manifest_compaction,
    validate_replace,
)
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry
from airflow_lakeformat.core.iceberg.write.manifest_writer import ManifestStore, MemoryOutputFile
from airflow_lakeformat.core.maintenance.result_repr import short_repr

log = logging.getLogger(__name__)

OPERATION = "compact-manifests"
#: Snapshot summary totals a ``replace`` without file changes carries over from its parent (Java
#: ``SnapshotProducer.summary`` adds zero deltas to the previous totals).
TOTAL_KEYS = (
    "total-data-files",
    "total-delete-files",
    "total-records",
    "total-files-size",
    "total-position-deletes",
    "total-equality-deletes",
)


@short_repr
@dataclass(frozen=True)
class IcebergManifestCompactionResult:
    """The outcome of :func:`compact_manifests`; ``to_json`` is the operation's JSON document."""

    table: str
    mode: Mode
    dry_run: bool
    snapshot_before: int | None
    snapshot_id: int | None  # the replace snapshot committed; None in a dry run or when nothing changed
    manifests_before: int
    bytes_before: int
    manifests_after: int
    bytes_after: int
    manifests_rewritten: int
    entries_rewritten: int
    split_offsets_cleared: int
    duration_seconds: float
    created_manifests: tuple[str, ...] = field(default=(), repr=False)

    @property
    def changed(self) -> bool:
        return self.manifests_rewritten > 0

    def to_json(self) -> dict[str, Any]:
        """The JSON document (camelCase keys; ``merge`` is ``none`` when nothing is or would be merged)."""
        return {
            "operation": OPERATION,
            "format": "iceberg",
            "table": self.table,
            "mode": self.mode,
            "dryRun": self.dry_run,
            "merge": self.mode if self.changed else "none",
            "snapshotBefore": self.snapshot_before,
            "snapshotId": self.snapshot_id,
            "manifestsBefore": self.manifests_before,
            "bytesBefore": self.bytes_before,
            "manifestsAfter": self.manifests_after,
            "bytesAfter": self.bytes_after,
            "manifestsRewritten": self.manifests_rewritten,
            "entriesRewritten": self.entries_rewritten,
            "splitOffsetsCleared": self.split_offsets_cleared,
            "durationSeconds": round(self.duration_seconds, 3),
        }

    def summary(self) -> str:
        """One human line: what the compaction did (or would do)."""
        from airflow_lakeformat.core.maintenance.results import summary

        line = summary(self.to_json())
        if self.split_offsets_cleared:
            line += f"; cleared {self.split_offsets_cleared} invalid split_offsets"
        return line


# -- planning --------------------------------------------------------------------------------------


def _replace_snapshot(
    metadata: TableMetadata,
    head: Snapshot,
    plan: ManifestCompactionPlan,
    snapshot_id: int,
    store: ManifestStore,
    attempt: int,
    snapshot_properties: Mapping[str, str] | None = None,
) -> tuple[tuple[TableUpdate, ...], tuple[TableRequirement, ...]]:
    """Write the manifest list and build the updates and requirement of the ``replace`` commit; the
    caller's ``snapshot_properties`` join the summary (the computed keys win over a clash)."""
    sequence_number = metadata.next_sequence_number()
    location = store.manifest_list_location(snapshot_id, attempt)
    output = MemoryOutputFile(location)
    codec: Any = metadata.properties.get("write.avro.compression-codec", "gzip")
    with write_manifest_list(
        int(metadata.format_version),  # type: ignore[arg-type]
        output,
        snapshot_id,
        head.snapshot_id,
        sequence_number,
        codec,
    ) as writer:
        writer.add_manifests(list(plan.manifests_after))
    store.put(location, output.buffer.getvalue())
    properties = {
        **{str(k): str(v) for k, v in (snapshot_properties or {}).items()},
        "manifests-created": str(len(plan.created)),
        "manifests-kept": str(len(plan.kept)),
        "manifests-replaced": str(len(plan.replaced)),
        "entries-processed": str(plan.entries_rewritten),
        "changed-partition-count": "0",
    }
    if head.summary is not None:
        for key in TOTAL_KEYS:
            value = head.summary.get(key)
            if value is not None:
                properties[key] = str(value)
    snapshot = Snapshot(  # type: ignore[call-arg]
        snapshot_id=snapshot_id,
        parent_snapshot_id=head.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=max(int(time.time() * 1000), metadata.last_updated_ms),
        manifest_list=location,
        summary=Summary(Operation.REPLACE, **properties),
        schema_id=metadata.current_schema_id,
    )
    ref = metadata.refs[plan.branch]
    updates: tuple[TableUpdate, ...] = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(  # type: ignore[call-arg]
            snapshot_id=snapshot_id,
            ref_name=plan.branch,
            type=SnapshotRefType.BRANCH,
            # pyiceberg's producers drop a branch's retention settings here; keep them.
            max_ref_age_ms=ref.max_ref_age_ms,
            max_snapshot_age_ms=ref.max_snapshot_age_ms,
            min_snapshots_to_keep=ref.min_snapshots_to_keep,
        ),
    )
    requirements: tuple[TableRequirement, ...] = (
        AssertRefSnapshotId(snapshot_id=head.snapshot_id, ref=plan.branch),  # type: ignore[call-arg]
    )
    return updates, requirements


class _Attempts:
    """The files each commit attempt wrote, and whether the latest attempt reached the commit."""

    def __init__(self, table: IcebergTable) -> None:
        self.table = table
        self.count = 0
        self.written: list[str] = []
        self.staged = False
        self.snapshot_id: int | None = None

    def discard(self, why: str) -> None:
        """Remove the latest attempt's files: only when that attempt definitely did not land."""
        paths, self.written = self.written, []
        if not paths:
            return
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        log.info(
            "%s: discarding %d files of an unpublished manifest compaction (%s)",
            self.table.name,
            len(paths),
            why,
        )
        fs = self.table.io.fs
        discard_unpublished(self.table.io, [str(fs._strip_protocol(p)) for p in paths], kind="manifest")


def _stage_attempt(
    tx: Transaction,
    attempts: _Attempts,
    mode: Mode,
    branch: str,
    target_size_bytes: int | None,
    snapshot_properties: Mapping[str, str] | None,
) -> ManifestCompactionPlan:
    """One commit attempt: plan on the transaction's metadata, write the new manifests and stage the
    ``replace`` snapshot. Called again only after ``CommitFailedException``: the previous attempt did not land."""
    table = attempts.table
    attempts.discard("a concurrent commit won; re-planning on the new head")
    attempts.staged = False
    attempts.snapshot_id = None
    metadata = tx.table_metadata
    store = ManifestStore(table, metadata, dry_run=False)
    snapshot_id = metadata.new_snapshot_id()
    try:
        plan = build_plan(table, metadata, mode, branch, target_size_bytes, store, snapshot_id)
        if plan.changed:
            head = metadata.snapshot_by_id(plan.snapshot_before) if plan.snapshot_before is not None else None
            assert head is not None
            validate_replace(plan, plan.manifests_before)
            updates, requirements = _replace_snapshot(
                metadata, head, plan, snapshot_id, store, attempts.count, snapshot_properties
            )
            tx._apply(updates, requirements)
            attempts.snapshot_id = snapshot_id
    finally:
        attempts.written = list(store.written)
        attempts.count += 1
    attempts.staged = True
    return plan


def compact_manifests(
    table: IcebergTable,
    mode: Mode = "full",
    *,
    dry_run: bool = False,
    branch: str = MAIN_BRANCH,
    target_size_bytes: int | None = None,
    policy: RetryPolicy | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
) -> IcebergManifestCompactionResult:
    """Compact the data manifests of the head of ``branch`` and commit a ``replace`` snapshot.

    Args:
        table: A writable table (format v1 or v2, not opened from a metadata file).
        mode: ``full``: Java ``RewriteManifests`` (cluster by partition, cut at the target size); ``minor``:
            Java's commit-time merge policy (``commit.manifest.min-count-to-merge``, ...).
        dry_run: Plan and report only; write and commit nothing.
        branch: The branch to compact (default ``main``).
        target_size_bytes: Manifest target size (default: ``commit.manifest.target-size-bytes``, 8 MiB).
        policy: Commit retry policy (default: the table's ``commit.retry.*``).
        snapshot_properties: Extra summary properties of the ``replace`` snapshot, e.g. the commit user
            ``{"lakeformat.commit-user": "airflow-dag-task"}`` (the operation's own keys win over a clash).

    Returns:
        The result; ``snapshot_id`` is the new snapshot, None in a dry run or when nothing changed.

    Raises:
        ReadOnlyTableError, UnsupportedWriteVersionError: The table cannot be committed to (v3 included).
        TagNotFoundError: No such branch.
        CommitRetriesExhaustedError, CommitConflictError: Nothing was published (the written files are removed).
        CommitStateUnknownError: The commit may have landed; the written files are kept.

    Example:
        >>> result = compact_manifests(open_table("/wh/events"), "full")  # doctest: +SKIP
        >>> result.summary()  # doctest: +SKIP
        '/wh/events: full manifest compaction merged 120 manifests (530.1 KiB) into 1 (61.2 KiB); committed ...'
    """
    started = time.monotonic()
    check_arguments(table, mode, target_size_bytes)
    table.check_writable()
    if dry_run:
        return _result(plan_manifest_compaction(table, mode, branch=branch, target_size_bytes=target_size_bytes),
                       None, True, started)  # fmt: skip

    attempts = _Attempts(table)

    def stage(tx: Transaction) -> ManifestCompactionPlan:
        return _stage_attempt(tx, attempts, mode, branch, target_size_bytes, snapshot_properties)

    try:
        plan = commit_with_retry(table, stage, description=f"{mode} manifest compaction", policy=policy)
    except CommitStateUnknownError:
        log.warning("%s: manifest compaction outcome unknown; keeping %d written files", table.name,
                    len(attempts.written))  # fmt: skip
        raise
    except (CommitRetriesExhaustedError, CommitConflictError):
        attempts.discard("the commit was not published")
        raise
    except BaseException:
        if not attempts.staged:  # failed while planning or writing: nothing was sent to the catalog
            attempts.discard("the attempt failed before committing")
        raise
    return _result(plan, attempts.snapshot_id, False, started)


def _result(
    plan: ManifestCompactionPlan, snapshot_id: int | None, dry_run: bool, started: float
) -> IcebergManifestCompactionResult:
    after = plan.manifests_after
    return IcebergManifestCompactionResult(
        table=plan.table,
        mode=plan.mode,
        dry_run=dry_run,
        snapshot_before=plan.snapshot_before,
        snapshot_id=snapshot_id if plan.changed else None,
        manifests_before=len(plan.manifests_before),
        bytes_before=sum(m.manifest_length for m in plan.manifests_before),
        manifests_after=len(after),
        bytes_after=sum(m.manifest_length for m in after),
        manifests_rewritten=len(plan.replaced),
        entries_rewritten=plan.entries_rewritten,
        split_offsets_cleared=plan.split_offsets_cleared,
        duration_seconds=time.monotonic() - started,
        created_manifests=tuple(m.manifest_path for m in plan.created),
    )


__all__ = [
    "IcebergManifestCompactionResult",
    "compact_manifests",
]
