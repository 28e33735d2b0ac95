"""``spark-submit`` job ``expire_snapshots``: snapshot expiry with the data phase on executors.

    spark-submit expire_snapshots.py --table URI [--retain-min N] [--retain-max N]
        [--older-than DURATION] [--max-deletes N] [--dry-run] [--parallelism N] [--result PATH]
        [--retain-last N] [--snapshot-id ID ...] [--clean-expired-metadata]  (Iceberg)

An Iceberg table (detected from its files) runs :mod:`airflow_lakeformat.spark.iceberg_expiry`: Java's
``expire_snapshots`` rules, manifest reads and deletes on executors, the plan and the commit on the driver.
What follows is the Paimon table's run.

The driver plans with the driver-side operation's planner
(:func:`~airflow_lakeformat.core.paimon.maintenance.expiry.plan_snapshot_expiry`, ``data_files=False``);
executors read the delta manifests of snapshots ``(begin, end]`` (:func:`delta_marks`), the driver
folds the marks in (snapshot, position) order (:func:`fold_marks`) and drops the names a tag or
branch head still holds (:func:`protected_data_names`), then checks the plan is still current.
Executors delete the data files in batches with the core's :class:`FileDeleter`; if any delete
failed the job stops there (exit 10) and nothing after the data phase is touched. The driver then
runs the rest in Paimon's order with :func:`execute_snapshot_expiry`: changelog files, metadata,
snapshot files ascending, the ``EARLIEST`` hint.

The result is the driver-side ``SnapshotExpiryResult`` JSON plus ``"job"`` and ``"mode": "spark"``.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
from collections.abc import Iterator
from datetime import timedelta
from functools import partial
from typing import Any

from airflow_lakeformat.core.errors import DeletionFailedError
from airflow_lakeformat.core.maintenance.deletion import DeleteRequest
from airflow_lakeformat.core.paimon.maintenance.expiry import (
    Mark,
    SnapshotExpiryPlan,
    SnapshotExpiryResult,
    check_plan_current,
    data_file_requests,
    delta_marks,
    execute_snapshot_expiry,
    fold_marks,
    plan_snapshot_expiry,
    protected_data_names,
    protection_of,
)
from airflow_lakeformat.core.paimon.maintenance.references import MetadataReader
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.units import parse_duration
from airflow_lakeformat.spark import iceberg_expiry
from airflow_lakeformat.spark.deleting import fail_after_deletes, merge_reports, task_deleter
from airflow_lakeformat.spark.runtime import JobContext, run_job

JOB = "expire_snapshots"
DATA_TASK = "deleting data files of expired snapshots"

# What a task returns for one snapshot: (id, pickled marks with entry records, warnings, lists read,
# manifests read). Records travel instead of ManifestEntry objects: a record is plain data.
# (snapshot id, pickled marks, warnings, the manifest lists read, the manifests read)
SnapshotMarks = tuple[int, bytes, list[str], list[str], list[str]]


def _duration(text: str) -> timedelta | str:
    """A duration; for Iceberg tables also an ISO-8601 timestamp (kept as text, refused for Paimon)."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        from airflow_lakeformat.core.iceberg.maintenance.expiry_rules import parse_older_than

        try:
            parse_older_than(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(str(exc)) from exc
        return text


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retain-min", type=int, metavar="N", help="default: snapshot.num-retained.min (10)")
    parser.add_argument("--retain-max", type=int, metavar="N", help="default: snapshot.num-retained.max")
    parser.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="expire a snapshot only if its successor is older than this (default: snapshot.time-retained, 1 h)",
    )
    parser.add_argument(
        "--max-deletes", type=int, metavar="N", help="snapshots per run (default: snapshot.expire.limit, 50)"
    )
    iceberg_expiry.add_arguments(parser)


# -- executors -----------------------------------------------------------------------------------


def read_marks(
    uri: str, options: dict[str, Any], end: int, snapshot_ids: Iterator[int]
) -> Iterator[SnapshotMarks]:
    """Executor body: the delta marks of each snapshot; only snapshot ``end`` (retained) must be whole."""
    table = Table.open(uri, options)
    for snapshot_id in snapshot_ids:
        found = delta_marks(table, snapshot_id, retained=snapshot_id == end)
        marks = [(key, order, is_delete, entry.record) for key, order, is_delete, entry in found.marks]
        yield (
            snapshot_id,
            pickle.dumps(marks, protocol=pickle.HIGHEST_PROTOCOL),
            found.warnings,
            found.lists_read,
            found.manifests_read_names,
        )


