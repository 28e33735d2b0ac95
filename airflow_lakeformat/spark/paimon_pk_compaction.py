"""The ``compact_data`` Spark job on Paimon primary-key tables: executors merge the buckets, the driver plans and commits.

Paimon's merge-tree compaction (``core/paimon/merge_tree``, Java's ``compact`` procedure with
``compact_strategy`` ``full`` or ``minor``) with its per-bucket work handed to executors, as Java's Spark
``CompactProcedure`` hands buckets to tasks:

1. The driver plans with the core's planner (``plan_primary_key_compaction``: the refusals, per
   (partition, bucket) the full or universal pick, upgrades and section rewrites): the very plan the
   in-process run makes. A dry run, or a plan with nothing to compact, stops here and starts no Spark
   session.
2. Each (partition, bucket) unit goes to an executor, pickled (its ``ManifestEntry`` records), together with
   the table's root, the storage options and the schema id the plan was made against. The executor opens the
   table, refuses a schema that changed since the plan (``PlanOutdatedError``), and runs the core's
   ``rewrite_unit``, the function the in-process run calls per unit (``read_kv`` -> ``merge_kv`` ->
   ``write_kv`` per section, upgrades as new ADD entries of the same file). It returns the unit's bucket
   change (the DELETE/ADD entries, validation data, the paths it wrote) and counts, pickled back, or the
   unit's error as a value (``rewrite_unit`` has already removed that unit's own files).
3. The driver commits every unit in ONE COMPACT snapshot through the core's ``commit_changes``: the same
   per-bucket validation before every publish attempt as in process (inputs live, no concurrent compaction,
   new level-0 files newer than the inputs, bucket count unchanged; a conflicting bucket skipped, reported
   and its files discarded). A unit that failed fails the job: the driver removes the files the other units
   of the run wrote (none is published) and raises the unit's error, typed. A task that dies without
   reporting leaves its files to orphan cleanup.

The result is the in-process ``PrimaryKeyCompactionResult`` JSON (``buckets``, ``skippedBuckets``, ...) plus
``"job"``; its ``"mode"`` stays the compaction's (``full``/``minor``, as in process) where other jobs say
``"spark"``, so the operator's XCom result is the same for both executions (``execution`` says where it ran).

Example:
    spark-submit compact_data.py --table /wh/db.db/orders --full --commit-user compactor-1
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import PlanOutdatedError, UsageError
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.merge_tree.commit import BucketChange
from airflow_lakeformat.core.paimon.merge_tree.compaction import (
    BucketResult,
    compact_primary_key_table,
    rewrite_unit,
)
from airflow_lakeformat.core.paimon.merge_tree.plan import BucketPlan, PrimaryKeyCompactionPlan
from airflow_lakeformat.core.paimon.paths import PartitionSpec
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.units import parse_memory_size
from airflow_lakeformat.spark.runtime import JobContext, check_fault

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import PaimonTable
    from airflow_lakeformat.spark.iceberg_compaction import PortableError

# What an executor reports per unit: (unit index, (change, files, rows, bytes, deletes dropped) or None, error)
UnitCounts = tuple[BucketChange, int, int, int, int]
UnitOutcome = tuple[int, UnitCounts | None, "PortableError | None"]


# -- executors -----------------------------------------------------------------------------------


def _portable(exc: BaseException) -> PortableError:
    from airflow_lakeformat.spark.iceberg_compaction import portable_error  # only on a failure

    return portable_error(exc)


def rewrite_units_task(
    uri: str,
    options: dict[str, Any],
    schema_id: int,
    target_file_size: int,
    fail_after: int,
    units: Iterator[tuple[int, BucketPlan]],
) -> Iterator[UnitOutcome]:
    """Executor body: rewrite each unit of this task with the core's ``rewrite_unit``; yield its outcome."""
    table = Table.open(uri, options)
    written = 0
    for index, unit in units:
        try:
            if table.schema.id != schema_id:
                raise PlanOutdatedError(
                    f"{table.uri}: the schema changed from {schema_id} to {table.schema.id} since the "
                    "compaction was planned; nothing was written, run it again"
                )
            change, result, dropped = rewrite_unit(table, unit, target_file_size)
        except Exception as exc:
            yield index, None, _portable(exc)
            continue
        written += result.files_written
        try:
            check_fault(written, fail_after)
        except Exception as exc:  # the test-only fault: this unit's files go as a failed unit's do
            _discard(table, change.written)
            yield index, None, _portable(exc)
            continue
        counts = (change, result.files_written, result.rows_written, result.bytes_written, dropped)
        yield index, counts, None


