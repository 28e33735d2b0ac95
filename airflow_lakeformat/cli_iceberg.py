"""The ``lakeformat`` commands on Apache Iceberg tables: same command names, flags, JSON contract and exit codes.

:func:`open_iceberg` decides whether a command's TABLE is an Iceberg table: ``--format iceberg``, a
catalog (``--catalog NAME`` from pyiceberg's own configuration, or ``--catalog-property KEY=VALUE``), a
``*.metadata.json`` path, or a table root whose ``metadata/`` holds ``*.metadata.json`` files
(:func:`~airflow_lakeformat.core.formats.detect_format`). Anything else stays a Paimon table.
The documents come from ``core/iceberg`` (pyiceberg's model, our manifest decoding); this module only
prints them.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TextIO

from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.formats import detect_format
from airflow_lakeformat.core.io import parse_storage_options

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.table import IcebergTable


def catalog_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--catalog-property KEY=VALUE`` pairs (values kept as text: pyiceberg parses its own)."""
    properties: dict[str, str] = {}
    for pair in getattr(args, "catalog_property", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"catalog property {pair!r} is not of the form KEY=VALUE")
        properties[key.strip()] = value
    return properties


def open_iceberg(args: argparse.Namespace) -> IcebergTable | None:
    """The command's table as an Iceberg table, or None when it is a Paimon table."""
    fmt = getattr(args, "format", None)
    if fmt == "paimon":
        return None
    properties = catalog_properties(args)
    catalog = getattr(args, "catalog", None)
    storage = parse_storage_options(args.storage_option)
    explicit = fmt == "iceberg" or catalog or properties
    if not explicit and detect_format(args.table, storage_options=storage) != "iceberg":
        return None
    from airflow_lakeformat.core.iceberg.catalog import open_table

    return open_table(
        args.table,
        catalog_name=catalog,
        catalog_properties=properties or None,
        storage_options=storage,
    )


def refuse(table: IcebergTable, operation: str) -> None:
    """An operation not yet implemented for Iceberg tables: a typed error, exit 5, nothing changed."""
    raise UnsupportedFormatError(table.name, f"{operation} of Iceberg tables is not implemented yet")


def _emit(document: Any, out: TextIO) -> None:
    from airflow_lakeformat.cli import _emit_json

    _emit_json(document, out)


def _rows(rows: list[dict[str, Any]], columns: list[str], out: TextIO) -> None:
    from airflow_lakeformat.cli import _print_rows

    _print_rows(rows, columns, out)


