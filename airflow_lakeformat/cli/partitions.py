"""The ``expire-partitions`` command: Paimon's ``expire_partitions`` through the facade.

It opens the table with :func:`~airflow_lakeformat.cli.tables.open_command_table` and calls
``table.maintenance.expire_partitions``, the API the Python user and the operator call; the result's
``to_json()`` and ``summary()`` are printed by ``output.finish``. It commits unless ``--dry-run`` (the rule of
the commands that commit: the dropped partitions' files stay on disk until a snapshot expiry deletes them).
Each flag left out falls back to the table's option (``partition.expiration-time``, ...), so a table that sets
them needs no flag at all. An Iceberg table is refused by the facade (a usage error, exit 2).

Example:
    >>> from airflow_lakeformat.cli import main
    >>> main(["expire-partitions", "/wh/db.db/t", "--expiration-time", "30 d", "--dry-run"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from airflow_lakeformat.cli.output import finish
from airflow_lakeformat.cli.tables import open_command_table


def expire_partitions(args: argparse.Namespace, out: TextIO) -> None:
    """``expire-partitions``: commits one OVERWRITE snapshot unless ``--dry-run``."""
    table = open_command_table(args)
    given: dict[str, Any] = {
        "expiration_time": args.expiration_time,
        "timestamp_formatter": args.timestamp_formatter,
        "timestamp_pattern": args.timestamp_pattern,
        "strategy": args.strategy,
        "max_expires": args.max_expires,
        "commit_user": args.commit_user,
    }
    result = table.maintenance.expire_partitions(
        dry_run=args.dry_run, **{name: value for name, value in given.items() if value is not None}
    )
    finish(args.json, {"table": table.uri, **result.to_json()}, result.summary(), out)
