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
    from airflow_lakeformat.core.iceberg.write import append
    from airflow_lakeformat.core.sources import read_source

    data = read_source(args.source, parse_storage_options(args.storage_option))
    snapshot_id = append(table, data)
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
