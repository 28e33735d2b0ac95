"""Snapshot expiry with Paimon's semantics (``ExpireSnapshotsImpl``), planned as a value.

Range: with latest ``L`` and earliest ``E``, snapshots below ``max(L - retain_max + 1, E)`` go
regardless of age; from there on a snapshot goes only while its *successor* was committed before
``now - time_retained`` (it stopped being the latest long enough ago), and never at or beyond
``L - retain_min + 1``, a consumer's next snapshot or ``E + expire_limit``.

Deletion order (each step idempotent, so re-running after a crash anywhere converges):
  1. data files DELETEd by the delta manifests of snapshots ``(begin, end]`` and not re-ADDed later
     in that range, unless a tag (of any branch) or a branch still holds a file of that name;
  2. changelog files ADDed by the changelog manifests of ``[begin, end)``;
  3. manifests, manifest lists, index manifests, index files and statistics files of ``[begin, end)``
     that snapshot ``end``, no tag and no branch uses;
  4. snapshot files, ascending; 5. the ``EARLIEST`` hint.

Stricter than Paimon: protection is by file name over *all* tags of every branch and each branch's
earliest snapshot (Paimon checks the nearest tag only and ignored branch tags, #9867); metadata
that protects anything must be readable or nothing is deleted; only the ``main`` branch is expired;
decoupled changelogs are refused. Every snapshot file from the earliest to the latest is parsed before
anything is planned (Paimon reads only the ones its rules reach): one that exists but is truncated,
garbage or holds another id is CorruptMetadataError, since expiring is no answer on a table whose
history cannot be read (and removes the snapshots a repair could roll back to). One listed but gone
when read was removed by a concurrent expiry, as Paimon's readers assume (``Table.read_snapshots``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from airflow_lakeformat.core.errors import DeletionFailedError, MaintenanceRefusedError, PlanOutdatedError
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter, tally
from airflow_lakeformat.core.maintenance.orphan_report import utc_iso
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.maintenance.expiry_files import (  # the Spark job imports them from here
    DeltaMarks,  # noqa: F401
    Mark,
    changelog_requests,
    data_file_requests,
    delta_marks,
    fold_marks,
    protected_data_names,
    unused_metadata_requests,
)
from airflow_lakeformat.core.paimon.maintenance.references import MetadataReader
from airflow_lakeformat.core.paimon.options import parse_duration
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.snapshot_manager import MAIN_BRANCH, SnapshotManager
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

Clock = Callable[[], float]

DATA_KINDS = ("data-file", "extra-file")
CHANGELOG_KINDS = ("changelog-file",)
METADATA_KINDS = ("manifest", "manifest-list", "index-manifest", "index-file", "statistics")


@dataclass(frozen=True)
class ExpiryOptions:
    """The four knobs, resolved from call arguments over table options over Paimon's defaults."""

    retain_min: int
    retain_max: int
    time_retained: timedelta
    expire_limit: int

    @classmethod
    def resolve(
        cls,
        table: Table,
        retain_min: int | None = None,
        retain_max: int | None = None,
        older_than: timedelta | None = None,
        max_deletes: int | None = None,
    ) -> ExpiryOptions:
        options = table.schema.table_options
        resolved = cls(
            retain_min=options.snapshot_num_retained_min if retain_min is None else retain_min,
            retain_max=options.snapshot_num_retained_max if retain_max is None else retain_max,
            time_retained=options.snapshot_time_retained if older_than is None else older_than,
            expire_limit=options.snapshot_expire_limit if max_deletes is None else max_deletes,
        )
        problems = []
        if resolved.retain_min < 1:
            problems.append(f"retain-min must be at least 1, not {resolved.retain_min}")
        if resolved.retain_max < resolved.retain_min:
            problems.append(f"retain-max ({resolved.retain_max}) is below retain-min ({resolved.retain_min})")
        if resolved.expire_limit < 1:
            problems.append(f"max-deletes must be at least 1, not {resolved.expire_limit}")
        if resolved.time_retained < timedelta(0):
            problems.append("time retained must not be negative")
        if problems:
            raise MaintenanceRefusedError(table.uri, "; ".join(problems))
        return resolved

    def to_json(self) -> dict[str, Any]:
        return {
            "retainMin": self.retain_min,
            "retainMax": self.retain_max,
            "timeRetainedSeconds": self.time_retained.total_seconds(),
            "expireLimit": self.expire_limit,
        }


