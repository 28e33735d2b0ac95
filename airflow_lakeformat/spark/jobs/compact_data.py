"""``spark-submit`` job ``compact_data``: bin-pack small data files of an append table, rewritten on executors.

    spark-submit compact_data.py --table URI [--partition k=v,... (repeatable)] [--min-file-count N]
        [--target-file-size SIZE] [--commit-user U] [--dry-run] [--parallelism N] [--result PATH]

The driver makes the same plan as the driver-side operation
(:func:`~airflow_lakeformat.core.paimon.maintenance.data_compaction.plan_data_compaction`), executors
rewrite its groups (:func:`~airflow_lakeformat.core.paimon.maintenance.data_compaction.rewrite_group`),
and the driver commits one COMPACT snapshot, refused if a planned file stopped being live
meanwhile, as ``--commit-user`` (default: a new ``lakeformat-compact-data-<uuid>``; the operator passes the
connection's ``<commit_user_prefix>-<dag_id>-<task_id>``). A dry run only plans, and reports the plan. Files of a failed or refused run are
orphans, which orphan cleanup removes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

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
from airflow_lakeformat.spark.runtime import JobContext, check_fault, run_job

JOB = "compact_data"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partition",
        action="append",
        metavar="K=V[,K=V]",
        help="compact only partitions matching this spec (repeatable; any spec matches)",
    )
    parser.add_argument("--min-file-count", type=int, help="smallest group worth a rewrite (default: 5)")
    parser.add_argument("--target-file-size", help="e.g. '128 mb' (default: the table's target-file-size)")
    parser.add_argument(
        "--commit-user", help="commit user of the COMPACT snapshot (default: lakeformat-compact-data-<uuid>)"
    )


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


def run(context: JobContext) -> dict[str, Any]:
    args = context.args
    table = context.open_table()
    partitions: list[PartitionSpec] = []
    for text in args.partition or []:
        spec = parse_partition_spec(text)
        if spec is None:
            partitions = []  # '*' selects the whole table
            break
        partitions.append(spec)
    target = parse_memory_size(args.target_file_size) if args.target_file_size else None
    plan = plan_data_compaction(
        table, partitions=partitions or None, min_file_count=args.min_file_count, target_file_size=target
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


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import compact_data as job

    sys.exit(job.main())
