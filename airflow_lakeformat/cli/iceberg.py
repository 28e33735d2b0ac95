"""The ``lakeformat`` commands on Apache Iceberg tables: same command names, flags, JSON contract and exit codes.

Each takes the table :func:`~airflow_lakeformat.cli.tables.open_iceberg` opened; the command modules
(``read``, ``maintenance``, ``write``) call them for Iceberg tables. The documents come from
``core/iceberg`` (pyiceberg's model, our manifest decoding); this module only prints them.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from airflow_lakeformat.cli.output import emit_json, print_outcome, print_rows
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UnsupportedFormatError, UsageError
from airflow_lakeformat.core.io import parse_storage_options

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


def refuse(table: IcebergTable, operation: str) -> None:
    """An operation not yet implemented for Iceberg tables: a typed error, exit 5, nothing changed."""
    raise UnsupportedFormatError(table.name, f"{operation} of Iceberg tables is not implemented yet")


def snapshots(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.metadata.snapshots import snapshots_document

    document = snapshots_document(table)
    if args.json:
        emit_json(document, out)
        return
    print_rows(
        document["snapshots"],
        ["id", "parentId", "sequenceNumber", "timestampMs", "operation", "schemaId"],
        out,
    )
    for name, ref in sorted(document["refs"].items()):
        out.write(f"{ref['type']} {name} -> snapshot {ref['snapshotId']}\n")


def files(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.metadata.files import files_document

    ref = getattr(args, "ref", None) or getattr(args, "tag", None)
    document = files_document(
        table, snapshot_id=args.snapshot, ref=ref, progress=progress.for_stream(sys.stderr)
    )
    if args.json:
        emit_json(document, out)
        return
    print_rows(
        document["files"], ["path", "content", "specId", "recordCount", "fileSize", "dataSequenceNumber"], out
    )


def manifests(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.metadata.manifests import manifests_document

    document = manifests_document(table, snapshot_id=args.snapshot)
    if args.json:
        emit_json(document, out)
        return
    print_rows(document["manifests"], ["path", "content", "specId", "length", "addedSnapshotId"], out)


def inspect(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.metadata.inspect import inspect_document

    document = inspect_document(table)
    if args.json:
        emit_json(document, out)
        return
    for key, value in document.items():
        if isinstance(value, (dict, list)):
            out.write(f"{key}\n")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                out.write(f"  {k} = {v}\n")
        else:
            out.write(f"{key:<24} {value}\n")


def compact_manifests(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``compact-manifests [--full | --minor] [--dry-run]``: Java's rewrite_manifests or its merge policy."""
    from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests as compact

    result = compact(table, "minor" if args.minor else "full", dry_run=args.dry_run)
    if args.json:
        emit_json({"table": table.name, **result.to_json()}, out)
        return
    out.write(result.summary() + "\n")


def write(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``write --from FILE``: an append through pyiceberg (partition overwrite is not implemented yet)."""
    if args.overwrite is not None:
        refuse(table, "a partition overwrite")
    from airflow_lakeformat.core.iceberg.write.write import append, write_schema
    from airflow_lakeformat.core.sources import read_source

    data = read_source(args.source, write_schema(table), parse_storage_options(args.storage_option))
    snapshot_id = append(table, data, source=args.source)
    document = {
        "table": table.name,
        "format": "iceberg",
        "snapshotId": snapshot_id,
        "rowsAdded": data.num_rows,
    }
    if args.json:
        emit_json(document, out)
        return
    out.write(f"committed snapshot {snapshot_id}: +{data.num_rows} rows\n")


def commit(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``commit --add PATH...``: register existing Parquet files (pyiceberg's add_files)."""
    if args.overwrite is not None:
        refuse(table, "a partition overwrite")
    from airflow_lakeformat.core.iceberg.write.write import add_files

    snapshot_id = add_files(table, list(args.add))
    document = {
        "table": table.name,
        "format": "iceberg",
        "snapshotId": snapshot_id,
        "filesAdded": len(args.add),
    }
    if args.json:
        emit_json(document, out)
        return
    out.write(f"committed snapshot {snapshot_id}: +{len(args.add)} files\n")


# -- remove-orphans ---------------------------------------------------------------------------------


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or []:
        source, sep, target = value.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise UsageError(f"{flag} {value!r} is not of the form FROM=TO")
        pairs[source.strip()] = target.strip()
    return pairs


def remove_orphans(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``remove-orphans``: Java's ``remove_orphan_files`` rules, stricter (``core/iceberg/maintenance/orphans.py``)."""
    from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import (
        DEFAULT_OLDER_THAN,
        DEFAULT_SAMPLE_LIMIT,
    )
    from airflow_lakeformat.core.iceberg.maintenance.orphans import remove_orphan_files

    result = remove_orphan_files(
        table,
        dry_run=args.dry_run,
        older_than=DEFAULT_OLDER_THAN if args.older_than is None else args.older_than,
        allow_short_older_than=args.allow_short_older_than,
        equal_schemes=_pairs(args.equal_scheme, "--equal-scheme"),
        equal_authorities=_pairs(args.equal_authority, "--equal-authority"),
        prefix_mismatch=args.prefix_mismatch or "error",
        report=args.report,
        sample_limit=DEFAULT_SAMPLE_LIMIT if args.max_listed is None else max(0, args.max_listed),
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        emit_json(document, out)
        return
    print_outcome(document, result.summary(), out)


# -- expire ---------------------------------------------------------------------------------------

_EXPIRE_PAIMON_ONLY = ("retain_max", "max_deletes")


def expire(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``expire``: Java's ``expire_snapshots`` rules, deleting the files only expired snapshots reached
    (``core/iceberg/maintenance/expiry.py``)."""
    from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots

    given = [
        f"--{name.replace('_', '-')}" for name in _EXPIRE_PAIMON_ONLY if getattr(args, name, None) is not None
    ]
    if given:
        raise UsageError(f"{', '.join(given)}: only for Paimon tables")
    retain_last, retain_min = getattr(args, "retain_last", None), getattr(args, "retain_min", None)
    if retain_last is not None and retain_min is not None and retain_last != retain_min:
        raise UsageError("--retain-last and --retain-min are the same setting for Iceberg tables: give one")
    result = expire_snapshots(
        table,
        dry_run=args.dry_run,
        older_than=args.older_than,
        retain_last=retain_last if retain_last is not None else retain_min,
        snapshot_ids=args.snapshot_id or (),
        clean_expired_metadata=args.clean_expired_metadata,
        progress=progress.for_stream(sys.stderr),
    )
    document = result.to_json()
    if args.json:
        emit_json(document, out)
        return
    print_outcome(document, result.summary(), out)
