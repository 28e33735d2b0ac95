"""Which table a command names: an Iceberg table (a catalog, a metadata file, a detected layout) or Paimon.

:func:`open_iceberg` decides whether a command's TABLE is an Iceberg table: ``--format iceberg``, a
catalog (``--catalog NAME`` from pyiceberg's own configuration, or ``--catalog-property KEY=VALUE``), a
``*.metadata.json`` path, or a table root whose ``metadata/`` holds ``*.metadata.json`` files
(:func:`~airflow_lakeformat.core.formats.detect_format`). Anything else stays a Paimon table
(:func:`open_paimon`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.formats import detect_format
from airflow_lakeformat.core.io import parse_storage_options

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.snapshot import Snapshot
    from airflow_lakeformat.core.paimon.table import Table


def catalog_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--catalog-property KEY=VALUE`` pairs (values kept as text: pyiceberg parses its own)."""
    properties: dict[str, str] = {}
    for pair in getattr(args, "catalog_property", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"catalog property {pair!r} is not of the form KEY=VALUE")
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
    if getattr(args, "branch", "main") != "main":
        raise UsageError(
            f"--branch {args.branch}: a Paimon option; an Iceberg table's branches and tags are read "
            "with files --ref NAME"
        )
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_table

    return open_table(
        args.table,
        catalog_name=catalog,
        catalog_properties=properties or None,
        storage_options=storage,
    )


def open_paimon(args: argparse.Namespace) -> Table:
    """The command's table as a Paimon table, on ``--branch``."""
    from airflow_lakeformat.core.paimon.table import Table

    return Table.open(args.table, parse_storage_options(args.storage_option), branch=args.branch)


def selected_snapshot(table: Table, args: argparse.Namespace) -> tuple[Snapshot | None, str | None]:
    """The snapshot ``--tag`` or ``--snapshot`` names (default: the latest), and the tag's name if any."""
    manager = table.snapshot_manager
    if getattr(args, "tag", None):
        return manager.tag(args.tag), args.tag
    if getattr(args, "snapshot", None) is not None:
        return manager.snapshot(args.snapshot), None
    return manager.latest_snapshot(), None
