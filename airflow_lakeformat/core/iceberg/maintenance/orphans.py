"""Iceberg orphan-file cleanup: Java's ``DeleteOrphanFilesSparkAction`` (1.10.2), as safe and stricter.

Algorithm (reference sections 3b, 4.1, 4.2; Java ``spark/v3.5/.../actions/DeleteOrphanFilesSparkAction.java``,
``core/.../actions/FileURI.java``, ``ReachableFileUtil``):

1. **Guards first.** ``gc.enabled=false`` refuses, as Java does. ``older_than`` defaults to 3 days (Java's
   default); under 24 hours is refused unless ``allow_short_older_than`` (Java's procedure refuses it
   outright outside ``spark.testing``). A real run on a read-only table (opened from a
   ``*.metadata.json``, which may not be current) is refused.
2. **List candidates before reading the valid set** (``orphan_listing``, ``orphan_local``): every non-hidden file older
   than the cutoff (on local disk the names are listed first and the ages read after the valid set, only
   for the files it does not hold) under the table location (and ``write.data.path`` / ``write.metadata.path``), each
   root listed as ``<root>/`` so a sibling ``events_v2`` is never reached (apache/iceberg PR #12254).
   While a forked child lists a large local tree, this process compiles the manifests' decoder from
   one manifest of the current snapshot (``reach_split.warm_manifest_decoder``); nothing read then
   enters the valid set.
3. **Then the valid set**, from the table re-loaded after the listing: every file reachable from every
   snapshot (all refs' snapshots are in ``snapshots``): manifest lists, manifests, live data and delete
   files (deletion-vector Puffin files included), plus statistics and partition-statistics files, the
   current metadata file, every ``metadata-log`` entry, and ``<metadata dir>/version-hint.text``
   (``ReachableFileUtil``; Java's ``validFileIdentDS``). Unreadable metadata (a truncated manifest
   list, a missing manifest) is a typed error and nothing is deleted; a file that went missing because a
   concurrent expiry removed its snapshot meanwhile is skipped after re-loading the table. On local
   disk one helper process (``core/forked.py``), forked after the listing, decodes half of the manifest
   lists and manifests and reads half of the ages; whatever it fails to do is done here.
4. **Join on normalised paths** (``location``): schemes and authorities mapped (``s3a``/``s3n`` -> ``s3``),
   a valid file under another scheme or authority is a prefix mismatch: ``error`` (default, Java's
   ``PrefixMismatchMode.ERROR``) aborts before anything is deleted; ``ignore`` keeps the file. Java's
   ``DELETE`` mode is not offered.
5. **Delete through the one deletion module** (``core/maintenance/deletion.py``): batches of up to 1,000
   (one S3 ``DeleteObjects`` each), bounded concurrency, retries. Before each batch the table is re-loaded;
   new snapshots and metadata files are folded into the valid set, and a file that became valid (or
   mismatched) is kept. A dry run goes through the same batches and re-checks, deleting nothing.
6. **Audit trail**: the result lists the orphans (up to ``sample_limit``, plus the count); ``report``
   writes one JSON line per orphan: path, kind, size, last modification, what happened and why.

Steps 1 to 4 make the plan (``orphan_plan``: :func:`plan_orphan_cleanup`); this module executes it (steps 5
and 6: :func:`execute_orphan_cleanup`) and runs both in one call (:func:`remove_orphan_files`).

Example:
    >>> from airflow_lakeformat.core.iceberg.catalog.catalog import open_table
    >>> table = open_table("s3://lake/wh/db/events")  # doctest: +SKIP
    >>> plan = plan_orphan_cleanup(table)  # doctest: +SKIP
    >>> result = execute_orphan_cleanup(table, plan, dry_run=False, report="/tmp/orphans.jsonl")  # doctest: +SKIP
    >>> result.summary()  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_lakeformat.core.errors import DeletionFailedError, MaintenanceRefusedError
from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import actual_uri
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import (
    DEFAULT_OLDER_THAN,
    DEFAULT_SAMPLE_LIMIT,
    Clock,
    IcebergOrphanPlan,
    PrefixMismatchError,
    check_gc_enabled,
    plan_orphan_cleanup,
)
from airflow_lakeformat.core.iceberg.maintenance.orphan_valid import collect_valid, refresh_if_changed
from airflow_lakeformat.core.iceberg.metadata.location import PrefixMismatch, PrefixMismatchMode
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest, DeletionReport, FileDeleter
from airflow_lakeformat.core.maintenance.orphan_report import report_rows, write_orphan_report
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress


@short_repr
@dataclass
class IcebergOrphanResult:
    """The outcome of :func:`execute_orphan_cleanup`: the plan, what the deleter did, and the audit file."""

    plan: IcebergOrphanPlan
    report: DeletionReport
    kept_by_recheck: list[str]
    report_path: str | None
    duration_seconds: float
    sample_limit: int = DEFAULT_SAMPLE_LIMIT

    def summary(self) -> str:
        """One line: what was listed, found orphaned and (or would be) deleted."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        """The result document (``lakeformat remove-orphans --json``), the Paimon result's shape."""
        document = self.plan.to_json(self.sample_limit)
        document.update(
            {
                "dryRun": self.report.dry_run,
                "files": dict(sorted(self.report.files.items())),
                "bytes": dict(sorted(self.report.bytes.items())),
                "bytesFreed": 0 if self.report.dry_run else self.report.total_bytes,
                "keptByRecheck": self.report.skipped_by_guard,
                "alreadyMissing": self.report.already_missing,
                "failed": [f.path for f in self.report.failed],
                "report": self.report_path,
                "durationSeconds": round(self.duration_seconds, 3),
            }
        )
        return document


