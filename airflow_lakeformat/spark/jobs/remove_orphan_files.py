"""``spark-submit`` job ``remove_orphan_files``: orphan-file cleanup of a Paimon or an Iceberg table on Spark.

    spark-submit remove_orphan_files.py --table URI [--older-than DURATION] [--allow-short-older-than]
        [--dry-run] [--parallelism N] [--result PATH]
        [--equal-scheme FROM=TO] [--equal-authority FROM=TO] [--prefix-mismatch error|ignore]  (Iceberg)

One job for both formats: it opens the table through the facade (``core/tables.py``, the format detected
from its files), resolves ``--older-than`` with the core's one rule (``table.maintenance.orphan_older_than``:
Paimon 1 day, Iceberg 3 days when not given), refuses the other format's flags, then runs the format's
distributed half, built from that format's core blocks: :mod:`airflow_lakeformat.spark.paimon_orphans`
(listing, used names and anti-join on executors) or :mod:`airflow_lakeformat.spark.iceberg_orphans` (Java's
``DeleteOrphanFilesSparkAction`` rules: listing, join and deletes on executors, the valid set on the driver).
Both delete with the core's :class:`~airflow_lakeformat.core.maintenance.deletion.FileDeleter`, re-checking
every batch against the table, and return the in-process result's JSON plus ``"job"`` and ``"mode": "spark"``.

Example:
    spark-submit remove_orphan_files.py --table s3://lake/wh/db.db/events --older-than "3 d" --dry-run
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.units import parse_duration
from airflow_lakeformat.spark import iceberg_orphans, paimon_orphans
from airflow_lakeformat.spark.runtime import JobContext, by_format, run_job

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import PaimonTable

JOB = "remove_orphan_files"
_ICEBERG_ONLY = ("equal_scheme", "equal_authority")


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--older-than",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="only files older than this are candidates (default: Paimon 1 d, Iceberg 3 d; under 1 h "
        "(Paimon) or 24 h (Iceberg) needs --allow-short-older-than)",
    )
    parser.add_argument(
        "--allow-short-older-than",
        action="store_true",
        help="accept --older-than under the floor (only when no writer is running)",
    )
    iceberg_orphans.add_arguments(parser)


def _run_paimon(context: JobContext, table: PaimonTable) -> dict[str, Any]:
    """Paimon's half, after refusing Iceberg's flags (rather than ignoring them)."""
    given = [f"--{name.replace('_', '-')}" for name in _ICEBERG_ONLY if getattr(context.args, name, None)]
    if given:
        raise UsageError(f"{', '.join(given)}: only for Iceberg tables")
    return paimon_orphans.run(context, table)


def run(context: JobContext) -> dict[str, Any]:
    """Open the table through the facade, resolve ``--older-than``, run the format's half."""
    table = context.open_lake_table()
    context.args.older_than = table.maintenance.orphan_older_than(context.args.older_than)
    return by_format(
        table, paimon=partial(_run_paimon, context), iceberg=partial(iceberg_orphans.run, context)
    )


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import remove_orphan_files as job

    sys.exit(job.main())
