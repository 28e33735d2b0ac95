"""Running an Iceberg data compaction: rewrite the planned groups and commit them, in one or several commits.

Follows Java's ``RewriteDataFilesSparkAction.execute`` (1.10.2):

1. plan (``data_compaction.plan_data_compaction``; a dry run stops here);
2. cut the groups into commits: one commit, or with ``partial-progress.enabled`` batches of
   ``ceil(groups / partial-progress.max-commits)`` groups, each its own ``replace`` snapshot with the same starting
   snapshot and data sequence number (Java's ``BaseCommitService``);
3. per batch: rewrite its groups (``data_compaction_rewrite``), then commit through the one retry loop
   (``data_compaction_commit``: validated against every commit since the start; conflicting groups are skipped
   and reported, their files discarded).

Who rewrites a batch's groups is pluggable (``rewriter``, a :data:`GroupRewriter`): by default
``min(max-concurrent-file-group-rewrites, cpus)`` groups at once (Java's ``max-concurrent-file-group-rewrites``,
default 5), in forked worker processes when the batch is large enough and on local disk
(``data_compaction_workers.rewrite_in_workers``), else on threads of this process (:func:`rewrite_in_process`;
pyarrow decodes and encodes without the GIL), the results in the groups' order whatever the timing; the Spark job (``spark/iceberg_compaction.py``) passes one
that maps the groups over executors. Either way each group goes through :func:`rewrite_one`, the one call of
``rewrite_group``: a group that fails removes the files it had written (the locations its writers opened, recorded
per group: ``data_compaction_rewrite.recording_locations``) and, when an input file cannot be read,
fails with a typed error naming that file (``MissingMetadataError`` / ``CorruptMetadataError``).

Files written for a commit that did not land are removed at once; after ``CommitStateUnknownError`` they are kept
(the commit may have landed) and the run stops. A failed rewrite fails the batch: the files its other groups wrote
are removed and the error propagates (earlier batches stay committed). Without partial progress a failed commit
fails the run (nothing committed); with it, a failed batch is reported and the next one goes on, as in Java.

Example:
    >>> compact_data(table, {"min-input-files": "2", "partial-progress.enabled": "true"}).summary()  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    LakeformatError,
    MissingMetadataError,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import (
    IcebergDataCompactionPlan,
    plan_data_compaction,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_commit import (
    Prestaged,
    RewriteCommit,
    StagedRewrite,
    stage_rewrite,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import (
    RewrittenFiles,
    recording_locations,
    rewrite_group,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy, commit_with_retry

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Transaction

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

log = logging.getLogger(__name__)

#: Rewrites one batch's groups: yields one :class:`RewrittenFiles` per group, in the groups' order, and raises when
#: a group failed (after yielding what the others wrote, so that the caller removes those files too).
GroupRewriter = Callable[
    ["IcebergTable", Sequence[FileGroup], Mapping[str, "DataFile"]], Iterator[RewrittenFiles]
]


@dataclass(frozen=True)
class IcebergDataCompactionResult:
    """The outcome of :func:`compact_data`; ``to_json`` is the operation's document."""

    plan: IcebergDataCompactionPlan
    dry_run: bool
    snapshot_ids: tuple[int, ...] = ()
    groups_committed: int = 0
    files_rewritten: int = 0
    files_added: int = 0
    bytes_added: int = 0
    rows_purged: int = 0
    delete_files_removed: int = 0
    conflicts: tuple[str, ...] = ()
    failed_commits: tuple[str, ...] = ()
    duration_seconds: float = 0.0

    @property
    def snapshot_id(self) -> int | None:
        """The last snapshot committed (None in a dry run or when nothing was committed)."""
        return self.snapshot_ids[-1] if self.snapshot_ids else None

    def to_json(self) -> dict[str, Any]:
        document = self.plan.to_json()
        document.update(
            {
                "dryRun": self.dry_run,
                "snapshotBefore": self.plan.snapshot_id,
                "snapshotId": self.snapshot_id,
                "snapshotIds": list(self.snapshot_ids),
                "groupsCommitted": self.groups_committed,
                "filesRewritten": self.files_rewritten,
                "filesAdded": self.files_added,
                "bytesAdded": self.bytes_added,
                "rowsPurged": self.rows_purged,
                "deleteFilesRemoved": self.delete_files_removed,
                "conflicts": list(self.conflicts),
                "failedCommits": list(self.failed_commits),
                "durationSeconds": round(self.duration_seconds, 3),
            }
        )
        return document

    def summary(self) -> str:
        """The one line the CLI prints and the operator logs (``core/maintenance/results.py``)."""
        from airflow_lakeformat.core.maintenance.results import summary

        return summary(self.to_json())

    def __repr__(self) -> str:
        return f"<IcebergDataCompactionResult {self.summary()}>"


