"""Paimon types as Arrow types and back, and Arrow columns as Paimon internal values.

Paimon -> Arrow (:func:`arrow_type`, :func:`arrow_schema`) is the Parquet layout Paimon's
``ParquetSchemaConverter`` writes: new data files are written in it and existing ones checked against
it (``write/``). Arrow -> Paimon (:func:`paimon_type_from_arrow`, :func:`fields_from_arrow`) reads
schemas given as Arrow (``create``, the CLI).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import (
    BINARY_ROOTS,
    CHARACTER_ROOTS,
    TIMESTAMP_ROOTS,
    DataField,
    DataType,
    parse_type,
)
from airflow_lakeformat.core.paimon.values import timestamp_from_epoch

_PRECISION_OF_UNIT = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_SIMPLE = {
    "bool": "BOOLEAN", "boolean": "BOOLEAN",
    "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT",
    "float": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE", "double": "DOUBLE",
    "string": "STRING", "utf8": "STRING", "large_string": "STRING", "large_utf8": "STRING",
    "binary": "BYTES", "large_binary": "BYTES", "date32": "DATE", "date32[day]": "DATE",
}  # fmt: skip


def paimon_type_from_arrow(arrow_type: pa.DataType, nullable: bool = True) -> str:
    """The Paimon SQL type string for an Arrow type."""
    suffix = "" if nullable else " NOT NULL"
    if pa.types.is_timestamp(arrow_type):
        precision = _PRECISION_OF_UNIT[arrow_type.unit]
        zone = " WITH LOCAL TIME ZONE" if arrow_type.tz else ""
        return f"TIMESTAMP({precision}){zone}{suffix}"
    if pa.types.is_time(arrow_type):
        return f"TIME({min(_PRECISION_OF_UNIT[arrow_type.unit], 3)}){suffix}"
    if pa.types.is_decimal(arrow_type):
        return f"DECIMAL({arrow_type.precision}, {arrow_type.scale}){suffix}"
    if pa.types.is_fixed_size_binary(arrow_type):
        return f"BINARY({arrow_type.byte_width}){suffix}"
    name = str(arrow_type)
    if name in _SIMPLE:
        return _SIMPLE[name] + suffix
    raise ValueError(f"Arrow type {arrow_type} has no Paimon equivalent here")


def fields_from_arrow(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": paimon_type_from_arrow(f.type, f.nullable)} for f in schema]


_ARROW_NAME = re.compile(r"^(timestamp\[(s|ms|us|ns)(, tz=.+)?\]|decimal128\((\d+), ?(\d+)\))$")


def fields_from_arrow_json(field: dict[str, Any]) -> dict[str, Any]:
    """A field whose ``type`` is a Paimon type, or an Arrow type name (``int64``, ``timestamp[us]``...)."""
    type_spec = field["type"]
    if not isinstance(type_spec, str):
        return dict(field)
    try:
        parse_type(type_spec)
        return dict(field)
    except ValueError:
        pass
    nullable = bool(field.get("nullable", True))
    name = type_spec.strip()
    match = _ARROW_NAME.match(name)
    if name in _SIMPLE:
        paimon = _SIMPLE[name] + ("" if nullable else " NOT NULL")
    elif match and match[2]:
        paimon = paimon_type_from_arrow(pa.timestamp(match[2], tz="UTC" if match[3] else None), nullable)
    elif match:
        paimon = paimon_type_from_arrow(pa.decimal128(int(match[4]), int(match[5])), nullable)
    else:
        raise ValueError(f"field {field['name']!r}: {type_spec!r} is neither a Paimon nor an Arrow type")
    out = {k: v for k, v in field.items() if k != "nullable"}
    out["type"] = paimon
    return out


# -- Paimon types as Arrow types ----------------------------------------------------------------


def arrow_type(dtype: DataType) -> pa.DataType:
    """The Arrow type Paimon's Parquet layout corresponds to (``ParquetSchemaConverter``)."""
    root = dtype.root
    simple: dict[str, pa.DataType] = {
        "BOOLEAN": pa.bool_(),
        "TINYINT": pa.int8(),
        "SMALLINT": pa.int16(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "DATE": pa.date32(),
        "TIME": pa.time32("ms"),  # Paimon stores TIME as INT32 milliseconds whatever the precision
    }
    if root in simple:
        return simple[root]
    if root in CHARACTER_ROOTS:
        return pa.string()
    if root in BINARY_ROOTS:
        return pa.binary()
    if root == "DECIMAL":
        precision = dtype.precision or 10
        scale = dtype.scale or 0
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if root in TIMESTAMP_ROOTS:
        precision = dtype.precision if dtype.precision is not None else 6
        unit = "ms" if precision <= 3 else "us" if precision <= 6 else "ns"
        return pa.timestamp(unit, tz="UTC" if root == "TIMESTAMP_LTZ" else None)
    if root == "ARRAY":
        assert dtype.element is not None
        return pa.list_(pa.field("element", arrow_type(dtype.element), dtype.element.nullable))
    if root == "MULTISET":
        assert dtype.element is not None
        return pa.map_(arrow_type(dtype.element), pa.int32())
    if root == "MAP":
        assert dtype.key is not None and dtype.value is not None
        return pa.map_(
            pa.field("key", arrow_type(dtype.key), False),
            pa.field("value", arrow_type(dtype.value), dtype.value.nullable),
        )
    if root == "ROW":
        return pa.struct([_arrow_field(f) for f in dtype.fields])
    raise RegisterError(dtype.sql(), "no Parquet mapping for this type")


def _arrow_field(f: DataField) -> pa.Field:
    return pa.field(
        f.name, arrow_type(f.type), f.type.nullable, metadata={b"PARQUET:field_id": str(f.id).encode()}
    )


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The table's columns as an Arrow schema, with Paimon's field ids as Parquet field ids."""
    return pa.schema([_arrow_field(f) for f in schema.fields])


# -- Arrow columns as Paimon internal values ----------------------------------------------------


def internal_values(column: pa.ChunkedArray | pa.Array, dtype: DataType) -> list[Any]:
    """Paimon internal values of an Arrow column (already of a type compatible with ``dtype``)."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = column.type
    root = dtype.root
    if root == "DATE":
        return list(column.cast(pa.int32()).to_pylist())
    if root == "TIME":
        return list(column.cast(pa.time32("ms")).cast(pa.int32()).to_pylist())
    if root in TIMESTAMP_ROOTS:
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        raw = column.cast(pa.int64()).to_pylist()
        if digits == 0:
            return [None if v is None else Timestamp(v * 1000, 0) for v in raw]
        return [None if v is None else timestamp_from_epoch(v, digits) for v in raw]
    return list(column.to_pylist())
