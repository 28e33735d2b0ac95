"""Iceberg snapshot expiry that deletes the files only expired snapshots reached, planned as a value.

Java 1.10.2's ``expire_snapshots`` procedure (``ExpireSnapshotsSparkAction``: commit ``RemoveSnapshots`` with
``cleanExpiredFiles(false)``, then delete ``fileDS(original, expiredIds).except(fileDS(updated))``), the
reachable-set approach of ``ReachableFileCleanup``; reference 3a, 2.1, 4.8. pyiceberg 0.12's expiry
deletes nothing (py#2604).

**Plan** (:func:`plan_snapshot_expiry`, deletes and commits nothing):

1. Options and selection: ``expiry_rules`` (Java's ``RemoveSnapshots``: older-than, retain-last, explicit
   ids, per-ref ``max-ref-age-ms``/``max-snapshot-age-ms``/``min-snapshots-to-keep``, expired refs removed,
   ``gc.enabled``). ``clean_expired_metadata`` also removes partition specs and schemas no retained
   snapshot uses (the default spec and current schema stay), as Java's ``cleanExpiredMetadata(true)``.
2. Expired side: the manifest lists of the expired snapshots, their manifests, and the statistics and
   partition-statistics files of those snapshots. Retained side: the same for every remaining snapshot of
   every ref (``reachability``; every manifest list and manifest is read at most once per run).
3. Files to delete: manifest lists and manifests only expired snapshots reach; the live content files
   (data, position and equality deletes, deletion-vector Puffin files) of those manifests that no
   retained manifest keeps live; statistics files no retained snapshot has. Paths are compared as the
   store sees them (``s3a://b/k`` and ``s3://b/k`` are one object), stricter than Java's string compare.
   A manifest list or manifest of a snapshot still in the table that is missing or undecodable is a
   typed error naming the file; nothing is deleted.

**Execute** (:func:`execute_snapshot_expiry`):

1. Re-load the table and re-check the plan: every planned snapshot and ref removal must still be one
   under the same rules and clock (:class:`PlanOutdatedError` otherwise; nothing is committed).
2. Write the run's journal (``expiry_commit``), then commit the metadata update through the one retry
   loop (``commit.commit_with_retry``: the table's catalog, or the Hadoop layout's exclusive create).
   Every attempt re-checks the plan on the attempt's base and asserts every ref unchanged. A commit whose
   outcome is unknown (:class:`CommitStateUnknownError`) deletes nothing (apache/iceberg #12792).
3. Delete through the one deletion module (``core/maintenance/deletion.py``) in Java's order: content
   files, manifests, manifest lists, statistics files, so that a crash anywhere leaves a state the next
   run finishes from the journal (the re-run's deletion set includes the leftovers of snapshots a journal
   names that are gone from the table). Before each phase, and before each batch at most once a second,
   the table is re-loaded; snapshots committed meanwhile are folded into the retained side and a file
   that became reachable is kept (``keptByRecheck``). A failed delete stops the run before the next phase
   (:class:`DeletionFailedError`); the journal stays, so a re-run finishes.
4. Remove the journal (and those of earlier runs it finished).

A dry run does 1 and the re-checks of 3 and deletes, writes and commits nothing. Metadata files
(``*.metadata.json``, ``version-hint.text``) are never deleted by expiry, as in Java. Format v3 tables are
refused for real runs (pyiceberg 0.12 cannot write v3 metadata), and so are tables opened read-only.

Example:
    >>> from airflow_lakeformat.core.iceberg.catalog.catalog import open_table
    >>> table = open_table("/warehouse/db/events")  # doctest: +SKIP
    >>> plan = plan_snapshot_expiry(table, older_than="2024-05-01T00:00:00Z", retain_last=3)  # doctest: +SKIP
    >>> execute_snapshot_expiry(table, plan, dry_run=False).summary()  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    DeletionFailedError,
    MaintenanceRefusedError,
    PlanOutdatedError,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_commit import (
    ExpiryJournal,
    is_remote_catalog,
    journal_finished,
    new_journal,
    read_journals,
    remove_journals,
    stage_expiry,
    write_journal,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_files import (
    CHECKSUM_KIND,
    ExpiredInputs,
    RetainedSide,
    deletion_requests,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_result import (
    IcebergExpiryPlan,
    IcebergExpiryResult,
    java_counts,
)
from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import (
    IcebergExpiryOptions,
    OlderThan,
    Selection,
    check_gc_enabled,
    select_expired,
)
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.reach.reachability import Loader, ReachabilityReader
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

Clock = Callable[[], float]
# (task, requests, the retained side as folded so far) -> the phase's report
PhaseRunner = Callable[[str, list[DeleteRequest], RetainedSide], DeletionReport]
RECHECK_INTERVAL_SECONDS = 1.0
CONTENT_KINDS = ("data-file", "position-delete-file", "equality-delete-file")
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("deleting data and delete files of expired snapshots", CONTENT_KINDS),
    ("deleting manifests of expired snapshots", ("manifest",)),
    ("deleting manifest lists of expired snapshots", ("manifest-list",)),
    ("deleting statistics files of expired snapshots", ("statistics", "partition-statistics")),
)
# -- planning ------------------------------------------------------------------------------------


def refresh_if_changed(table: IcebergTable) -> None:
    """Re-load the table, unless it is in the Hadoop layout and its current ``v<N>.metadata.json`` is still the
    one loaded (found as its catalog finds it: the hint, then ``v<N+1>`` while it exists); the JSON of a
    table with thousands of snapshots is megabytes, parsed once instead of before every phase."""
    from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
    from airflow_lakeformat.core.iceberg.metadata.metadata_files import METADATA_DIR, find_current_version

    if table.read_only:
        return
    if isinstance(getattr(table.table, "catalog", None), HadoopLayoutCatalog):
        current = find_current_version(table.io, table.io.join(table.root, METADATA_DIR))
        if current is not None and table.io.uri(current.path) == table.metadata_location:
            return
    table.refresh()


def _journal_snapshots(journal: ExpiryJournal, gone: Iterable[int]) -> ExpiredInputs:
    ids = set(gone)
    return ExpiredInputs(
        snapshots=[
            SimpleNamespace(snapshot_id=i, manifest_list=m) for i, m in journal.snapshots.items() if i in ids
        ],
        statistics={p: None for p, i in journal.statistics.items() if i in ids},
        partition_statistics={p: None for p, i in journal.partition_statistics.items() if i in ids},
        missing_ok=True,
    )


def _unused_specs_and_schemas(
    options: IcebergExpiryOptions,
    metadata: Any,
    retained: Sequence[Any],
    reader: ReachabilityReader,
    decisions: list[str],
) -> tuple[list[int], list[int]]:
    """Java's ``cleanExpiredMetadata``: specs and schemas no retained snapshot uses (default/current stay);
    none unless the options ask for it."""
    if not options.clean_expired_metadata:
        return [], []
    specs = {metadata.default_spec_id}
    for rows in reader.manifests_of_many(retained):
        specs.update(row.spec_id for row in rows)
    schemas = {metadata.current_schema_id} | {s.schema_id for s in retained if s.schema_id is not None}
    specs_removed = sorted(s.spec_id for s in metadata.partition_specs if s.spec_id not in specs)
    schemas_removed = sorted(s.schema_id for s in metadata.schemas if s.schema_id not in schemas)
    if specs_removed or schemas_removed:
        decisions.append(
            f"clean_expired_metadata: partition specs {specs_removed} and schemas {schemas_removed} "
            "are used by no retained snapshot"
        )
    return specs_removed, schemas_removed


def plan_snapshot_expiry(
    table: IcebergTable,
    *,
    older_than: OlderThan = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
    clean_expired_metadata: bool = False,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    loader: Loader | None = None,
) -> IcebergExpiryPlan:
    """Plan an expiry (module docstring); reads metadata, deletes and commits nothing.

    Args:
        table: the table (re-loaded first unless opened read-only).
        older_than: expire snapshots older than this: a ``timedelta`` before now, a ``datetime``, an ISO-8601
            or duration string (default ``history.expire.max-snapshot-age-ms``, 5 days).
        retain_last: keep at least this many ancestors of each branch head (default
            ``history.expire.min-snapshots-to-keep``, 1).
        snapshot_ids: expire these too (Java's ``expireSnapshotId``: in addition to the age rule).
        clean_expired_metadata: also remove partition specs and schemas no retained snapshot uses.
        clock: seconds since the epoch (``now`` is captured once, as Java does).
        progress: progress reporter for the manifest reads.
        loader: reads manifest lists and manifests in bulk (default: a thread pool; the Spark job passes
            one that reads on executors).

    Returns:
        The plan.

    Raises:
        MaintenanceRefusedError: ``gc.enabled=false``, ``retain_last < 1``, an explicit id that heads a ref.
        CorruptMetadataError, MissingMetadataError: unreadable metadata (the message names the file).

    Example:
        >>> plan = plan_snapshot_expiry(table, older_than="7 d", retain_last=5)  # doctest: +SKIP
        >>> plan.to_json()["files"]  # doctest: +SKIP
    """
    now_ms = int(clock() * 1000)
    refresh_if_changed(table)
    metadata = table.metadata
    options = IcebergExpiryOptions.resolve(
        metadata.properties,
        table.name,
        now_ms=now_ms,
        older_than=older_than,
        retain_last=retain_last,
        snapshot_ids=snapshot_ids,
        clean_expired_metadata=clean_expired_metadata,
    )
    selection = select_expired(metadata, options, table.name)
    expired_set = set(selection.expired_ids)
    present = {s.snapshot_id for s in metadata.snapshots}
    retained = [s for s in metadata.snapshots if s.snapshot_id not in expired_set]
    decisions = list(selection.decisions)
    journals = read_journals(table.io, table.root, str(metadata.table_uuid))
    inputs = [_expired_inputs(metadata, expired_set)]
    recovered = _recover_journals(journals, present, inputs, decisions)
    reader = ReachabilityReader(table, loader=loader)
    specs_removed, schemas_removed = _unused_specs_and_schemas(options, metadata, retained, reader, decisions)
    retained_side = RetainedSide(table, reader, retained, metadata)
    result = deletion_requests(table, reader, inputs, retained_side, progress=progress)
    return IcebergExpiryPlan(
        table_name=table.name,
        table_uuid=str(metadata.table_uuid),
        metadata_location=table.metadata_location,
        options=options,
        snapshots_before=sorted(present),
        expired=list(selection.expired_ids),
        refs_removed=dict(selection.refs_removed),
        refs_kept=dict(selection.refs_kept),
        specs_removed=specs_removed,
        schemas_removed=schemas_removed,
        deletions=result.requests,
        decisions=decisions,
        warnings=list(selection.warnings) + result.warnings,
        recovered_runs=recovered,
        journals=journals,
        reader=reader,
        unreachable_locations=result.locations,
    )


def _expired_inputs(metadata: Any, expired_set: set[int]) -> ExpiredInputs:
    """Step 2's expired side: the expired snapshots with their statistics and partition-statistics files."""
    return ExpiredInputs(
        snapshots=[s for s in metadata.snapshots if s.snapshot_id in expired_set],
        statistics={
            s.statistics_path: s.file_size_in_bytes
            for s in metadata.statistics
            if s.snapshot_id in expired_set
        },
        partition_statistics={
            s.statistics_path: s.file_size_in_bytes
            for s in (metadata.partition_statistics or [])
            if s.snapshot_id in expired_set
        },
        missing_ok=False,
    )


def _recover_journals(
    journals: Sequence[ExpiryJournal], present: set[int], inputs: list[ExpiredInputs], decisions: list[str]
) -> list[str]:
    """Add to ``inputs`` the snapshots of interrupted earlier runs that are gone from the table; their run ids."""
    recovered = []
    for journal in journals:
        gone = [i for i in journal.snapshots if i not in present]
        if gone:
            inputs.append(_journal_snapshots(journal, gone))
            recovered.append(journal.run_id)
            decisions.append(
                f"an earlier run ({journal.run_id}) expired {len(gone)} snapshot(s) and was interrupted "
                "before finishing its deletes: their leftovers are deleted too"
            )
    return recovered


# -- execution -----------------------------------------------------------------------------------


def recheck(plan: IcebergExpiryPlan, metadata: Any, where: str) -> Selection:
    """The part of ``plan`` that still applies to ``metadata``; refuse a plan the table moved away from.

    The selection is recomputed on ``metadata`` with the plan's options (and clock). Every planned
    snapshot that still exists must still expire, every planned ref removal still be one (same target);
    snapshots and refs already gone are dropped from what is committed. Nothing beyond the plan is ever
    expired.

    Raises:
        PlanOutdatedError: a planned snapshot or ref is now retained (a new tag, branch, rollback, ...).
    """
    if str(metadata.table_uuid) != plan.table_uuid:
        raise PlanOutdatedError(
            f"{where}: the table was replaced (uuid {metadata.table_uuid}, planned on {plan.table_uuid})"
        )
    check_gc_enabled(metadata.properties, where)
    fresh = select_expired(metadata, plan.options, where)
    present = {s.snapshot_id for s in metadata.snapshots}
    fresh_expired = set(fresh.expired_ids)
    kept_now = [i for i in plan.expired if i in present and i not in fresh_expired]
    problems = []
    if kept_now:
        problems.append(f"snapshot(s) {kept_now[:10]} are now retained")
    refs = []
    for name, target in plan.refs_removed.items():
        ref = metadata.refs.get(name)
        if ref is None:
            continue
        if ref.snapshot_id != target or name not in fresh.refs_removed:
            problems.append(f"ref {name} changed (now at snapshot {ref.snapshot_id}, planned at {target})")
        refs.append(name)
    if problems:
        raise PlanOutdatedError(f"{where}: the expiry plan is outdated: {'; '.join(problems)}")
    return Selection(
        expired_ids=tuple(i for i in plan.expired if i in present),
        retained_ids=frozenset(present - set(plan.expired)),
        refs_removed={name: plan.refs_removed[name] for name in refs},
        refs_kept=fresh.refs_kept,
    )


def _commit(table: IcebergTable, plan: IcebergExpiryPlan) -> None:
    remote = is_remote_catalog(table.table.catalog)
    specs = set(plan.specs_removed)
    schemas = set(plan.schemas_removed)

    def stage(tx: Any) -> None:
        metadata = tx.table_metadata
        current = recheck(plan, metadata, table.name)
        stage_expiry(
            tx,
            current.expired_ids,
            current.refs_removed,
            specs_to_remove=[s.spec_id for s in metadata.partition_specs if s.spec_id in specs],
            schemas_to_remove=[s.schema_id for s in metadata.schemas if s.schema_id in schemas],
            remote=remote,
        )

    commit_with_retry(table, stage, description="snapshot expiry", check_heads=False)  # its plan read them


class _Recheck:
    """The ``before_batch`` guard: re-load the table (at most once a second, and always before a phase),
    fold snapshots committed meanwhile into the retained side, keep what became reachable."""

    def __init__(
        self, table: IcebergTable, retained: RetainedSide, plan: IcebergExpiryPlan, dry_run: bool
    ) -> None:
        self.table = table
        self.retained = retained
        self.plan = plan
        self.dry_run = dry_run
        self.last = 0.0
        self.kept = 0

    def refresh(self) -> None:
        refresh_if_changed(self.table)
        metadata = self.table.metadata
        check_gc_enabled(metadata.properties, self.table.name)
        expired = set(self.plan.expired) if self.dry_run else set()
        self.retained.fold([s for s in metadata.snapshots if s.snapshot_id not in expired], metadata)
        self.last = time.monotonic()

    def __call__(self, batch: list[DeleteRequest]) -> list[DeleteRequest]:
        if time.monotonic() - self.last >= RECHECK_INTERVAL_SECONDS:
            self.refresh()
        allowed = [r for r in batch if not self.retained.reaches(r.path)]
        self.kept += len(batch) - len(allowed)
        return allowed


def execute_snapshot_expiry(
    table: IcebergTable,
    plan: IcebergExpiryPlan,
    *,
    dry_run: bool = True,
    deleter: FileDeleter | None = None,
    progress: Progress = NO_PROGRESS,
    phase_runner: PhaseRunner | None = None,
) -> IcebergExpiryResult:
    """Carry out a plan (module docstring): re-check, commit, delete in Java's order, remove the journal.

    Args:
        table: the table the plan was made for.
        plan: from :func:`plan_snapshot_expiry`.
        dry_run: re-check and report, commit and delete nothing (default).
        deleter: the deleter (default: the table's FileIO, batches of 1,000, retries).
        progress: progress reporter.
        phase_runner: deletes one phase's files (already re-checked on this process) and returns the
            report; default the deleter, re-checking every batch. The Spark job deletes on executors.

    Raises:
        PlanOutdatedError: the table moved away from the plan (nothing committed or deleted).
        CommitStateUnknownError: the commit may or may not have landed; nothing deleted (re-run).
        DeletionFailedError: files that could not be deleted after retries (re-run to finish).
        MaintenanceRefusedError: a real run on a read-only table, ``gc.enabled=false``.
        UnsupportedWriteVersionError: a real run on a format v3 table.
    """
    started = time.monotonic()
    if not dry_run and table.read_only:
        raise MaintenanceRefusedError(
            table.name, "the table was opened from a metadata file; open its root or catalog table to expire"
        )
    deleter = deleter or FileDeleter(table.io, dry_run=dry_run, progress=progress)
    if deleter.dry_run != dry_run:
        raise ValueError("the deleter's dry_run does not match the call's")
    reader = plan.reader or ReachabilityReader(table)
    refresh_if_changed(table)
    recheck(plan, table.metadata, table.name)
    journal = _journal_and_commit(table, plan) if not dry_run and plan.changes_metadata else None
    committed = not dry_run and plan.changes_metadata

    metadata = table.metadata
    present = {s.snapshot_id for s in metadata.snapshots}
    simulated_gone = set(plan.expired) if dry_run else set()
    retained = RetainedSide(
        table, reader, [s for s in metadata.snapshots if s.snapshot_id not in simulated_gone], metadata
    )
    warnings: list[str] = []
    requests = list(plan.deletions)
    if not dry_run:
        _add_late_requests(table, plan, reader, retained, present, requests, warnings, progress)
    guard = _Recheck(table, retained, plan, dry_run)
    report = _delete_in_phases(table, requests, guard, deleter, phase_runner, retained, dry_run)
    if not dry_run:
        finished = [j for j in plan.journals if journal_finished(j, present, plan.options.now_ms)]
        remove_journals(table.io, ([journal] if journal else []) + finished)
    return IcebergExpiryResult(
        plan=plan,
        report=report,
        committed=committed,
        metadata_location_after=table.metadata_location,
        snapshots_after=len(metadata.snapshots) - (len(simulated_gone & present)),
        kept_by_recheck=report.skipped_by_guard,
        warnings=warnings,
        duration_seconds=time.monotonic() - started,
    )


def _journal_and_commit(table: IcebergTable, plan: IcebergExpiryPlan) -> ExpiryJournal | None:
    """Execute's step 2: write the run's journal, then commit; the journal (``None`` if nothing expires)."""
    table.check_writable()
    journal: ExpiryJournal | None = None
    if plan.expired:
        journal = new_journal(
            table.io,
            table.root,
            now_ms=plan.options.now_ms,
            metadata=table.metadata,
            metadata_location=table.metadata_location,
            expired_ids=plan.expired,
        )
        write_journal(table.io, journal)
    try:
        _commit(table, plan)
    except (PlanOutdatedError, CommitConflictError, CommitRetriesExhaustedError, MaintenanceRefusedError):
        if journal is not None:  # the commit definitely did not land
            remove_journals(table.io, [journal])
        raise
    # Anything else (CommitStateUnknownError, an interrupted process) keeps the journal: the next run
    # finds out whether the commit landed.
    return journal


def _add_late_requests(
    table: IcebergTable,
    plan: IcebergExpiryPlan,
    reader: ReachabilityReader,
    retained: RetainedSide,
    present: set[int],
    requests: list[DeleteRequest],
    warnings: list[str],
    progress: Progress,
) -> None:
    """Journals of earlier runs whose snapshots only now left the table (their run raced with this one)."""
    late = []
    for old in plan.journals:
        if old.run_id in plan.recovered_runs:
            continue
        gone = [i for i in old.snapshots if i not in present]
        if gone:
            late.append(_journal_snapshots(old, gone))
    if late:
        extra = deletion_requests(table, reader, late, retained, progress=progress)
        known = {r.path for r in requests}
        requests += [r for r in extra.requests if r.path not in known]
        warnings += extra.warnings


def _delete_in_phases(
    table: IcebergTable,
    requests: Sequence[DeleteRequest],
    guard: _Recheck,
    deleter: FileDeleter,
    phase_runner: PhaseRunner | None,
    retained: RetainedSide,
    dry_run: bool,
) -> DeletionReport:
    """Execute's step 3: delete phase by phase in Java's order, re-checking before each phase and batch."""
    report = DeletionReport(dry_run=dry_run)
    phases = split_phases(requests)
    for task, _ in PHASES:
        phase = phases.get(task, [])
        if not phase:
            continue
        guard.refresh()
        if phase_runner is None:
            part = deleter.delete(phase, task=task, total=len(phase), before_batch=guard)
        else:
            allowed = guard(phase)
            part = phase_runner(task, allowed, retained)
            part.skipped_by_guard += len(phase) - len(allowed)
        report.merge(part)
        if part.failed:
            raise DeletionFailedError(
                f"{table.name}: {len(part.failed)} file(s) could not be deleted while {task}; nothing after "
                f"this phase was touched, re-run to finish (first: {part.failed[0].path}: {part.failed[0].error})",
                report,
            )
    return report


def split_phases(requests: Sequence[DeleteRequest]) -> dict[str, list[DeleteRequest]]:
    """Requests by phase (Java's order); a checksum sidecar goes with the file before it."""
    by_kind = {kind: task for task, kinds in PHASES for kind in kinds}
    phases: dict[str, list[DeleteRequest]] = {}
    current = PHASES[0][0]
    for request in requests:
        if request.kind != CHECKSUM_KIND:
            current = by_kind.get(request.kind, PHASES[-1][0])
        phases.setdefault(current, []).append(request)
    return phases


def expire_snapshots(
    table: IcebergTable,
    *,
    dry_run: bool = True,
    older_than: OlderThan = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
    clean_expired_metadata: bool = False,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    deleter: FileDeleter | None = None,
    loader: Loader | None = None,
    phase_runner: PhaseRunner | None = None,
) -> IcebergExpiryResult:
    """Plan and execute in one call (a dry run unless ``dry_run=False``); arguments as
    :func:`plan_snapshot_expiry` and :func:`execute_snapshot_expiry`.

    Example:
        >>> expire_snapshots(table, dry_run=False, older_than="1 d", retain_last=1).to_json()["javaCounts"]  # doctest: +SKIP
    """
    started = time.monotonic()
    plan = plan_snapshot_expiry(
        table,
        older_than=older_than,
        retain_last=retain_last,
        snapshot_ids=snapshot_ids,
        clean_expired_metadata=clean_expired_metadata,
        clock=clock,
        progress=progress,
        loader=loader,
    )
    result = execute_snapshot_expiry(
        table, plan, dry_run=dry_run, deleter=deleter, progress=progress, phase_runner=phase_runner
    )
    result.duration_seconds = time.monotonic() - started
    return result


__all__ = [
    "IcebergExpiryPlan",
    "IcebergExpiryResult",
    "PhaseRunner",
    "execute_snapshot_expiry",
    "expire_snapshots",
    "java_counts",
    "plan_snapshot_expiry",
    "recheck",
    "refresh_if_changed",
]