@dataclass
class _Totals:
    snapshot_ids: list[int]
    groups: int = 0
    files_rewritten: int = 0
    files_added: int = 0
    bytes_added: int = 0
    rows_purged: int = 0
    deletes_removed: int = 0

    def add(self, staged: StagedRewrite, kept: Sequence[RewrittenFiles]) -> None:
        if staged.snapshot_id is not None:
            self.snapshot_ids.append(staged.snapshot_id)
        self.groups += len(kept)
        self.files_rewritten += sum(len(r.group.files) for r in kept)
        self.files_added += sum(len(r.outputs) for r in kept)
        self.bytes_added += sum(f.file_size_in_bytes for r in kept for f in r.outputs)
        self.rows_purged += sum(r.rows_deleted for r in kept)
        self.deletes_removed += len(staged.deletes_removed)


def batches(groups: Sequence[FileGroup], options: CompactionOptions) -> list[list[FileGroup]]:
    """Step 2: all groups in one commit, or Java's ``ceil(groups / max-commits)`` groups per commit."""
    if not options.partial_progress_enabled or not groups:
        return [list(groups)]
    size = math.ceil(len(groups) / options.partial_progress_max_commits)
    return [list(groups[i : i + size]) for i in range(0, len(groups), size)]


def _commit_batch(
    table: IcebergTable,
    plan: IcebergDataCompactionPlan,
    groups: Sequence[FileGroup],
    files: Mapping[str, DataFile],
    snapshot_properties: Mapping[str, str],
    policy: RetryPolicy | None,
    rewriter: GroupRewriter,
) -> tuple[StagedRewrite, list[RewrittenFiles]]:
    """Step 3 for one batch: rewrite, commit; files of what did not land removed, unless the outcome is unknown."""
    from airflow_lakeformat.core.iceberg.maintenance.data_compaction_workers import while_workers_run

    written: list[str] = []
    staged, prestaged = StagedRewrite(), Prestaged()
    rewritten: list[RewrittenFiles] = []
    inputs = [c.path for g in groups for c in g.files]
    # the commit's rewritten manifests, written while forked workers rewrite (not when dangling deletes go too)
    ahead = functools.partial(prestaged.write, table, inputs)
    try:
        with while_workers_run(ahead if not plan.options.remove_dangling_deletes else lambda: None):
            for outcome in rewriter(table, groups, files):
                written += outcome.locations
                rewritten.append(outcome)
        if [r.group for r in rewritten] != list(groups):
            raise ValueError(f"{table.name}: the rewriter did not return one result per group, in order")
        commit = RewriteCommit(
            starting_snapshot_id=plan.snapshot_id or 0,
            starting_sequence_number=plan.sequence_number,
            groups=[([files[c.path] for c in r.group.files], r.outputs) for r in rewritten],
            use_starting_sequence_number=plan.options.use_starting_sequence_number,
            remove_dangling_deletes=plan.options.remove_dangling_deletes,
            snapshot_properties=snapshot_properties,
            prestaged=prestaged,
        )

        def stage(tx: Transaction) -> StagedRewrite:
            discard_written(
                table, staged.manifests_written, "a concurrent commit won; validating on the new head"
            )
            return stage_rewrite(tx, table, commit, staged)

        commit_with_retry(table, stage, description="data compaction", policy=policy)
    except CommitStateUnknownError:
        log.warning("%s: data compaction outcome unknown; keeping %d written files", table.name, len(written))
        raise
    except BaseException:
        lost = written + staged.manifests_written + prestaged.unused()
        discard_written(table, lost, "the compaction was not committed")
        raise
    discard_written(table, prestaged.unused(), "written ahead of a commit that did not use them")
    skipped = [loc for n, r in enumerate(rewritten) if n in staged.conflicts for loc in r.locations]
    discard_written(table, skipped, "its group conflicted and was not committed")
    return staged, [r for n, r in enumerate(rewritten) if n not in staged.conflicts]