def snapshots(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.snapshots import snapshots_document

    document = snapshots_document(table)
    if args.json:
        _emit(document, out)
        return
    _rows(
        document["snapshots"],
        ["id", "parentId", "sequenceNumber", "timestampMs", "operation", "schemaId"],
        out,
    )
    for name, ref in sorted(document["refs"].items()):
        out.write(f"{ref['type']} {name} -> snapshot {ref['snapshotId']}\n")


def files(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.files import files_document

    ref = getattr(args, "ref", None) or getattr(args, "tag", None)
    document = files_document(
        table, snapshot_id=args.snapshot, ref=ref, progress=progress.for_stream(sys.stderr)
    )
    if args.json:
        _emit(document, out)
        return
    _rows(
        document["files"], ["path", "content", "specId", "recordCount", "fileSize", "dataSequenceNumber"], out
    )


def manifests(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.manifests import manifests_document

    document = manifests_document(table, snapshot_id=args.snapshot)
    if args.json:
        _emit(document, out)
        return
    _rows(document["manifests"], ["path", "content", "specId", "length", "addedSnapshotId"], out)


def inspect(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    from airflow_lakeformat.core.iceberg.inspect import inspect_document

    document = inspect_document(table)
    if args.json:
        _emit(document, out)
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
    from airflow_lakeformat.core.iceberg.manifest_compaction import compact_manifests as compact

    result = compact(table, "minor" if args.minor else "full", dry_run=args.dry_run)
    if args.json:
        _emit({"table": table.name, **result.to_json()}, out)
        return
    out.write(result.summary() + "\n")


def write(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``write --from FILE``: an append through pyiceberg (partition overwrite is not implemented yet)."""
    if args.overwrite is not None:
        refuse(table, "a partition overwrite")
    from airflow_lakeformat.core.iceberg.write import append, write_schema
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
        _emit(document, out)
        return
    out.write(f"committed snapshot {snapshot_id}: +{data.num_rows} rows\n")


def commit(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``commit --add PATH...``: register existing Parquet files (pyiceberg's add_files)."""
    if args.overwrite is not None:
        refuse(table, "a partition overwrite")
    from airflow_lakeformat.core.iceberg.write import add_files

    snapshot_id = add_files(table, list(args.add))
    document = {
        "table": table.name,
        "format": "iceberg",
        "snapshotId": snapshot_id,
        "filesAdded": len(args.add),
    }
    if args.json:
        _emit(document, out)
        return
    out.write(f"committed snapshot {snapshot_id}: +{len(args.add)} files\n")


# -- remove-orphans ---------------------------------------------------------------------------------

_ORPHAN_ONLY_FLAGS = ("report", "equal_scheme", "equal_authority", "prefix_mismatch", "max_listed")


def add_orphan_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``remove-orphans`` flags that only Iceberg tables take (Java's procedure arguments)."""
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="Iceberg: write every deleted (dry run: would-be-deleted) path and why, one JSON line each",
    )
    parser.add_argument(
        "--equal-scheme",
        action="append",
        metavar="FROM=TO",
        help="Iceberg: schemes naming the same store (repeatable; s3a=s3 and s3n=s3 always apply)",
    )
    parser.add_argument(
        "--equal-authority",
        action="append",
        metavar="FROM=TO",
        help="Iceberg: authorities (buckets, name nodes) naming the same store (repeatable)",
    )
    parser.add_argument(
        "--prefix-mismatch",
        choices=("error", "ignore"),
        default=None,
        help="Iceberg: a listed file valid under another scheme or authority aborts the run (error, "
        "default) or is kept (ignore); it is never deleted",
    )
    parser.add_argument(
        "--max-listed",
        type=int,
        default=None,
        metavar="N",
        help="Iceberg: how many orphan paths --json lists (default 1000; --report has them all)",
    )


def refuse_iceberg_only_orphan_flags(args: argparse.Namespace) -> None:
    """A Paimon table given an Iceberg-only ``remove-orphans`` flag: refused rather than ignored."""
    given = [f"--{name.replace('_', '-')}" for name in _ORPHAN_ONLY_FLAGS if getattr(args, name, None)]
    if given:
        raise ValueError(f"{', '.join(given)}: only for Iceberg tables")


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values or []:
        source, sep, target = value.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ValueError(f"{flag} {value!r} is not of the form FROM=TO")
        pairs[source.strip()] = target.strip()
    return pairs


def remove_orphans(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``remove-orphans``: Java's ``remove_orphan_files`` rules, stricter (``core/iceberg/orphans.py``)."""
    from airflow_lakeformat.core.iceberg.orphans import (
        DEFAULT_OLDER_THAN,
        DEFAULT_SAMPLE_LIMIT,
        remove_orphan_files,
    )

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
        _emit(document, out)
        return
    out.write(result.summary() + "\n")
    for line in document["decisions"] + document["warnings"]:
        out.write(f"  {line}\n")


# -- expire ---------------------------------------------------------------------------------------

_EXPIRE_ICEBERG_ONLY = ("retain_last", "snapshot_id", "clean_expired_metadata")
_EXPIRE_PAIMON_ONLY = ("retain_max", "max_deletes")


def older_than_argument(text: str) -> timedelta | str:
    """``--older-than``: a duration (``5 d``), or for Iceberg tables an ISO-8601 timestamp (kept as text)."""
    from airflow_lakeformat.core.iceberg.expiry_rules import parse_older_than
    from airflow_lakeformat.core.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        pass
    try:
        parse_older_than(text, 0)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def add_expire_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``expire`` flags that only Iceberg tables take (Java's ``expire_snapshots`` arguments)."""
    parser.add_argument(
        "--retain-last",
        type=int,
        metavar="N",
        help="Iceberg: keep at least N ancestors of each branch head (default: "
        "history.expire.min-snapshots-to-keep, 1); --retain-min means the same for Iceberg tables",
    )
    parser.add_argument(
        "--snapshot-id",
        type=int,
        action="append",
        metavar="ID",
        help="Iceberg: expire this snapshot too, in addition to the age rule (repeatable)",
    )
    parser.add_argument(
        "--clean-expired-metadata",
        action="store_true",
        help="Iceberg: also remove partition specs and schemas no remaining snapshot uses",
    )


def refuse_iceberg_only_expire_flags(args: argparse.Namespace) -> None:
    """A Paimon table given an Iceberg-only ``expire`` flag or an ISO timestamp: refused rather than ignored."""
    given = [f"--{name.replace('_', '-')}" for name in _EXPIRE_ICEBERG_ONLY if getattr(args, name, None)]
    if given:
        raise ValueError(f"{', '.join(given)}: only for Iceberg tables")
    if isinstance(getattr(args, "older_than", None), str):
        raise ValueError(
            "--older-than: a timestamp is only accepted for Iceberg tables (Paimon takes a duration)"
        )


def expire(table: IcebergTable, args: argparse.Namespace, out: TextIO) -> None:
    """``expire``: Java's ``expire_snapshots`` rules, deleting the files only expired snapshots reached
    (``core/iceberg/expiry.py``)."""
    from airflow_lakeformat.core.iceberg.expiry import expire_snapshots

    given = [
        f"--{name.replace('_', '-')}" for name in _EXPIRE_PAIMON_ONLY if getattr(args, name, None) is not None
    ]
    if given:
        raise ValueError(f"{', '.join(given)}: only for Paimon tables")
    retain_last, retain_min = getattr(args, "retain_last", None), getattr(args, "retain_min", None)
    if retain_last is not None and retain_min is not None and retain_last != retain_min:
        raise ValueError("--retain-last and --retain-min are the same setting for Iceberg tables: give one")
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
        _emit(document, out)
        return
    out.write(result.summary() + "\n")
    for line in document["decisions"] + document["warnings"]:
        out.write(f"  {line}\n")