@dataclass(frozen=True)
class Protection:
    """What protects snapshots and files: tags (``branch:tag`` -> snapshot id), consumers, branches."""

    tags: dict[str, int]
    consumers: dict[str, int]
    branches: dict[str, int | None]

    def to_json(self) -> dict[str, Any]:
        return {"tags": self.tags, "consumers": self.consumers, "branches": self.branches}


@dataclass
class SnapshotExpiryPlan:
    """Everything an expiry would do, computed without deleting anything."""

    table_uri: str
    planned_at_millis: int
    options: ExpiryOptions
    earliest: int | None
    latest: int | None
    begin: int | None
    end: int | None
    decisions: list[str]
    protection: Protection
    data_files: list[DeleteRequest] = field(default_factory=list)
    changelog_files: list[DeleteRequest] = field(default_factory=list)
    metadata_files: list[DeleteRequest] = field(default_factory=list)
    snapshot_files: list[DeleteRequest] = field(default_factory=list)
    kept_by_tags_or_branches: int = 0
    kept_readded: int = 0
    warnings: list[str] = field(default_factory=list)
    manifest_lists_read: int = 0
    manifests_read: int = 0
    data_phase_external: bool = False
    # The manifest lists and manifests read (each once): a distributed step 1 adds its reads here.
    lists_read: set[str] = field(default_factory=set, repr=False)
    manifests_read_names: set[str] = field(default_factory=set, repr=False)

    @property
    def expired_ids(self) -> list[int]:
        if self.begin is None or self.end is None:
            return []
        return list(range(self.begin, self.end))

    def requests(self) -> list[DeleteRequest]:
        return [*self.data_files, *self.changelog_files, *self.metadata_files, *self.snapshot_files]

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        return tally(self.requests())

    def to_json(self, include_files: bool = False) -> dict[str, Any]:
        files, sizes = self.counts()
        out: dict[str, Any] = {
            "table": self.table_uri,
            "plannedAtMillis": self.planned_at_millis,
            "options": self.options.to_json(),
            "earliest": self.earliest,
            "latest": self.latest,
            "snapshotsToExpire": self.expired_ids,
            "firstRetained": self.end,
            "decisions": self.decisions,
            "protection": self.protection.to_json(),
            "files": files,
            "bytes": sizes,
            "keptByTagsOrBranches": self.kept_by_tags_or_branches,
            "keptReadded": self.kept_readded,
            "warnings": self.warnings,
            "manifestListsRead": self.manifest_lists_read,
            "manifestsRead": self.manifests_read,
        }
        if include_files:
            out["paths"] = {kind: [r.path for r in self.requests() if r.kind == kind] for kind in files}
        return out


