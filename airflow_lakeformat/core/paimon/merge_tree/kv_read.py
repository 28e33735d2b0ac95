"""Reading one live data file of a primary-key table as a KV table (Java: ``KeyValueFileReaderFactory``).

* **By name.** Parquet columns are matched by name, as Paimon's ``ParquetReaderFactory#clipParquetSchema``
  does: pypaimon writes no Parquet field ids, Java does, and both read by name.
* **Thin files.** A file without ``_KEY_*`` columns (``data-file.thin-mode``, and what pypaimon's reader
  assumes of every file) gets them derived from the value columns, as Java >= 1.0 and pypaimon do. A file
  with only some of the key columns is corrupt.
* **Types.** Columns are cast to the current schema's Arrow types (``arrow_types.arrow_type``) and the
  result has exactly the layout of ``kv_schema.kv_arrow_schema``.
* **Refusals**, each naming the file: missing (``MissingMetadataError``), unreadable or short of a column
  (``CorruptMetadataError``), a row count other than its manifest entry's (``CorruptMetadataError``), not
  Parquet or with an external path (``UnsupportedFormatError``), written with a schema whose field list
  differs from the current one (``MaintenanceRefusedError``: schema evolution of key-value files is not
  implemented), a column whose type cannot be cast (``UnsupportedFormatError``).
* **Retractions** (:func:`holds_retractions`, :func:`retraction_check`): whether a file holds -U/-D rows, read
  from its ``_VALUE_KIND`` column. ``_DELETE_ROW_COUNT`` cannot be trusted for that: pypaimon 2.1 records 0
  for files holding -D rows, and a file upgraded to the max level with -D rows in it is read raw (no merge),
  so its -D rows would show as rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import (
    CorruptMetadataError,
    MaintenanceRefusedError,
    MissingMetadataError,
    UnsupportedFormatError,
)
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import (
    KEY_PREFIX,
    RETRACT_KINDS,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    key_column,
    kv_arrow_schema,
)
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.layout import PARQUET_EXTENSION


def data_file_location(table: Table, entry: ManifestEntry, schema: TableSchema) -> tuple[str, str]:
    """The full path of a live file and the URI to name it by in errors (refusing external paths)."""
    paths = DataFilePaths(schema)
    if entry.file.external_path:
        raise UnsupportedFormatError(
            entry.file.external_path, "data files at an external path (data-file.external-paths)"
        )
    full = table.io.join(table.root, paths.relative_path(entry))
    return full, table.io.uri(full)


def _field_signature(schema: TableSchema) -> list[tuple[int, str, str]]:
    return [(f.id, f.name, f.type.sql()) for f in schema.fields]


def check_file_schema(table: Table, entry: ManifestEntry, schema: TableSchema, where: str) -> None:
    """Refuse a file written with a schema whose field list differs from ``schema``'s."""
    schema_id = entry.file.schema_id
    if schema_id == schema.id:
        return
    written_with = table.schema_by_id(schema_id)
    if _field_signature(written_with) != _field_signature(schema):
        raise MaintenanceRefusedError(
            where,
            f"written with schema {schema_id}, whose fields differ from the current schema {schema.id}; "
            "merging files of an evolved schema is not implemented",
        )


def read_kv(table: Table, entry: ManifestEntry, schema: TableSchema) -> pa.Table:
    """One live data file of a primary-key table as a KV table in ``schema``'s layout.

    Args:
        table: the table.
        entry: the file's (ADD) manifest entry; its partition and bucket locate the file.
        schema: the current schema; the result has the layout of ``kv_arrow_schema(schema)``.

    Example::

        >>> kv = read_kv(table, entry, table.schema)
        >>> kv.column_names[:3]
        ['_KEY_pk', '_SEQUENCE_NUMBER', '_VALUE_KIND']
    """
    full, where = data_file_location(table, entry, schema)
    if not entry.file.file_name.endswith(PARQUET_EXTENSION):
        raise UnsupportedFormatError(where, "only Parquet data files can be merged")
    check_file_schema(table, entry, schema, where)
    try:
        with table.io.fs.open(full, "rb") as handle:
            parquet = pq.ParquetFile(handle)
            rows = parquet.metadata.num_rows
            if rows != entry.file.row_count:
                raise CorruptMetadataError(
                    where, f"holds {rows} rows but its manifest entry says {entry.file.row_count}"
                )
            names = parquet.schema_arrow.names
            wanted = _columns_to_read(names, schema, where)
            data = parquet.read(columns=wanted)
    except FileNotFoundError as exc:
        raise MissingMetadataError(where, "the live files of the latest snapshot") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorruptMetadataError(where, f"not a readable Parquet file ({exc})") from exc
    return to_kv_table(data, schema, where)


