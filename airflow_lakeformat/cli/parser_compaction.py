"""The commands that rewrite or drop data and commit: ``compact-data``, ``compact-deletes``, ``expire-partitions``.

Registered on the ``lakeformat`` parser by :func:`~airflow_lakeformat.cli.parser.build_parser`; their
handlers live in ``cli/compaction.py`` and ``cli/partitions.py`` and are imported only when the command
runs. Each commits unless ``--dry-run`` (what they replace stays on disk until an expiry deletes it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from airflow_lakeformat.cli.arg_types import count, duration, memory_size

Adder = Callable[[str, str, str, str], argparse.ArgumentParser]


def add_compaction_commands(add: Adder) -> None:
    """``compact-data`` (both formats) and ``compact-deletes`` (Iceberg): they add files and commit."""
    add_compact_data_command(add)
    add_compact_deletes_command(add)


def add_compact_data_command(add: Adder) -> None:
    """``compact-data``: the mode (Paimon primary-key tables), the groups, and Iceberg's rewrite_data_files."""
    data = add(
        "compact-data",
        "compaction:compact_data",
        "rewrite small data files into target-size files and commit (unless --dry-run): Paimon append tables, "
        "Paimon primary-key tables by Paimon's merge-tree compaction (--full or --minor), or Iceberg tables as "
        "Java's rewrite_data_files bin-pack does, deletes applied",
        "lakeformat compact-data /wh/db.db/t --min-input-files 2 --partition dt=2024-01-01 --dry-run",
    )
    data.add_argument(
        "--dry-run", action="store_true", help="report the groups, write nothing (default: commit)"
    )
    strategy = data.add_mutually_exclusive_group()
    strategy.add_argument(
        "--full",
        action="store_true",
        help="Paimon primary-key tables: merge every bucket into one sorted run at the max level, as Java's "
        "compact procedure with compact_strategy => 'full' (default: --minor)",
    )
    strategy.add_argument(
        "--minor",
        action="store_true",
        help="Paimon primary-key tables: Paimon's universal compaction pick per bucket (the default on them); "
        "append tables: their bin-pack",
    )
    data.add_argument(
        "--min-input-files",
        type=count,
        metavar="N",
        help="the fewest files worth a rewrite per group (default: the table's: Paimon "
        "compaction.min.file-num, 5; Iceberg 5)",
    )
    data.add_argument(
        "--target-file-size",
        type=memory_size,
        metavar="SIZE",
        help="bytes per output file, e.g. '128 mb' (default: the table's target-file-size or "
        "write.target-file-size-bytes)",
    )
    data.add_argument(
        "--partition",
        action="append",
        metavar="K=V[,K=V]",
        help="only this partition, matched by value (repeatable) (default: every partition)",
    )
    data.add_argument(
        "--where",
        metavar="PREDICATE",
        help="Iceberg: only files whose partition may match, e.g. \"ts >= '2024-01-01T00:00:00'\" (default: all)",
    )
    data.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="Iceberg: a rewrite_data_files option by Java's name, e.g. rewrite-all=true, "
        "partial-progress.enabled=true, remove-dangling-deletes=true (repeatable) (default: Java's defaults)",
    )
    data.add_argument(
        "--strategy",
        choices=("binpack", "sort"),
        help="Iceberg: binpack, or sort each group's rows across its files by the sort order, as Java's "
        "rewrite_data_files strategy => 'sort' (default: binpack, sort when --sort-order is given)",
    )
    data.add_argument(
        "--sort-order",
        metavar="ORDER",
        help='Iceberg: sort by this instead of the table\'s sort order, e.g. "id DESC NULLS LAST, name"; '
        "implies --strategy sort (default: the table's sort order)",
    )


def add_compact_deletes_command(add: Adder) -> None:
    """``compact-deletes`` (Iceberg): Java's rewrite_position_delete_files."""
    deletes = add(
        "compact-deletes",
        "compaction:compact_deletes",
        "Iceberg: merge small position-delete files and drop records of files no longer live, and commit "
        "(unless --dry-run), as Java's rewrite_position_delete_files",
        "lakeformat compact-deletes /wh/db/t --option rewrite-all=true --dry-run",
    )
    deletes.add_argument(
        "--dry-run", action="store_true", help="report the groups, write nothing (default: commit)"
    )
    deletes.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="a rewrite_position_delete_files option by Java's name (repeatable) (default: Java's defaults)",
    )


def add_partition_commands(add: Adder) -> None:
    """``expire-partitions`` (Paimon): it commits one OVERWRITE snapshot unless --dry-run."""
    expire = add(
        "expire-partitions",
        "partitions:expire_partitions",
        "Paimon: drop the partitions older than the expiration time in one snapshot and commit (unless "
        "--dry-run), as Paimon's expire_partitions; their files go with a later expire",
        "lakeformat expire-partitions /wh/db.db/t --expiration-time 30d --timestamp-formatter yyyyMMdd --dry-run",
    )
    expire.add_argument(
        "--expiration-time",
        type=duration,
        metavar="DURATION",
        help="expire partitions older than now minus this, e.g. '30 d' (default: the table's "
        "partition.expiration-time; required one way or the other)",
    )
    expire.add_argument(
        "--timestamp-formatter",
        metavar="PATTERN",
        help="a Java DateTimeFormatter pattern of the partition time, e.g. yyyyMMdd (default: the table's "
        "partition.timestamp-formatter, else the lenient yyyy-M-d[ H:m:s])",
    )
    expire.add_argument(
        "--timestamp-pattern",
        metavar="TEMPLATE",
        help="how the partition values make the time text, e.g. '$dt $hour:00:00' (default: the table's "
        "partition.timestamp-pattern, else the first partition value)",
    )
    expire.add_argument(
        "--strategy",
        choices=("values-time", "update-time"),
        help="values-time: the time in the partition values; update-time: the newest file's creation time "
        "(default: the table's partition.expiration-strategy, values-time)",
    )
    expire.add_argument(
        "--max-expires",
        type=count,
        metavar="N",
        help="expire at most N partitions per run, the first N in sorted order (default: the table's "
        "partition.expiration-max-num, 100)",
    )
    expire.add_argument(
        "--dry-run", action="store_true", help="report the partitions, commit nothing (default: commit)"
    )
    expire.add_argument("--commit-user", help="commit user (default: a new lakeformat-<uuid>)")