def compact_data(
    table: IcebergTable,
    options: Mapping[str, str] | CompactionOptions | None = None,
    *,
    dry_run: bool = False,
    where: str | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
    policy: RetryPolicy | None = None,
    rewriter: GroupRewriter | None = None,
) -> IcebergDataCompactionResult:
    """Rewrite the planned groups of ``main``'s head and commit ``replace`` snapshots.

    Args:
        table: a writable table (format v1 or v2).
        options: Java's ``rewrite_data_files`` options by name (``{"min-input-files": "2"}``; see
            ``data_compaction_options``), or :class:`CompactionOptions`.
        dry_run: plan and report only; read, write and commit nothing.
        where: a partition filter (``"cat = 'a'"``), as for :func:`plan_data_compaction`.
        snapshot_properties: extra summary properties of each ``replace`` snapshot (e.g. the commit user).
        policy: the commit retry policy (default: the table's ``commit.retry.*``).
        rewriter: who rewrites each batch's groups (default ``data_compaction_workers.rewrite_in_workers``:
            forked workers or threads; the Spark job maps them over executors). Called only when there is something to rewrite.

    Returns:
        The result; groups that conflict with a concurrent commit are skipped and named in ``conflicts``.

    Raises:
        CommitConflictError, CommitRetriesExhaustedError: without partial progress, the commit did not land (every
            group conflicts, or the starting snapshot left main's history); the written files are removed.
        CommitStateUnknownError: a commit may have landed; its files are kept and the run stops.
    """
    started = time.monotonic()
    plan = plan_data_compaction(table, options, where=where)
    if dry_run or not plan.groups:
        return IcebergDataCompactionResult(plan, dry_run=dry_run, duration_seconds=time.monotonic() - started)
    table.check_writable()
    head = table.snapshot(plan.snapshot_id)
    assert head is not None
    needed = [c.path for g in plan.groups for c in g.files] + [p for g in plan.groups for p in g.delete_files]
    files = data_files_by_path(table, head, needed)
    totals = _Totals([])
    conflicts: list[str] = []
    failed: list[str] = []
    properties = dict(snapshot_properties or {})
    partial = plan.options.partial_progress_enabled
    if rewriter is None:
        from airflow_lakeformat.core.iceberg.maintenance.data_compaction_workers import rewrite_in_workers

        concurrency = min(plan.options.max_concurrent_file_group_rewrites, os.cpu_count() or 1)
        rewriter = functools.partial(rewrite_in_workers, concurrency=concurrency)
    for batch in batches(plan.groups, plan.options):
        try:
            staged, kept = _commit_batch(table, plan, batch, files, properties, policy, rewriter)
        except (CommitConflictError, CommitRetriesExhaustedError) as exc:
            if not partial:
                raise
            log.warning("%s: a partial-progress commit failed: %s", table.name, exc)
            failed.append(str(exc))
            continue
        totals.add(staged, kept)
        conflicts += [staged.conflicts[n] for n in sorted(staged.conflicts)]
    return IcebergDataCompactionResult(
        plan,
        dry_run=False,
        snapshot_ids=tuple(totals.snapshot_ids),
        groups_committed=totals.groups,
        files_rewritten=totals.files_rewritten,
        files_added=totals.files_added,
        bytes_added=totals.bytes_added,
        rows_purged=totals.rows_purged,
        delete_files_removed=totals.deletes_removed,
        conflicts=tuple(conflicts),
        failed_commits=tuple(failed),
        duration_seconds=time.monotonic() - started,
    )


