"""The ``expire_snapshots`` Spark job on Paimon tables: the data phase on executors, the rest on the driver.

The job (``spark/jobs/expire_snapshots.py``) opened the table through the facade and checked the arguments
(``table.maintenance.check_expire_snapshots``). The driver plans with the in-process planner
(:func:`~airflow_lakeformat.core.paimon.maintenance.expiry.plan_snapshot_expiry`, ``data_files=False``);
executors read the delta manifests of snapshots ``(begin, end]`` (:func:`delta_marks`), the driver
folds the marks in (snapshot, position) order (:func:`fold_marks`) and drops the names a tag or
branch head still holds (:func:`protected_data_names`), then checks the plan is still current.
Executors delete the data files in batches with the core's :class:`FileDeleter`; if any delete
failed the job stops there (exit 10) and nothing after the data phase is touched. The driver then
runs the rest in Paimon's order with :func:`execute_snapshot_expiry`: changelog files, metadata,
snapshot files ascending, the ``EARLIEST`` hint.

The result is the in-process ``SnapshotExpiryResult`` JSON plus ``"job"`` and ``"mode": "spark"``.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

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
from airflow_lakeformat.spark.deleting import fail_after_deletes, merge_reports, task_deleter
from airflow_lakeformat.spark.runtime import JobContext

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import PaimonTable

DATA_TASK = "deleting data files of expired snapshots"

# What a task returns for one snapshot: (id, pickled marks with entry records, warnings, lists read,
# manifests read). Records travel instead of ManifestEntry objects: a record is plain data.
SnapshotMarks = tuple[int, bytes, list[str], list[str], list[str]]


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


def run(context: JobContext, lake_table: PaimonTable) -> dict[str, Any]:
    """The job on a Paimon table (the module docstring); the arguments were checked by the facade."""
    args, table = context.args, lake_table.native
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