@short_repr
@dataclass
class SnapshotExpiryResult:
    plan: SnapshotExpiryPlan
    report: DeletionReport
    earliest_after: int | None
    duration_seconds: float

    def summary(self) -> str:
        """One line: what was (or would be) expired and deleted."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "expire-snapshots",
            "format": "paimon",
            "table": self.plan.table_uri,
            "dryRun": self.report.dry_run,
            "snapshotsExpired": self.plan.expired_ids,
            "earliestBefore": self.plan.earliest,
            "earliestAfter": self.earliest_after,
            "latest": self.plan.latest,
            "files": dict(sorted(self.report.files.items())),
            "bytes": dict(sorted(self.report.bytes.items())),
            "bytesFreed": self.report.total_bytes,
            "alreadyMissing": self.report.already_missing,
            "failed": [f.path for f in self.report.failed],
            "decisions": self.plan.decisions,
            "warnings": self.plan.warnings,
            "manifestListsRead": self.plan.manifest_lists_read,
            "manifestsRead": self.plan.manifests_read,
            "durationSeconds": round(self.duration_seconds, 3),
        }


# -- planning ------------------------------------------------------------------------------------


def _refuse_unsupported(table: Table) -> None:
    if table.branch != MAIN_BRANCH:
        raise MaintenanceRefusedError(table.uri, f"expiring branch {table.branch!r} (only main is supported)")
    options = table.schema.table_options
    decoupled = []
    for changelog_key, snapshot_value in (
        ("changelog.num-retained.min", options.snapshot_num_retained_min),
        ("changelog.num-retained.max", options.snapshot_num_retained_max),
    ):
        raw = options.raw.get(changelog_key)
        if raw is not None and int(raw) > snapshot_value:
            decoupled.append(changelog_key)
    raw_time = options.raw.get("changelog.time-retained")
    if raw_time is not None and parse_duration(raw_time) > options.snapshot_time_retained:
        decoupled.append("changelog.time-retained")
    if decoupled:
        raise MaintenanceRefusedError(
            table.uri,
            f"decoupled changelog lifecycle ({', '.join(decoupled)} exceed the snapshot settings) is not supported",
        )
    changelog_dir = table.io.join(table.snapshot_manager.branch_root, paths.CHANGELOG_DIR)
    if any(name.startswith("changelog-") for name in table.io.list_names(changelog_dir)):
        raise MaintenanceRefusedError(
            table.uri, "the table has long-lived changelogs (changelog/), not supported"
        )


def protection_of(table: Table) -> tuple[Protection, list[Snapshot]]:
    """Tags of every branch, consumers of main, and each branch's earliest snapshot."""
    manager = table.snapshot_manager
    tags: dict[str, int] = {}
    protecting: list[Snapshot] = []
    for name, tag in manager.tags().items():
        tags[f"{MAIN_BRANCH}:{name}"] = tag.id
        protecting.append(tag)
    branches: dict[str, int | None] = {}
    for branch in manager.branches():
        branch_manager = SnapshotManager(table.io, table.root, branch)
        for name, tag in branch_manager.tags().items():
            tags[f"{branch}:{name}"] = tag.id
            protecting.append(tag)
        earliest = branch_manager.earliest_snapshot_id()
        branches[branch] = earliest
        if earliest is not None:
            protecting.append(branch_manager.snapshot(earliest))
    consumers = {c.consumer_id: c.next_snapshot for c in manager.consumers()}
    return Protection(tags, consumers, branches), protecting