def _discard(table: Table, paths: Sequence[str]) -> None:
    if paths:
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        discard_unpublished(table.io, paths, "data")


# -- the driver ----------------------------------------------------------------------------------


class SparkUnitRewriter:
    """Rewrites a plan's units on Spark, one task per unit (at most four per core; ``--parallelism`` sets the
    number), and returns them as the in-process ``rewrite_units`` does: changes, results, deletes dropped, in
    the plan's order. Every unit's files are removed again when any unit failed, and its error raised."""

    def __init__(self, context: JobContext) -> None:
        self.context = context

    def __call__(
        self, table: Table, plan: PrimaryKeyCompactionPlan
    ) -> tuple[list[BucketChange], list[BucketResult], list[int]]:
        context = self.context
        payloads = list(enumerate(plan.units))
        body = partial(
            rewrite_units_task,
            context.args.table,
            context.executor_options,
            plan.schema_id,
            plan.target_file_size,
            context.fail_after_files,
        )
        sc = context.spark.sparkContext
        sc.setJobDescription(f"compact_data: {plan.mode} compaction of {len(payloads)} buckets")
        slices = context.parallelism(len(payloads), per_core=4)
        rows: list[UnitOutcome] = sorted(
            sc.parallelize(payloads, slices).mapPartitions(body).collect(), key=lambda row: row[0]
        )
        return self.collected(table, plan, rows)

    def collected(
        self, table: Table, plan: PrimaryKeyCompactionPlan, rows: Sequence[UnitOutcome]
    ) -> tuple[list[BucketChange], list[BucketResult], list[int]]:
        """The executors' outcomes in plan order; a failed (or missing) unit discards the others' files."""
        from airflow_lakeformat.spark.iceberg_compaction import rebuilt_error

        done = {index: counts for index, counts, _ in rows if counts is not None}
        failed = next((error for _, counts, error in rows if counts is None and error is not None), None)
        if failed is not None or len(done) != len(plan.units):
            _discard(table, [p for counts in done.values() for p in counts[0].written])
            if failed is not None:
                raise rebuilt_error(failed)
            raise RuntimeError(f"{len(plan.units) - len(done)} of {len(plan.units)} buckets reported nothing")
        changes, results, dropped = [], [], []
        for index, unit in enumerate(plan.units):
            change, files, rows_written, size, deletes = done[index]
            changes.append(change)
            results.append(BucketResult(unit, files, rows_written, size))  # the driver's own unit
            dropped.append(deletes)
        self.context.before_commit()
        return changes, results, dropped


def run(
    context: JobContext, lake_table: PaimonTable, partitions: list[PartitionSpec] | None
) -> dict[str, Any]:
    """The job on a Paimon primary-key table (the module docstring); the table was opened and checked (its
    refusals, ``--full`` on an append table) through the facade, Iceberg's flags refused by name.

    Args:
        context: the job's arguments (``--full``/``--minor``, ``--target-file-size``, ``--commit-user``,
            ``--dry-run``, ``--parallelism``) and its Spark session.
        lake_table: the table, opened through the facade.
        partitions: ``--partition`` filters by value (None: every partition).

    Raises:
        UsageError: ``--min-file-count``, which a primary-key table's compaction does not take.
    """
    args = context.args
    table = lake_table.native
    if args.min_file_count is not None:
        raise UsageError(
            f"--min-file-count: only for append tables ({table.uri} has a primary key; its compaction picks "
            "sorted runs by num-sorted-run.compaction-trigger)"
        )
    target = parse_memory_size(args.target_file_size) if args.target_file_size else None
    result = compact_primary_key_table(
        table,
        mode=args.mode or "minor",
        dry_run=args.dry_run,
        partitions=partitions,
        target_file_size=target,
        committer=Committer(table, args.commit_user) if args.commit_user else None,
        rewriter=SparkUnitRewriter(context),
    )
    return result.to_json()
