"""Which table a command names: the one place that maps a command's flags to ``open_table`` arguments.

:func:`open_args` turns ``TABLE``, ``--format``, ``--catalog NAME``, ``--catalog-property KEY=VALUE``,
``--storage-option KEY=VALUE`` and ``--branch`` into the keyword arguments of
:func:`airflow_lakeformat.core.tables.open_table`, which picks the format (a catalog implies Iceberg; else
the files decide: Paimon has ``snapshot/`` and ``schema/``, Iceberg ``metadata/*.metadata.json``).
:func:`open_command_table` opens it and returns the facade's table (``.format``, ``.uri``,
``.maintenance``). ``--branch`` names a Paimon branch; on an Iceberg table it is a usage mistake (its
branches and tags are read with ``files --ref NAME``), refused rather than ignored.

Example:
    >>> open_args(argparse.Namespace(table="db.t", format=None, catalog="prod", catalog_property=None,
    ...                              storage_option=None, branch="main"))
    {'format': None, 'storage_options': {}, 'catalog': 'prod', 'catalog_properties': None, 'branch': 'main'}
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.io import parse_storage_options

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable


def catalog_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--catalog-property KEY=VALUE`` pairs (values kept as text: pyiceberg parses its own)."""
    properties: dict[str, str] = {}
    for pair in getattr(args, "catalog_property", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"catalog property {pair!r} is not of the form KEY=VALUE")
        properties[key.strip()] = value
    return properties


def open_args(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``open_table`` (all but the table itself) that the command's flags give.

    Args:
        args: The parsed arguments (``format``, ``catalog``, ``catalog_property``, ``storage_option``,
            ``branch``).

    Raises:
        UsageError: a malformed ``--catalog-property``, or ``--format paimon`` with a catalog flag.
    """
    properties = catalog_properties(args)
    catalog = getattr(args, "catalog", None)
    fmt = getattr(args, "format", None)
    return {
        "format": fmt,
        "storage_options": parse_storage_options(getattr(args, "storage_option", None)),
        "catalog": catalog,
        "catalog_properties": properties or None,
        "branch": getattr(args, "branch", "main"),
    }


def open_command_table(args: argparse.Namespace) -> PaimonTable | IcebergLakeTable:
    """The command's table through the facade (``open_table``): either format, picked once there.

    Raises:
        UsageError: ``--branch`` on an Iceberg table (refused, not ignored), ``--format paimon`` with a catalog
            (the facade refuses it), or a malformed flag.
        TableNotFoundError / UnknownTableFormatError: no table of either format at the path.

    Example:
        >>> open_command_table(build_parser().parse_args(["expire", "/wh/db.db/t"])).format  # doctest: +SKIP
        'paimon'
    """
    from airflow_lakeformat.core.tables import open_table

    options = open_args(args)
    table = open_table(args.table, **options)
    # format branch: the facade takes a branch for Paimon only (an Iceberg table is one handle for all its refs,
    # which the sensor watches per branch); the CLI must not ignore a --branch the user gave.
    if table.format == "iceberg" and options["branch"] != "main":
        raise UsageError(
            f"--branch {options['branch']}: a Paimon option; an Iceberg table's branches and tags are read "
            "with files --ref NAME"
        )
    return table