def _expiry_range(
    manager: SnapshotManager,
    options: ExpiryOptions,
    protection: Protection,
    now_millis: int,
    decisions: list[str],
    snapshot: Callable[[int], Snapshot] | None = None,
    exists: Callable[[int], bool] | None = None,
    bounds: tuple[int | None, int | None] | None = None,
) -> tuple[int | None, int | None, int | None, int | None]:
    """(earliest, latest, begin, end): expire ``[begin, end)``; begin/end None when nothing expires.
    ``exists`` and ``bounds`` (earliest, latest): what a caller already knows instead of the files."""
    exists = exists or manager.snapshot_exists
    earliest, latest = bounds or (manager.earliest_snapshot_id(), manager.latest_snapshot_id())
    if latest is None or earliest is None:
        decisions.append("the table has no snapshots")
        return earliest, latest, None, None
    lowest_kept = max(latest - options.retain_max + 1, earliest)
    if lowest_kept > earliest:
        decisions.append(f"snapshots below {lowest_kept} exceed retain-max {options.retain_max}")
    max_exclusive = latest - options.retain_min + 1
    if max_exclusive <= earliest:  # fewer snapshots than retain-min: never name one below the earliest
        count = latest - earliest + 1
        reason = f"retain-min {options.retain_min} keeps every snapshot: the table has {count} ({earliest}..{latest})"
    else:
        reason = f"retain-min {options.retain_min} keeps snapshots from {max_exclusive}"
    if protection.consumers:
        consumer, next_snapshot = min(protection.consumers.items(), key=lambda item: item[1])
        if next_snapshot < max_exclusive:
            max_exclusive, reason = (
                next_snapshot,
                f"consumer {consumer!r} still needs snapshot {next_snapshot}",
            )
    if earliest + options.expire_limit < max_exclusive:
        max_exclusive = earliest + options.expire_limit
        reason = f"expire limit {options.expire_limit} stops at {max_exclusive}"
    end = max_exclusive
    threshold = now_millis - int(options.time_retained.total_seconds() * 1000)
    for snapshot_id in range(lowest_kept, max_exclusive):
        successor = snapshot_id + 1
        if not exists(successor):
            end, reason = snapshot_id, f"snapshot {successor} is missing, so {snapshot_id} is kept"
            break
        successor_time = (snapshot or manager.snapshot)(successor).time_millis
        if successor_time >= threshold:
            end = snapshot_id
            reason = (
                f"snapshot {snapshot_id} was superseded less than {options.time_retained} ago "
                f"(snapshot {successor} at {utc_iso(successor_time / 1000)})"
            )
            break
    decisions.append(reason)
    if end <= earliest:
        return earliest, latest, None, None
    # Only a contiguous run of existing snapshots below ``end`` can be expired.
    begin = earliest
    for snapshot_id in range(end - 1, earliest - 1, -1):
        if not exists(snapshot_id):
            begin = snapshot_id + 1
            break
    if begin >= end:
        return earliest, latest, None, None
    return earliest, latest, begin, end


def plan_snapshot_expiry(
    table: Table,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than: timedelta | None = None,
    max_deletes: int | None = None,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    data_files: bool = True,
    reader: MetadataReader | None = None,
) -> SnapshotExpiryPlan:
    """Plan an expiry. Reads the expired snapshots' manifest lists and delta manifests, the retained
    boundary snapshot's lists, and the live files of tags and branch heads; deletes nothing.

    Every snapshot, manifest list, index manifest and manifest is read at most once: all steps read
    through one :class:`MetadataReader`, and the plan's counts are the files it read.

    ``data_files=False`` leaves step 1 to the caller (the Spark job distributes it with
    :func:`delta_marks`, :func:`fold_marks` and :func:`protected_data_names`). ``reader``: one that already
    holds this run's reads (health reads every snapshot first), so nothing is read twice."""
    _refuse_unsupported(table)
    options = ExpiryOptions.resolve(table, retain_min, retain_max, older_than, max_deletes)
    manager = table.snapshot_manager
    protection, protecting = protection_of(table)
    now_millis = int(clock() * 1000)
    decisions: list[str] = []
    reader = reader or MetadataReader(table)
    reader.history()  # a history that cannot be read is not shortened (module docstring)
    earliest, latest, begin, end = _expiry_range(
        manager, options, protection, now_millis, decisions, reader.snapshot
    )
    plan = SnapshotExpiryPlan(
        table_uri=table.uri,
        planned_at_millis=now_millis,
        options=options,
        earliest=earliest,
        latest=latest,
        begin=begin,
        end=end,
        decisions=decisions,
        protection=protection,
    )
    if begin is None or end is None:
        return plan

    expired = [reader.snapshot(i) for i in range(begin, end)]
    end_snapshot = reader.snapshot(end)
    if (
        any(s.index_manifest for s in [*expired, end_snapshot])
        and table.schema.table_options.raw.get("index-file-in-data-file-dir", "false").lower() == "true"
    ):
        raise MaintenanceRefusedError(table.uri, "index files in data directories are not supported")

    # 1. Data files: DELETEs of (begin, end] not re-added later in that range.
    data_paths = DataFilePaths(table.schema)
    if data_files:
        _plan_data_files(table, plan, reader, protecting, progress, data_paths)
    else:
        plan.data_phase_external = True
    # 2. Changelog files ADDed in [begin, end).
    plan.changelog_files += changelog_requests(table, reader, expired, data_paths, plan.warnings)
    # 3. Metadata no retained snapshot, tag or branch uses.
    kept = [end_snapshot, *protecting]
    plan.metadata_files += unused_metadata_requests(table, reader, expired, kept, plan.warnings)
    # 4. Snapshot files, ascending.
    plan.snapshot_files = [DeleteRequest("snapshot", manager.snapshot_path(s.id)) for s in expired]
    plan.lists_read, plan.manifests_read_names = reader.names["manifest-list"], reader.names["manifest"]
    plan.manifest_lists_read, plan.manifests_read = len(plan.lists_read), len(plan.manifests_read_names)
    return plan


