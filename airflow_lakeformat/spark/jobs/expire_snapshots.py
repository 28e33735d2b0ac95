"""``spark-submit`` job ``expire_snapshots``: snapshot expiry of a Paimon or an Iceberg table on Spark.

    spark-submit expire_snapshots.py --table URI [--retain-min N] [--retain-max N]
        [--older-than DURATION] [--max-deletes N] [--dry-run] [--parallelism N] [--result PATH]
        [--retain-last N] [--snapshot-id ID ...] [--clean-expired-metadata]  (Iceberg)

One job for both formats: it opens the table through the facade (``core/tables.py``, the format detected
from its files), checks the arguments there (``table.maintenance.check_expire_snapshots``: the other
format's options refused by name, ``--older-than`` a duration, or for Iceberg also an ISO-8601 timestamp),
then runs the format's distributed half, built from that format's core blocks:
:mod:`airflow_lakeformat.spark.paimon_expiry` (delta manifests read and data files deleted on executors) or
:mod:`airflow_lakeformat.spark.iceberg_expiry` (Java's ``expire_snapshots`` rules: manifest reads and
deletes on executors, the plan and the commit on the driver). The result is the in-process result's JSON
plus ``"job"`` and ``"mode": "spark"``.

Example:
    spark-submit expire_snapshots.py --table /wh/db.db/events --retain-min 5 --older-than "1 d"
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from airflow_lakeformat.core.maintenance.facade_base import expiry_older_than
from airflow_lakeformat.spark import iceberg_expiry, paimon_expiry
from airflow_lakeformat.spark.runtime import JobContext, by_format, run_job

JOB = "expire_snapshots"


def _older_than(text: str) -> timedelta | datetime | str:
    """A duration; for Iceberg tables also an ISO-8601 timestamp (kept as text, refused for Paimon)."""
    try:
        value = expiry_older_than(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("older_than: ")) from exc
    assert value is not None
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retain-min", type=int, metavar="N", help="default: snapshot.num-retained.min (10)")
    parser.add_argument("--retain-max", type=int, metavar="N", help="default: snapshot.num-retained.max")
    parser.add_argument(
        "--older-than",
        type=_older_than,
        metavar="DURATION",
        help="expire a snapshot only if its successor is older than this (default: snapshot.time-retained, 1 h)",
    )
    parser.add_argument(
        "--max-deletes", type=int, metavar="N", help="snapshots per run (default: snapshot.expire.limit, 50)"
    )
    iceberg_expiry.add_arguments(parser)


def run(context: JobContext) -> dict[str, Any]:
    """Open the table through the facade, check the arguments there, run the format's half."""
    args = context.args
    table = context.open_lake_table()
    args.older_than = table.maintenance.check_expire_snapshots(
        older_than=args.older_than,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        max_deletes=args.max_deletes,
        retain_last=args.retain_last,
        snapshot_ids=args.snapshot_id or (),
        clean_expired_metadata=args.clean_expired_metadata,
    )
    return by_format(
        table, paimon=partial(paimon_expiry.run, context), iceberg=partial(iceberg_expiry.run, context)
    )


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import expire_snapshots as job

    sys.exit(job.main())