def execute_orphan_cleanup(
    table: IcebergTable,
    plan: IcebergOrphanPlan,
    *,
    dry_run: bool = True,
    report: str | None = None,
    deleter: FileDeleter | None = None,
    progress: Progress = NO_PROGRESS,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
) -> IcebergOrphanResult:
    """Delete the plan's orphans (a dry run unless ``dry_run=False``), re-checking each batch first.

    Args:
        table: the table the plan was made for.
        plan: from :func:`plan_orphan_cleanup`.
        dry_run: go through the batches and re-checks, delete nothing (default).
        report: write one JSON line per orphan here (local path or fsspec URL): path, kind, size,
            lastModified, action (``deleted``, ``would-delete``, ``kept``, ``failed``, ``not-attempted``, or
            ``submitted`` when a later batch stopped the run), reason.
        deleter: the deleter to use (default: the table's FileIO, batches of 1,000).
        progress: progress reporter.
        sample_limit: how many orphan paths the JSON result lists.

    Raises:
        MaintenanceRefusedError: a real run on a read-only table.
        DeletionFailedError: files that could not be deleted after retries (the report is written first).
    """
    started = time.monotonic()
    if not dry_run and table.read_only:
        raise MaintenanceRefusedError(
            table.name,
            "the table was opened from a metadata file, which may not be the current one; open the "
            "table root or the catalog table to delete orphans",
        )
    deleter = deleter or FileDeleter(table.io, dry_run=dry_run, progress=progress)
    if deleter.dry_run != dry_run:
        raise ValueError("the deleter's dry_run does not match the call's")
    kept: dict[str, str] = {}
    passed: list[str] = []
    still_orphaned = _recheck(table, plan, kept, passed)
    outcome: DeletionReport | None = None
    try:
        outcome = deleter.delete(
            plan.orphans, task="deleting orphan files", total=len(plan.orphans), before_batch=still_orphaned
        )
    finally:
        if report is not None:
            write_report(report, plan, table, outcome, kept, passed, dry_run)
    assert outcome is not None  # delete() returned
    result = IcebergOrphanResult(
        plan, outcome, sorted(kept), report, time.monotonic() - started, sample_limit
    )
    if outcome.failed:
        raise DeletionFailedError(
            f"{table.name}: {len(outcome.failed)} orphan file(s) could not be deleted "
            f"(first: {outcome.failed[0].path}: {outcome.failed[0].error})",
            outcome,
        )
    return result