def expirable_without_limit(
    table: Table, plan: SnapshotExpiryPlan, history: Sequence[Snapshot]
) -> tuple[int, int]:
    """``(snapshots, max_deletes)``: how many snapshots ``plan``'s retention expires when the expire limit
    (``snapshot.expire.limit``, at most that many per run) does not stop it, and the ``max_deletes`` that lets
    one run reach them. The plan's range rule, bounds, time and protection over the parsed ``history`` (a
    snapshot not in it stops the range, as a missing file does); (0, 0) when nothing expires.

    Args:
        table: the table planned.
        plan: its expiry plan.
        history: the table's snapshots, parsed (e.g. the plan's ``reader.history()``).

    Example:
        >>> reader = MetadataReader(table)
        >>> plan = plan_snapshot_expiry(table, reader=reader)  # doctest: +SKIP
        >>> expirable_without_limit(table, plan, reader.history())  # doctest: +SKIP
        (1990, 1990)
    """
    by_id = {s.id: s for s in history}
    options = replace(plan.options, expire_limit=max(by_id, default=0) + 1)
    earliest, _, begin, end = _expiry_range(
        table.snapshot_manager, options, plan.protection, plan.planned_at_millis, [], by_id.__getitem__,
        by_id.__contains__, (plan.earliest, plan.latest),
    )  # fmt: skip
    if earliest is None or begin is None or end is None:
        return 0, 0
    return end - begin, end - earliest


def _plan_data_files(
    table: Table,
    plan: SnapshotExpiryPlan,
    reader: MetadataReader,
    protecting: list[Snapshot],
    progress: Progress,
    data_paths: DataFilePaths,
) -> None:
    """Step 1 (module docstring): the data files DELETEd in ``(begin, end]``, not re-added, no tag or branch holds."""
    assert plan.begin is not None and plan.end is not None
    progress.start("reading delta manifests of expired snapshots", plan.end - plan.begin)
    marks: list[Mark] = []
    for snapshot_id in range(plan.begin + 1, plan.end + 1):
        found = delta_marks(table, snapshot_id, retained=snapshot_id == plan.end, reader=reader)
        marks += found.marks
        plan.warnings += found.warnings
        progress.advance()
    progress.finish()
    marked, plan.kept_readded = fold_marks(marks)
    protected = protected_data_names(table, protecting, reader) if marked else set()
    to_delete = [e for e in marked if e.file.file_name not in protected]
    plan.kept_by_tags_or_branches = len(marked) - len(to_delete)
    plan.data_files = data_file_requests(table, to_delete, "data-file", data_paths)


# -- execution -----------------------------------------------------------------------------------


def check_plan_current(table: Table, plan: SnapshotExpiryPlan) -> None:
    """Refuse a plan the table has moved away from (another expiry, a new tag, consumer or branch)."""
    if plan.begin is None or plan.end is None:
        return
    manager = table.snapshot_manager
    problems = []
    earliest = manager.earliest_snapshot_id()
    if earliest != plan.earliest:
        problems.append(f"the earliest snapshot is now {earliest}, not {plan.earliest}")
    if not manager.snapshot_exists(plan.end):
        problems.append(f"snapshot {plan.end}, the first retained one, is gone")
    protection, _ = protection_of(table)
    if protection != plan.protection:
        problems.append("tags, consumers or branches changed")
    if problems:
        raise PlanOutdatedError(f"{table.uri}: the expiry plan is outdated: {'; '.join(problems)}")