def delete_requests(
    uri: str, options: dict[str, Any], dry_run: bool, fail_after: int, requests: Iterator[DeleteRequest]
) -> Iterator[dict[str, Any]]:
    """Executor body: delete this task's share in batches; yields the DeletionReport JSON."""
    table = Table.open(uri, options)
    batch = list(requests)
    deleter, fault = task_deleter(table.io, dry_run, fail_after)
    yield deleter.delete(batch, task=DATA_TASK, total=len(batch), before_batch=fault).to_json()


# -- the driver ----------------------------------------------------------------------------------


def _data_phase_requests(context: JobContext, table: Table, plan: SnapshotExpiryPlan) -> list[DeleteRequest]:
    """Step 1 of the plan, distributed: DELETEs of ``(begin, end]`` not re-added and not protected."""
    assert plan.begin is not None and plan.end is not None
    ids = list(range(plan.begin + 1, plan.end + 1))
    sc = context.spark.sparkContext
    found = (
        sc.parallelize(ids, context.parallelism(len(ids)))
        .mapPartitions(partial(read_marks, context.args.table, context.executor_options, plan.end))
        .collect()
    )
    marks: list[Mark] = []
    warnings: list[str] = []
    # In ascending snapshot order, as the driver-side planner accumulates them.
    for _, blob, found_warnings, lists_read, manifests_read in sorted(found, key=lambda f: f[0]):
        marks += [
            (key, order, deleted, ManifestEntry(record)) for key, order, deleted, record in pickle.loads(blob)
        ]
        warnings += found_warnings
        plan.lists_read.update(lists_read)
        plan.manifests_read_names.update(manifests_read)
    # The planner ran the later steps already; step 1's warnings come first, as in a driver-side plan.
    plan.warnings[:0] = warnings
    marked, plan.kept_readded = fold_marks(marks)
    reader = MetadataReader(table)
    protected = protected_data_names(table, protection_of(table)[1], reader) if marked else set()
    # Each file counts once, wherever it was read, as in the driver-side plan.
    plan.lists_read |= reader.names["manifest-list"]
    plan.manifests_read_names |= reader.names["manifest"]
    plan.manifest_lists_read, plan.manifests_read = len(plan.lists_read), len(plan.manifests_read_names)
    to_delete = [e for e in marked if e.file.file_name not in protected]
    plan.kept_by_tags_or_branches = len(marked) - len(to_delete)
    return data_file_requests(table, to_delete, "data-file", DataFilePaths(table.schema))


def run(context: JobContext) -> dict[str, Any]:
    args = context.args
    if iceberg_expiry.is_iceberg(args.table, context.executor_options):
        return iceberg_expiry.run(context)
    iceberg_expiry.refuse_iceberg_only_arguments(args)
    table = context.open_table()
    plan = plan_snapshot_expiry(
        table,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        older_than=args.older_than,
        max_deletes=args.max_deletes,
        data_files=False,
    )
    if plan.begin is None or plan.end is None:
        return execute_snapshot_expiry(table, plan, dry_run=args.dry_run).to_json()

    plan.data_files = _data_phase_requests(context, table, plan)
    # The driver-side operation checks before its data phase too: a new tag, consumer or branch, or
    # another expiry, must stop this run before anything is deleted.
    check_plan_current(table, plan)
    report = merge_reports(args.dry_run, [])
    if plan.data_files:
        sc = context.spark.sparkContext
        body = partial(
            delete_requests, args.table, context.executor_options, args.dry_run, fail_after_deletes()
        )
        slices = context.parallelism(len(plan.data_files), per_core=2)
        report = merge_reports(
            args.dry_run, sc.parallelize(plan.data_files, slices).mapPartitions(body).collect()
        )
    if report.failed:
        raise DeletionFailedError(
            f"{table.uri}: {len(report.failed)} file(s) could not be deleted while {DATA_TASK}; "
            f"nothing after this phase was touched, re-run to finish (first: {report.failed[0].path}: "
            f"{report.failed[0].error})",
            report,
        )

    # Changelog files, metadata, snapshot files and EARLIEST, in Paimon's order, on the driver.
    rest = execute_snapshot_expiry(
        table, dataclasses.replace(plan, data_files=[]), dry_run=args.dry_run, data_phase_done=True
    )
    report.merge(rest.report)
    return SnapshotExpiryResult(plan, report, rest.earliest_after, 0.0).to_json()


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import expire_snapshots as job

    sys.exit(job.main())
