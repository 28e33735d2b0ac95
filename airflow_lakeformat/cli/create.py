"""``lakeformat create-table``: a table of the format asked for, where it was asked for, or nothing at all.

The format: ``--format iceberg``, or a catalog (``--catalog NAME``, ``--catalog-property KEY=VALUE``, which
imply Iceberg as they do for every other command), makes an Iceberg table: ``namespace.table`` in the
catalog, else a Hadoop-layout table at the path (``core/iceberg/catalog/create.py``). Otherwise a Paimon table at
the path (``core/paimon/create.py``); ``--format paimon`` with a catalog flag is refused.

Everything given is read and checked before anything is created (flags, ``--option`` pairs, the schema
file, partition and key columns, the types' Iceberg mapping, the name against its target), so a refusal
is one ``lakeformat: error: ...`` line (exit 2 for a usage mistake, the typed codes otherwise) and no
directory, catalog row or namespace. The schema file is read here, by the Paimon-style field parser
(:func:`load_fields`), and reaches the Iceberg core as plain
:class:`~airflow_lakeformat.core.iceberg.catalog.table_definition.SqlColumn` values: ``core/iceberg`` never sees
a Paimon type.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TextIO

from airflow_lakeformat.cli.output import finish
from airflow_lakeformat.cli.tables import catalog_properties
from airflow_lakeformat.core.errors import LakeformatError, UsageError
from airflow_lakeformat.core.io import parse_storage_options
from airflow_lakeformat.core.tables import refuse_iceberg_table_at, table_format_for

if TYPE_CHECKING:
    from airflow_lakeformat.core.iceberg.catalog.table_definition import SqlColumn
    from airflow_lakeformat.core.paimon.types import DataField

Format = Literal["paimon", "iceberg"]


def load_fields(path: str) -> list[dict[str, Any]]:
    """Fields from a Paimon-style JSON field list or schema, Arrow-style JSON, or a Parquet file's schema.

    Args:
        path: A ``*.parquet`` file (its schema is used) or a JSON file: a list of ``{"name", "type"}``
            objects, or an object with such a ``"fields"`` list; types are Paimon SQL types or Arrow names.

    Returns:
        Paimon-style fields (``{"name", "type": <Paimon SQL type>, ...}``).

    Example:
        >>> load_fields("schema.json")  # doctest: +SKIP
        [{'name': 'id', 'type': 'BIGINT NOT NULL'}, {'name': 'ts', 'type': 'TIMESTAMP(6)'}]
    """
    from airflow_lakeformat.core.paimon.arrow_types import fields_from_arrow, fields_from_arrow_json

    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return fields_from_arrow(pq.read_schema(path))
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    fields = document.get("fields", document) if isinstance(document, dict) else document
    if not isinstance(fields, list) or not all(
        isinstance(f, dict) and "name" in f and "type" in f for f in fields
    ):
        raise ValueError(f"{path}: expected a list of fields with 'name' and 'type'")
    return [fields_from_arrow_json(f) for f in fields]


def split_keys(text: str | None) -> list[str]:
    """Comma-separated keys, commas inside parentheses kept: ``"dt,bucket(16, id)"`` -> two keys.

    Args:
        text: The flag's value (None for no keys).

    Returns:
        The stripped, non-empty keys.

    Raises:
        UsageError: Unbalanced parentheses.

    Example:
        >>> split_keys("region, days(ts), bucket(16, id)")
        ['region', 'days(ts)', 'bucket(16, id)']
    """
    keys, current, depth = [], "", 0
    for char in text or "":
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
        if char == "," and depth == 0:
            keys.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise UsageError(f"keys {text!r}: unbalanced parentheses")
    return [key.strip() for key in [*keys, current] if key.strip()]


@contextlib.contextmanager
def _usage(what: str) -> Iterator[None]:
    """A malformed input (ValueError, a missing file) below becomes a UsageError naming ``what``."""
    try:
        yield
    except LakeformatError:
        raise
    except (ValueError, FileNotFoundError, IsADirectoryError) as exc:
        raise UsageError(f"{what}: {exc}") from exc


def choose_format(args: argparse.Namespace) -> Format:
    """Iceberg for ``--format iceberg`` or any catalog flag; Paimon otherwise.

    Args:
        args: The parsed ``create-table`` arguments.

    Returns:
        ``"iceberg"`` or ``"paimon"``.

    Raises:
        UsageError: ``--format paimon`` with ``--catalog``/``--catalog-property``, or a malformed property.

    Example:
        >>> choose_format(argparse.Namespace(format=None, catalog="prod", catalog_property=None))
        'iceberg'
    """
    with _usage("--catalog-property"):
        properties = catalog_properties(args)
    return table_format_for(args.format, args.catalog, properties) or "paimon"


def _options(pairs: Sequence[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {pair!r} is not of the form KEY=VALUE")
        options[key.strip()] = value
    return options


def create_table(args: argparse.Namespace, out: TextIO) -> None:
    """``create-table TABLE --schema FILE [--partition-keys ...] [--primary-keys ...] [--option K=V ...]``.

    Args:
        args: The parsed arguments (``table``, ``schema``, ``partition_keys``, ``primary_keys``, ``option``,
            ``format``, ``catalog``, ``catalog_property``, ``storage_option``, ``json``).
        out: Where the JSON document or the summary line goes.

    Example:
        >>> from airflow_lakeformat.cli import main
        >>> main(["create-table", "demo.events", "--schema", "s.json", "--catalog-property", "type=sql",
        ...       "--catalog-property", "uri=sqlite:////tmp/c.db",
        ...       "--catalog-property", "warehouse=file:///tmp/wh"])  # doctest: +SKIP
        created demo.events (iceberg, format v2, 3 fields, metadata file:///tmp/wh/demo/events/metadata/00000-....metadata.json)
    """
    table_format = choose_format(args)
    options = _options(args.option)
    with _usage(f"--schema {args.schema}"):
        fields = load_fields(args.schema)
    partition_keys = split_keys(args.partition_keys)
    primary_keys = split_keys(args.primary_keys)
    # format branch: create-table is the one command whose format cannot come from an existing table's files
    if table_format == "iceberg":
        _create_iceberg(args, fields, partition_keys, primary_keys, options, out)
    else:
        _create_paimon(args, fields, partition_keys, primary_keys, options, out)


def _create_iceberg(
    args: argparse.Namespace,
    fields: list[dict[str, Any]],
    partition_keys: list[str],
    primary_keys: list[str],
    options: dict[str, str],
    out: TextIO,
) -> None:
    from airflow_lakeformat.core.iceberg.catalog.create import check_target, create_table
    from airflow_lakeformat.core.iceberg.catalog.table_definition import define_table
    from airflow_lakeformat.core.paimon.create import schema_from_fields

    with _usage(f"--schema {args.schema}"):
        parsed = schema_from_fields(fields)  # Paimon's type parser and its duplicate checks
    columns = [_sql_column(f) for f in parsed.fields]
    properties = catalog_properties(args)
    check_target(args.table, in_catalog=args.catalog is not None or bool(properties))
    definition = define_table(args.table, columns, partition_keys, primary_keys, options)
    created = create_table(
        args.table,
        definition,
        catalog_name=args.catalog,
        catalog_properties=properties or None,
        storage_options=parse_storage_options(args.storage_option),
    )
    finish(args.json, _document(created.to_json()), created.summary(), out)


def _sql_column(field: DataField) -> SqlColumn:
    from airflow_lakeformat.core.iceberg.catalog.table_definition import SqlColumn

    dtype = field.type
    return SqlColumn(
        name=field.name,
        root=dtype.root,
        nullable=dtype.nullable,
        length=dtype.length if dtype.root == "BINARY" else None,
        precision=dtype.precision,
        scale=dtype.scale,
        doc=field.description,
    )


def _create_paimon(
    args: argparse.Namespace,
    fields: list[dict[str, Any]],
    partition_keys: list[str],
    primary_keys: list[str],
    options: dict[str, str],
    out: TextIO,
) -> None:
    from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields

    transforms = [key for key in partition_keys if "(" in key]
    if transforms:
        raise UsageError(
            f"--partition-keys {', '.join(transforms)}: partition transforms are Iceberg's; a Paimon table "
            "partitions by column values (give column names, or --format iceberg)"
        )
    with _usage(args.table):  # Paimon's rules: known keys, primary keys covering the partition keys
        schema = schema_from_fields(fields, partition_keys, primary_keys, options=options)
    storage = parse_storage_options(args.storage_option)
    refuse_iceberg_table_at(args.table, storage)
    table = create_table(args.table, schema, storage)
    document = _document({"table": table.uri, "format": "paimon", "schema": schema.to_json()})
    finish(args.json, document, f"created {table.uri} (schema 0, {len(schema.fields)} fields)", out)


def _document(created: dict[str, Any]) -> dict[str, Any]:
    """The create-table document of either format: ``operation``, ``format``, ``table``, ``dryRun`` first (as
    every changing command's), then the format's own: its schema as the format writes it."""
    return {"operation": "create-table", "dryRun": False, **created}
