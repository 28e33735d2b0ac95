"""What a write must produce: the table's columns as Arrow types, and the names the table gives those types.

Each format describes its table once as a :class:`WriteSchema` (Paimon: ``paimon.write.rows.write_schema``;
Iceberg: ``iceberg.write.write_schema``); the readers of ``core/sources`` turn an input file into exactly
that Arrow schema or refuse it, so neither format ever sees a column whose type was guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.errors import SourceValueError as SourceValueError  # raised by the readers


@dataclass(frozen=True)
class WriteSchema:
    """The table's columns as a write must deliver them.

    Attributes:
        arrow: one field per table column, in table order, with the table's nullability (``NOT NULL`` /
            Iceberg ``required`` fields are not nullable) and any field metadata the writer needs.
        type_names: the table's own name of each column's type (``INT``, ``decimal(10, 2)``), used in errors.
    """

    arrow: pa.Schema
    type_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.arrow.names)

    def type_name(self, column: str) -> str:
        return self.type_names.get(column) or str(self.arrow.field(column).type)


def check_columns(names: list[str], schema: WriteSchema, source: str) -> None:
    """Refuse duplicate input columns, columns the table lacks and missing ``NOT NULL`` columns."""
    if len(set(names)) != len(names):
        duplicates = sorted({n for n in names if names.count(n) > 1})
        raise RegisterError(source, f"duplicate column names {duplicates}")
    extra = [n for n in names if n not in set(schema.names)]
    if extra:
        raise RegisterError(source, f"columns {extra} are not in the table (columns: {schema.names})")
    for target in schema.arrow:
        if target.name not in names and not target.nullable:
            raise RegisterError(source, f"NOT NULL column {target.name!r} is missing")


def with_row_kind_column(schema: WriteSchema, column: str | None) -> WriteSchema:
    """The table's columns plus a primary-key write's row-kind column (``+I``, ``-U``, ``+U``, ``-D``) as a
    string column, when the table has no column of that name (the writer reads the kinds from it and drops
    it, ``core/paimon/write/pk_writes.py``).

    Example:
        >>> with_row_kind_column(WriteSchema(pa.schema([("k", pa.int64())])), "op").names
        ['k', 'op']
    """
    if column is None or column in schema.names:
        return schema
    return WriteSchema(
        schema.arrow.append(pa.field(column, pa.string())), {**schema.type_names, column: "STRING"}
    )
