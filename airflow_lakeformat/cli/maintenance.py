"""The maintenance commands: ``compact-manifests``, ``expire``, ``remove-orphans`` (Iceberg in ``iceberg.py``).

A Paimon table given a flag only Iceberg tables take is refused rather than the flag ignored.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from airflow_lakeformat.cli import iceberg
from airflow_lakeformat.cli.output import emit_json, print_outcome
from airflow_lakeformat.cli.tables import open_iceberg, open_paimon
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import Mode
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import (
    compact_manifests as compact_paimon_manifests,
)
from airflow_lakeformat.core.paimon.maintenance.orphans import DEFAULT_OLDER_THAN, remove_orphan_files

_EXPIRE_ICEBERG_ONLY = ("retain_last", "snapshot_id", "clean_expired_metadata")
_ORPHAN_ICEBERG_ONLY = ("report", "equal_scheme", "equal_authority", "prefix_mismatch", "max_listed")


def compact_manifests(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.compact_manifests(table_, args, out)
    table = open_paimon(args)
    mode: Mode = "minor" if args.minor else "full"
    result = compact_paimon_manifests(table, mode, dry_run=args.dry_run)
    if args.json:
        emit_json({"table": table.uri, **result.to_json()}, out)
        return
    out.write(result.summary() + "\n")


def expire(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.expire(table_, args, out)
    _refuse_iceberg_only_expire_flags(args)
    result = expire_snapshots(
        open_paimon(args),
        dry_run=args.dry_run,
        retain_min=args.retain_min,
        retain_max=args.retain_max,
        older_than=args.older_than,
        max_deletes=args.max_deletes,
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        emit_json(document, out)
        return
    print_outcome(document, result.summary(), out)


def remove_orphans(args: argparse.Namespace, out: TextIO) -> None:
    if (table_ := open_iceberg(args)) is not None:
        return iceberg.remove_orphans(table_, args, out)
    _refuse_iceberg_only_flags(args, _ORPHAN_ICEBERG_ONLY)
    result = remove_orphan_files(
        open_paimon(args),
        dry_run=args.dry_run,
        older_than=DEFAULT_OLDER_THAN if args.older_than is None else args.older_than,
        allow_short_older_than=args.allow_short_older_than,
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        emit_json(document, out)
        return
    print_outcome(document, result.summary(), out)


def _refuse_iceberg_only_flags(args: argparse.Namespace, names: tuple[str, ...]) -> None:
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name, None)]
    if given:
        raise UsageError(f"{', '.join(given)}: only for Iceberg tables")


def _refuse_iceberg_only_expire_flags(args: argparse.Namespace) -> None:
    """An Iceberg-only ``expire`` flag or an ISO timestamp for ``--older-than``."""
    _refuse_iceberg_only_flags(args, _EXPIRE_ICEBERG_ONLY)
    if isinstance(getattr(args, "older_than", None), str):
        raise UsageError(
            "--older-than: a timestamp is only accepted for Iceberg tables (Paimon takes a duration)"
        )