def rewrite_in_process(
    table: IcebergTable, groups: Sequence[FileGroup], files: Mapping[str, DataFile], concurrency: int = 1
) -> Iterator[RewrittenFiles]:
    """The default :data:`GroupRewriter`: this process rewrites the groups, ``concurrency`` of them at once.

    With more than one, ``concurrency - 1`` threads and this one take the next group in turn; the results come in
    the groups' order. After a failure no further group starts; what the others wrote is yielded, then the first
    failing group's error (in group order) is raised.

    Args:
        table: the table.
        groups: the batch's groups.
        files: the ``DataFile`` of every input and delete file of the groups, by path.
        concurrency: how many groups are rewritten at once (1: one after the other, in this thread).

    Example:
        >>> [r.group for r in rewrite_in_process(table, groups, files, concurrency=2)] == list(groups)  # doctest: +SKIP
        True
    """
    if concurrency <= 1 or len(groups) <= 1:
        for group in groups:
            yield rewrite_one(table, group, files)
        return
    results: list[RewrittenFiles | None] = [None] * len(groups)
    errors: dict[int, BaseException] = {}
    queue = iter(range(len(groups)))
    lock, stop = threading.Lock(), threading.Event()

    def work() -> None:
        while not stop.is_set():
            with lock:
                n = next(queue, None)
            if n is None:
                return
            try:
                results[n] = rewrite_one(table, groups[n], files)
            except BaseException as exc:  # handed to the caller below, in group order
                errors[n] = exc
                stop.set()

    workers = [
        threading.Thread(target=work, name=f"compaction-rewrite-{i}", daemon=True)
        for i in range(min(concurrency, len(groups)) - 1)
    ]
    for worker in workers:
        worker.start()
    try:
        work()
    finally:
        for worker in workers:
            worker.join()
    yield from (r for r in results if r is not None)
    if errors:
        raise errors[min(errors)]


def rewrite_one(table: IcebergTable, group: FileGroup, files: Mapping[str, DataFile]) -> RewrittenFiles:
    """Rewrite one group (``data_compaction_rewrite.rewrite_group``), wherever it runs (this process, an executor).

    A failure removes the files the group had already written (every location its writers opened, finished or
    not, recorded for this group only) and, when one of the group's input files cannot be read, becomes a typed
    error naming that file.

    Args:
        table: the table, writable or opened read-only from its metadata file (an executor).
        group: a planned group.
        files: the ``DataFile`` of every input and delete file of the group, by path.

    Raises:
        MissingMetadataError: an input file of the group does not exist.
        CorruptMetadataError: an input file of the group is not readable Parquet.

    Example:
        >>> rewrite_one(table, plan.groups[0], files).outputs  # doctest: +SKIP
    """
    with recording_locations() as opened:
        try:
            return rewrite_group(table, group, files)
        except Exception as exc:
            discard_written(table, opened, "its group failed while being rewritten")
            named = None if isinstance(exc, LakeformatError) else unreadable_input(table, group)
            if named is None:
                raise
            raise named from exc


def unreadable_input(table: IcebergTable, group: FileGroup) -> LakeformatError | None:
    """The typed error for the first input or delete file of ``group`` that is missing or not Parquet, if any."""
    import pyarrow.parquet as pq

    where = f"compaction group of partition {group.partition!r}"
    for path in [c.path for c in group.files] + list(group.delete_files):
        try:
            with table.table.io.new_input(path).open() as stream:
                pq.read_metadata(stream)
        except FileNotFoundError:
            return MissingMetadataError(path, f"the {where}")
        except Exception as exc:
            return CorruptMetadataError(path, f"data file of the {where} cannot be read as Parquet ({exc})")
    return None


def discard_written(table: IcebergTable, locations: list[str], why: str) -> None:
    """Remove files this run wrote that no snapshot references (only when their commit definitely did not land)."""
    if not locations:
        return
    from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

    log.info("%s: discarding %d unpublished files (%s)", table.name, len(locations), why)
    fs = table.io.fs
    discard_unpublished(table.io, [str(fs._strip_protocol(p)) for p in locations], kind="unpublished")
    locations.clear()
