"""The maintenance commands: ``compact-manifests``, ``expire``, ``remove-orphans``, on either format.

Each opens its table through the facade (:func:`~airflow_lakeformat.cli.tables.open_command_table`, which
calls ``core.tables.open_table``) and calls ``table.maintenance.*``, the API the Python user and the
operators call; the result's ``to_json()`` and ``summary()`` are printed by ``output.finish``. This module
imports no format module.

A flag only one format takes (:data:`ONLY_FOR`) given for a table of the other format is a usage mistake
(exit 2) named by its flag, rather than ignored. The dry-run rule is the facade's: ``expire`` and
``remove-orphans`` are dry runs unless ``--apply``; ``compact-manifests`` commits unless ``--dry-run``.

Example:
    >>> from airflow_lakeformat.cli import main
    >>> main(["expire", "/wh/db.db/t", "--older-than", "7d", "--apply"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from airflow_lakeformat.cli.output import finish
from airflow_lakeformat.cli.tables import open_command_table
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.maintenance.results import summary

#: command -> format -> the destinations of the flags only that format takes.
ONLY_FOR: dict[str, dict[str, tuple[str, ...]]] = {
    "expire": {
        "iceberg": ("retain_last", "snapshot_id", "clean_expired_metadata"),
        "paimon": ("retain_max", "max_deletes"),
    },
    "remove-orphans": {"iceberg": ("equal_scheme", "equal_authority", "prefix_mismatch")},
}


def refuse_other_format_flags(args: argparse.Namespace, table_format: str) -> None:
    """A flag of the other format given: a usage mistake named by its flag (an ISO ``--older-than`` on a
    Paimon table is refused by the facade, which knows which format takes a timestamp)."""
    for fmt, names in ONLY_FOR.get(args.command, {}).items():
        given = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n, None) not in (None, False)]
        if fmt != table_format and given:
            raise UsageError(f"{', '.join(given)}: only for {fmt.capitalize()} tables")


def compact_manifests(args: argparse.Namespace, out: TextIO) -> None:
    """``compact-manifests [--full | --minor] [--dry-run]``: commits unless ``--dry-run``."""
    table = open_command_table(args)
    result = table.maintenance.compact_manifests("minor" if args.minor else "full", dry_run=args.dry_run)
    document = {"table": table.uri, **result.to_json()}
    finish(args.json, document, summary(document), out)


def expire(args: argparse.Namespace, out: TextIO) -> None:
    """``expire``: a dry run unless ``--apply``; Paimon's or Java Iceberg's rules, chosen by the facade."""
    table = open_command_table(args)
    refuse_other_format_flags(args, table.format)
    retain_last, retain_min = getattr(args, "retain_last", None), args.retain_min
    if retain_last is not None and retain_min is not None and retain_last != retain_min:
        raise UsageError("--retain-last and --retain-min are the same setting for Iceberg tables: give one")
    options = {
        "older_than": args.older_than,
        "retain_min": retain_min,
        "retain_last": retain_last,
        "retain_max": args.retain_max,
        "max_deletes": args.max_deletes,
        "snapshot_ids": args.snapshot_id,
        "clean_expired_metadata": args.clean_expired_metadata or None,
    }
    result = table.maintenance.expire_snapshots(
        dry_run=args.dry_run, progress=progress.for_stream(sys.stderr), **_given(options)
    )
    finish(args.json, result.to_json(), result.summary(), out)


def remove_orphans(args: argparse.Namespace, out: TextIO) -> None:
    """``remove-orphans``: a dry run unless ``--apply``; ``--report FILE`` on both formats."""
    table = open_command_table(args)
    refuse_other_format_flags(args, table.format)
    options = {
        "older_than": args.older_than,
        "allow_short_older_than": args.allow_short_older_than or None,
        "equal_schemes": _pairs(args.equal_scheme, "--equal-scheme") or None,
        "equal_authorities": _pairs(args.equal_authority, "--equal-authority") or None,
        "prefix_mismatch": args.prefix_mismatch,
        "report": args.report,
    }
    result = table.maintenance.remove_orphan_files(
        dry_run=args.dry_run, progress=progress.for_stream(sys.stderr), **_given(options)
    )
    if args.max_listed is not None:
        result.sample_limit = args.max_listed
    finish(args.json, result.to_json(), result.summary(), out)


def _given(options: dict[str, Any]) -> dict[str, Any]:
    """The options the user gave: a format's facade method takes only its own, and defaults the rest."""
    return {name: value for name, value in options.items() if value is not None}


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    """``FROM=TO`` pairs of ``--equal-scheme``/``--equal-authority`` (a malformed one: a usage mistake)."""
    pairs: dict[str, str] = {}
    for value in values or []:
        source, sep, target = value.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise UsageError(f"{flag} {value!r} is not of the form FROM=TO")
        pairs[source.strip()] = target.strip()
    return pairs
