"""The data-compaction commands: ``compact-data`` (both formats) and ``compact-deletes`` (Iceberg).

``compact-data`` bin-packs small files of Paimon append tables and Iceberg tables, and runs Paimon's merge-tree
compaction on Paimon primary-key tables (``--full``: every bucket into one max-level sorted run; ``--minor``, their
default: Paimon's universal pick).

Both open the table through the facade and call ``table.maintenance.compact_data`` / ``compact_deletes``, so the
CLI, the Python API and the operator run the same code. They add files and commit unless ``--dry-run`` (the one
dry-run rule: what they replace stays on disk until an expiry deletes it). The flags both formats take are the
facade's shorthands (``--min-input-files``, ``--target-file-size``, ``--partition``); ``--where``, ``--option``
(Java's ``rewrite_data_files`` options by name), ``--strategy`` and ``--sort-order`` (Java's sort rewrite: each
group's rows sorted across its files) are Iceberg's and refused on a Paimon table, named by flag.

Example:
    >>> from airflow_lakeformat.cli import main
    >>> main(["compact-data", "/wh/db.db/t", "--min-input-files", "2", "--dry-run"])  # doctest: +SKIP
    >>> main(["compact-data", "/wh/db/t", "--strategy", "sort", "--sort-order", "id DESC NULLS LAST"])  # doctest: +SKIP
    >>> main(["compact-data", "/wh/db.db/orders", "--full", "--json"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from airflow_lakeformat.cli.output import finish
from airflow_lakeformat.cli.tables import open_command_table
from airflow_lakeformat.core.errors import UsageError


def _partitions(values: list[str] | None) -> list[dict[str, str | None]] | None:
    """``--partition k=v[,k=v]`` (repeatable) as partition specs matched by value."""
    specs: list[dict[str, str | None]] = []
    for value in values or []:
        spec: dict[str, str | None] = {}
        for pair in value.split(","):
            key, sep, item = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--partition {value!r} is not of the form k=v[,k=v]")
            spec[key.strip()] = item
        specs.append(spec)
    return specs or None


def _options(values: list[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for value in values or []:
        key, sep, item = value.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {value!r} is not of the form KEY=VALUE")
        options[key.strip()] = item.strip()
    return options


def compact_data(args: argparse.Namespace, out: TextIO) -> None:
    """``compact-data``: commits unless ``--dry-run``; Paimon append tables or Iceberg tables."""
    table = open_command_table(args)
    given: dict[str, Any] = {
        "partitions": _partitions(args.partition),
        "min_file_count": args.min_input_files,
        "target_file_size": args.target_file_size,
        # Paimon's merge-tree mode (primary-key tables); an Iceberg table refuses it by name
        "mode": "full" if args.full else "minor" if args.minor else None,
    }
    # Iceberg's own arguments: the Paimon facade refuses them by name (UsageError), never ignores them
    given.update(
        {
            "where": args.where,
            "options": _options(args.option) or None,
            "strategy": args.strategy,
            "sort_order": args.sort_order,
        }
    )
    result = table.maintenance.compact_data(
        dry_run=args.dry_run, **{name: value for name, value in given.items() if value is not None}
    )
    finish(args.json, {"table": table.uri, **result.to_json()}, result.summary(), out)


def compact_deletes(args: argparse.Namespace, out: TextIO) -> None:
    """``compact-deletes``: Iceberg's rewrite_position_delete_files; commits unless ``--dry-run``."""
    table = open_command_table(args)
    result = table.maintenance.compact_deletes(dry_run=args.dry_run, options=_options(args.option))
    finish(args.json, {"table": table.uri, **result.to_json()}, result.summary(), out)
