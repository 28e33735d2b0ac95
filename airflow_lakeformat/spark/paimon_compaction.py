"""The ``compact_data`` Spark job on Paimon append tables: executors rewrite the groups, the driver plans and commits.

(A primary-key table goes to :mod:`airflow_lakeformat.spark.paimon_pk_compaction`, Paimon's merge-tree compaction.)

The driver makes the same plan as the driver-side operation
(:func:`~airflow_lakeformat.core.paimon.maintenance.data_compaction.plan_data_compaction`: small level-0 files per
partition and bucket, ``--partition`` filters, ``--min-file-count``, ``--target-file-size``), executors rewrite its
groups (:func:`~airflow_lakeformat.core.paimon.maintenance.data_compaction.rewrite_group`), and the driver commits
one COMPACT snapshot, refused if a planned file stopped being live meanwhile, as ``--commit-user`` (default: a new
``lakeformat-compact-data-<uuid>``; the operator passes the connection's ``<commit_user_prefix>-<dag_id>-<task_id>``).
A dry run only plans, and reports the plan. Files of a failed or refused run are orphans, which orphan cleanup
removes. Iceberg's ``--where``, ``--option``, ``--strategy`` and ``--sort-order`` are refused by name.

Example:
    spark-submit compact_data.py --table /wh/db.db/events --min-file-count 3
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.maintenance.facade_base import refuse_options
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.maintenance.data_compaction import (
    CompactionGroup,
    commit_data_compaction,
    dry_run_result,
    plan_data_compaction,
    rewrite_group,
)
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import PartitionSpec, parse_partition_spec
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.units import parse_memory_size
from airflow_lakeformat.spark.runtime import JobContext, check_fault

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import PaimonTable


def rewrite_partition(
    uri: str,
    options: dict[str, Any],
    target_file_size: int,
    fail_after: int,
    groups: Iterator[tuple[int, CompactionGroup]],
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Executor body: rewrite each group of this partition, yield (group index, new files' records)."""
    table = Table.open(uri, options)
    written = 0
    for index, group in groups:
        added = rewrite_group(table, group, target_file_size=target_file_size)
        written += len(added)
        check_fault(written, fail_after)
        yield index, [entry.record for entry in added]


def _partitions(values: list[str] | None) -> list[PartitionSpec] | None:
    partitions: list[PartitionSpec] = []
    for text in values or []:
        spec = parse_partition_spec(text)
        if spec is None:
            return None  # '*' selects the whole table
        partitions.append(spec)
    return partitions or None


def run(context: JobContext, lake_table: PaimonTable) -> dict[str, Any]:
    """The job on a Paimon table (the module docstring)."""
    args = context.args
    table = lake_table.native
    iceberg_only = {
        "where": args.where,
        "options": args.option,
        "strategy": args.strategy,
        "sort_order": args.sort_order,
    }
    refuse_options(table.uri, iceberg_only, only="Iceberg", this="a Paimon")
    if lake_table.maintenance.compacts_by_key:  # Paimon's merge-tree compaction
        from airflow_lakeformat.spark import paimon_pk_compaction

        return paimon_pk_compaction.run(context, lake_table, _partitions(args.partition))
    target = parse_memory_size(args.target_file_size) if args.target_file_size else None
    plan = plan_data_compaction(
        table,
        partitions=_partitions(args.partition),
        min_file_count=args.min_file_count,
        target_file_size=target,
    )
    if args.dry_run:
        return {**dry_run_result(plan, context.started).to_json(), "plan": plan.to_json()}
    committer = Committer(table, args.commit_user) if args.commit_user else None
    if not plan.groups:
        return commit_data_compaction(table, plan, [], started=context.started).to_json()
    payloads = list(enumerate(plan.groups))
    body = partial(
        rewrite_partition,
        context.args.table,
        context.executor_options,
        plan.target_file_size,
        context.fail_after_files,
    )
    rdd = context.spark.sparkContext.parallelize(payloads, context.parallelism(len(payloads), per_core=4))
    rewritten: list[list[ManifestEntry]] = [[] for _ in plan.groups]
    for index, records in rdd.mapPartitions(body).collect():
        rewritten[index] = [ManifestEntry(record) for record in records]
    context.before_commit()
    return commit_data_compaction(
        table, plan, rewritten, committer=committer, started=context.started
    ).to_json()