def execute_snapshot_expiry(
    table: Table,
    plan: SnapshotExpiryPlan,
    *,
    dry_run: bool = True,
    deleter: FileDeleter | None = None,
    progress: Progress = NO_PROGRESS,
    data_phase_done: bool = False,
) -> SnapshotExpiryResult:
    """Carry out a plan in Paimon's order, after checking it still matches the table.

    A plan made with ``data_files=False`` is refused unless the caller says it has already deleted
    the data files itself (``data_phase_done=True``): otherwise step 1 would be skipped silently.

    A phase with failed deletes stops the run before the next phase (raising DeletionFailedError
    with the report), so snapshot files are never removed while files they led to remain.
    """
    started = time.monotonic()
    if plan.data_phase_external and plan.expired_ids and not data_phase_done:
        raise ValueError(
            "this expiry plan was made with data_files=False: delete its data files first and pass "
            "data_phase_done=True"
        )
    check_plan_current(table, plan)
    deleter = deleter or FileDeleter(table.io, dry_run=dry_run, progress=progress)
    if deleter.dry_run != dry_run:
        raise ValueError("the deleter's dry_run does not match the call's")
    report = DeletionReport(dry_run=dry_run)

    def phase(requests: list[DeleteRequest], task: str, ordered: bool = False) -> None:
        if not requests:
            return
        if ordered:
            part = deleter.delete_in_order(requests, task=task)
        else:
            part = deleter.delete(requests, task=task, total=len(requests))
        report.merge(part)
        if part.failed:
            raise DeletionFailedError(
                f"{table.uri}: {len(part.failed)} file(s) could not be deleted while {task}; "
                f"nothing after this phase was touched, re-run to finish (first: {part.failed[0].path}: "
                f"{part.failed[0].error})",
                report,
            )

    earliest_after = plan.earliest
    if plan.begin is not None and plan.end is not None:
        phase(plan.data_files, "deleting data files of expired snapshots")
        phase(plan.changelog_files, "deleting changelog files of expired snapshots")
        phase(plan.metadata_files, "deleting manifests of expired snapshots")
        phase(plan.snapshot_files, "deleting snapshot files", ordered=True)
        earliest_after = plan.end
        if not dry_run:
            _write_earliest_hint(table, plan.end)
    elif (
        not dry_run
        and plan.earliest is not None
        and table.snapshot_manager.read_hint(paths.EARLIEST) != plan.earliest
    ):
        # Java (ExpireSnapshotsImpl.expireUntil) writes the hint here only when it is missing. We also
        # heal a stale one: a run that crashed after deleting snapshot files but before the hint leaves
        # EARLIEST naming a deleted snapshot, and its re-run has nothing left to expire. Readers survive
        # that (they fall back to listing), but the re-run must leave what a clean run leaves (found by
        # the stateful soak, seed 20261125).
        _write_earliest_hint(table, plan.earliest)
    return SnapshotExpiryResult(plan, report, earliest_after, time.monotonic() - started)


def _write_earliest_hint(table: Table, snapshot_id: int) -> None:
    # A hint only: readers verify it against the files and fall back to listing.
    path = table.io.join(table.snapshot_manager.snapshot_dir, paths.EARLIEST)
    with contextlib.suppress(OSError):
        table.io.write_atomic(path, str(snapshot_id).encode())


def expire_snapshots(
    table: Table,
    *,
    dry_run: bool = True,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than: timedelta | None = None,
    max_deletes: int | None = None,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    deleter: FileDeleter | None = None,
) -> SnapshotExpiryResult:
    """Plan and execute in one call (dry run unless told otherwise)."""
    started = time.monotonic()
    plan = plan_snapshot_expiry(
        table,
        retain_min=retain_min,
        retain_max=retain_max,
        older_than=older_than,
        max_deletes=max_deletes,
        clock=clock,
        progress=progress,
    )
    result = execute_snapshot_expiry(table, plan, dry_run=dry_run, deleter=deleter, progress=progress)
    result.duration_seconds = time.monotonic() - started
    return result