def _recheck(
    table: IcebergTable, plan: IcebergOrphanPlan, kept: dict[str, str], passed: list[str]
) -> Callable[[list[DeleteRequest]], list[DeleteRequest]]:
    """The per-batch re-check: re-load the table, fold what is new into the valid set, keep (in ``kept``,
    with the reason) what became valid; the rest passes (``passed``). A prefix mismatch in ``error`` mode
    aborts."""

    def still_orphaned(batch: list[DeleteRequest]) -> list[DeleteRequest]:
        refresh_if_changed(table)
        check_gc_enabled(table)
        collect_valid(table, plan.valid, NO_PROGRESS)
        allowed = []
        for request in batch:
            verdict = plan.valid.locations.classify(actual_uri(table.io, request.path))
            if verdict == "orphan":
                allowed.append(request)
                continue
            if verdict == "mismatch" and plan.prefix_mismatch == "error":
                uri = actual_uri(table.io, request.path)
                raise PrefixMismatchError(
                    table.name, [PrefixMismatch(uri.render(), plan.valid.spelling(uri.path))]
                )
            kept[request.path] = (
                "became reachable after planning (a concurrent commit references it)"
                if verdict == "valid"
                else "became valid under another scheme or authority after planning"
            )
        passed.extend(r.path for r in allowed)
        return allowed

    return still_orphaned


_REASON = "not reachable from any snapshot of any ref, nor a metadata, statistics or version-hint file"


def write_report(
    destination: str,
    plan: IcebergOrphanPlan,
    table: IcebergTable,
    outcome: DeletionReport | None,
    kept: Mapping[str, str],
    passed: list[str],
    dry_run: bool,
) -> None:
    """Write the audit trail: one JSON object per line for every orphan of the plan
    (``core/maintenance/orphan_report.py``, the same lines as Paimon's)."""
    rows = report_rows(
        plan.orphans,
        uri_of=table.io.uri,
        mtimes=plan.mtimes,
        cutoff=plan.cutoff,
        outcome=outcome,
        kept=kept,
        passed=passed,
        dry_run=dry_run,
        reason=_REASON,
    )
    write_orphan_report(destination, rows)


def remove_orphan_files(
    table: IcebergTable,
    *,
    dry_run: bool = True,
    older_than: timedelta = DEFAULT_OLDER_THAN,
    allow_short_older_than: bool = False,
    equal_schemes: Mapping[str, str] | None = None,
    equal_authorities: Mapping[str, str] | None = None,
    prefix_mismatch: PrefixMismatchMode = "error",
    report: str | None = None,
    sample_limit: int = DEFAULT_SAMPLE_LIMIT,
    clock: Clock = time.time,
    progress: Progress = NO_PROGRESS,
    deleter: FileDeleter | None = None,
) -> IcebergOrphanResult:
    """Plan and execute in one call (a dry run unless ``dry_run=False``); arguments as for
    :func:`plan_orphan_cleanup` and :func:`execute_orphan_cleanup`.

    Example:
        >>> remove_orphan_files(table, dry_run=False, report="/tmp/orphans.jsonl").summary()  # doctest: +SKIP
    """
    started = time.monotonic()
    plan = plan_orphan_cleanup(
        table,
        older_than=older_than,
        allow_short_older_than=allow_short_older_than,
        equal_schemes=equal_schemes,
        equal_authorities=equal_authorities,
        prefix_mismatch=prefix_mismatch,
        clock=clock,
        progress=progress,
    )
    result = execute_orphan_cleanup(
        table,
        plan,
        dry_run=dry_run,
        report=report,
        deleter=deleter,
        progress=progress,
        sample_limit=sample_limit,
    )
    result.duration_seconds = time.monotonic() - started
    return result
