"""``spark-submit`` job ``compact_data``: data compaction of a Paimon append table or an Iceberg table on Spark.

    spark-submit compact_data.py --table URI [--partition k=v,... (repeatable)] [--min-file-count N]
        [--target-file-size SIZE] [--commit-user U] [--dry-run] [--parallelism N] [--result PATH]
        [--full | --minor]  (Paimon primary-key tables)
        [--where PREDICATE] [--option KEY=VALUE ...] [--strategy binpack|sort] [--sort-order ORDER]  (Iceberg)

One job for both formats: it opens the table through the facade (``core/tables.py``, the format detected from its
files; an Iceberg table of a catalog as ``--table namespace.table`` with ``$LAKEFORMAT_ICEBERG_CATALOG``), checks
there that the table is one data compaction takes (``table.maintenance.check_compact_data``: a Paimon primary-key
table with a changelog producer or deletion vectors, an Iceberg v3 table refused, exit 5), then runs the format's
distributed half: executors rewrite the planned groups, the driver plans and commits.
:mod:`airflow_lakeformat.spark.paimon_compaction` commits one COMPACT snapshot (a primary-key table goes to
:mod:`airflow_lakeformat.spark.paimon_pk_compaction`: Paimon's merge-tree compaction, ``--full`` or ``--minor``,
the default, executors merging the buckets); :mod:`airflow_lakeformat.spark.iceberg_compaction` runs Java's
``rewrite_data_files`` bin-pack (deletes applied, validated ``replace`` commits, partial progress).
``--commit-user`` names the commit's user (the operator passes the connection's
``<commit_user_prefix>-<dag_id>-<task_id>``). A dry run only plans, and reports the plan. The result is the
in-process result's JSON plus ``"job"`` and ``"mode": "spark"`` (a primary-key table's keeps its ``"mode"``,
``full`` or ``minor``).

Example:
    spark-submit compact_data.py --table /wh/db.db/events --min-file-count 2 --option partial-progress.enabled=true
    spark-submit compact_data.py --table /wh/db.db/orders --full
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

from airflow_lakeformat.spark import iceberg_compaction, paimon_compaction
from airflow_lakeformat.spark.runtime import JobContext, by_format, run_job

JOB = "compact_data"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partition",
        action="append",
        metavar="K=V[,K=V]",
        help="compact only partitions matching this spec (repeatable; any spec matches)",
    )
    parser.add_argument(
        "--min-file-count",
        type=int,
        help="smallest group worth a rewrite (default: 5; Iceberg: min-input-files)",
    )
    parser.add_argument(
        "--target-file-size",
        help="e.g. '128 mb' (default: the table's target-file-size / write.target-file-size-bytes)",
    )
    parser.add_argument(
        "--commit-user", help="commit user of the snapshots (Paimon default: lakeformat-compact-data-<uuid>)"
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--full",
        dest="mode",
        action="store_const",
        const="full",
        help="Paimon primary-key tables: every bucket into one sorted run at the max level",
    )
    modes.add_argument(
        "--minor",
        dest="mode",
        action="store_const",
        const="minor",
        help="Paimon primary-key tables: Paimon's universal compaction pick (the default); append tables: "
        "their bin-pack",
    )
    iceberg_compaction.add_arguments(parser)


def run(context: JobContext) -> dict[str, Any]:
    """Open the table through the facade, check it there, run the format's half."""
    table = context.open_lake_table(catalogs=True)
    table.maintenance.check_compact_data(mode=context.args.mode)  # an append table refuses --full
    return by_format(
        table,
        paimon=partial(paimon_compaction.run, context),
        iceberg=partial(iceberg_compaction.run, context),
    )


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import compact_data as job

    sys.exit(job.main())