def _columns_to_read(names: list[str], schema: TableSchema, where: str) -> list[str]:
    present = set(names)
    keys = [key_column(k) for k in schema.trimmed_primary_keys]
    found_keys = [k for k in keys if k in present]
    if found_keys and len(found_keys) != len(keys):
        missing = [k for k in keys if k not in present]
        raise CorruptMetadataError(where, f"has key columns {found_keys} but not {missing}")
    unknown_keys = [n for n in names if n.startswith(KEY_PREFIX) and n not in keys]
    if unknown_keys:
        raise CorruptMetadataError(where, f"key columns {unknown_keys} are not the table's primary key")
    required = [SEQUENCE_NUMBER, VALUE_KIND, *(f.name for f in schema.fields)]
    missing = [n for n in required if n not in present]
    if missing:
        raise CorruptMetadataError(where, f"lacks the columns {missing} of a primary-key data file")
    return found_keys + required


def to_kv_table(data: pa.Table, schema: TableSchema, where: str) -> pa.Table:
    """A table read from a key-value file, cast to ``kv_arrow_schema(schema)`` (keys derived if absent)."""
    target = kv_arrow_schema(schema)
    columns: list[Any] = []
    present = set(data.column_names)
    for field in target:
        name = field.name
        if name.startswith(KEY_PREFIX) and name not in present:
            name = name[len(KEY_PREFIX) :]
        column = data.column(name)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise UnsupportedFormatError(
                    where, f"column {name!r} of type {column.type} cannot be read as {field.type} ({exc})"
                ) from exc
        if not field.nullable and column.null_count:
            raise CorruptMetadataError(where, f"NOT NULL column {name!r} holds {column.null_count} nulls")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


def holds_retractions(table: Table, entry: ManifestEntry, schema: TableSchema) -> bool:
    """Whether the file holds rows of kind -U or -D, from its ``_VALUE_KIND`` column (not its metadata).

    Args:
        table: the table.
        entry: the file's manifest entry.
        schema: the current schema (locates the file).

    Example::

        >>> holds_retractions(table, entry, table.schema)
        False
    """
    full, where = data_file_location(table, entry, schema)
    try:
        with table.io.fs.open(full, "rb") as handle:
            kinds = pq.ParquetFile(handle).read(columns=[VALUE_KIND]).column(VALUE_KIND)
    except FileNotFoundError as exc:
        raise MissingMetadataError(where, "the live files of the latest snapshot") from exc
    except (pa.ArrowInvalid, OSError, KeyError) as exc:
        raise CorruptMetadataError(where, f"cannot read its {VALUE_KIND} column ({exc})") from exc
    retract = pc.is_in(kinds.cast(pa.int8()), value_set=pa.array(RETRACT_KINDS, pa.int8()))
    return bool(pc.any(retract).as_py())


def retraction_check(
    table: Table, schema: TableSchema, entries: Mapping[str, ManifestEntry]
) -> Callable[[DataFileMeta], bool]:
    """``may_hold_deletes`` for ``universal.unit_actions``: a null or positive ``_DELETE_ROW_COUNT`` says yes
    (as Java decides); a zero is checked against the file's rows (:func:`holds_retractions`).

    Args:
        table: the table.
        schema: the current schema.
        entries: the bucket's live entries by file name.
    """

    def may_hold_deletes(f: DataFileMeta) -> bool:
        count = f.delete_row_count
        if count is None or count > 0:
            return True
        return holds_retractions(table, entries[f.file_name], schema)

    return may_hold_deletes


def miscounted_deletes_check(
    table: Table, schema: TableSchema, entries: Mapping[str, ManifestEntry]
) -> Callable[[DataFileMeta], bool]:
    """``miscounts_deletes`` for ``universal.unit_actions``: a ``_DELETE_ROW_COUNT`` of 0 on a file that holds
    -U/-D rows (what pypaimon 2.1 writes); null or positive counts are truthful enough (readers merge).

    Args:
        table: the table.
        schema: the current schema.
        entries: the bucket's live entries by file name.
    """

    def miscounts_deletes(f: DataFileMeta) -> bool:
        return f.delete_row_count == 0 and holds_retractions(table, entries[f.file_name], schema)

    return miscounts_deletes
