"""The read commands' Iceberg forms, until ``read.py`` reads both formats through the facade.

The maintenance and write commands moved into ``maintenance.py`` and ``write.py`` (through
``core.tables.open_table``); what is left here is what ``read.py`` still calls for Iceberg tables, and goes
away with it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from airflow_lakeformat.cli.output import emit_json, print_rows
from airflow_lakeformat.core import progress
from airflow_lakeformat.core.errors import UnsupportedFormatError

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
