"""Whether Paimon's Parquet reader reads a file's column as a table column.

* **Schema.** Every Parquet column must be a table column of a type Paimon's Parquet reader reads
  as that column (by name, as ``ParquetReaderFactory`` matches). Missing columns are allowed when
  nullable (Paimon reads them as null); extra columns, unsigned integers, narrowing and NOT NULL
  columns with nulls are refused. This module judges one column; :mod:`.data_file_meta` applies
  it to every column of a footer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, CHARACTER_ROOTS, TIMESTAMP_ROOTS, DataType


def parquet_logical_type(col: Any) -> dict[str, Any]:
    """A Parquet column's logical type as a dict (``{"Type": "None"}`` when it has none)."""
    parsed = json.loads(col.logical_type.to_json())
    return parsed if isinstance(parsed, dict) else {"Type": "None"}


NESTED_ROOTS = frozenset({"ARRAY", "MAP", "MULTISET", "ROW"})


def parquet_column_problem(dtype: DataType, col: Any) -> str | None:
    """Why Paimon's Parquet reader would not read this primitive column as ``dtype`` (None: it would)."""
    phys = col.physical_type
    logical = parquet_logical_type(col)
    kind = logical.get("Type")
    root = dtype.root
    signed_int = kind in ("None", None) or (kind == "Int" and logical.get("isSigned", True))
    bits = int(logical.get("bitWidth", 32 if phys == "INT32" else 64)) if kind == "Int" else None
    if kind == "Int" and not logical.get("isSigned", True):
        return "unsigned integers are not supported (cast to a signed type)"
    ok = False
    if root == "BOOLEAN":
        ok = phys == "BOOLEAN"
    elif root == "TINYINT":
        ok = phys == "INT32" and kind == "Int" and bits == 8
    elif root == "SMALLINT":
        ok = phys == "INT32" and kind == "Int" and bits in (8, 16)
    elif root == "INT":
        ok = phys == "INT32" and signed_int
    elif root == "BIGINT":
        ok = phys in ("INT32", "INT64") and signed_int
    elif root == "FLOAT":
        ok = phys == "FLOAT"
    elif root == "DOUBLE":
        ok = phys in ("FLOAT", "DOUBLE")
    elif root == "DECIMAL":
        ok = (
            kind == "Decimal"
            and logical.get("precision") == dtype.precision
            and logical.get("scale") == (dtype.scale or 0)
            and phys in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY")
        )
    elif root in CHARACTER_ROOTS:
        ok = phys == "BYTE_ARRAY" and kind == "String"
    elif root in BINARY_ROOTS:
        ok = phys in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and kind in ("None", None)
    elif root == "DATE":
        ok = phys == "INT32" and kind == "Date"
    elif root == "TIME":
        ok = phys == "INT32" and kind == "Time" and logical.get("timeUnit") == "milliseconds"
    elif root in TIMESTAMP_ROOTS:
        ok = phys == "INT96" or (phys == "INT64" and kind == "Timestamp")
    if ok:
        return None
    return f"Parquet {phys} {col.logical_type} cannot be read as {dtype.sql()}"


def arrow_type_compatible(file_type: pa.DataType, dtype: DataType) -> bool:
    """Structural check for nested columns (Paimon matches nested row fields by name)."""
    t = file_type.value_type if pa.types.is_dictionary(file_type) else file_type
    root = dtype.root
    if root == "ARRAY":
        assert dtype.element is not None
        return (pa.types.is_list(t) or pa.types.is_large_list(t)) and arrow_type_compatible(
            t.value_type, dtype.element
        )
    if root in ("MAP", "MULTISET"):
        if not pa.types.is_map(t):
            return False
        if root == "MULTISET":
            assert dtype.element is not None
            return arrow_type_compatible(t.key_type, dtype.element) and pa.types.is_int32(t.item_type)
        assert dtype.key is not None and dtype.value is not None
        return arrow_type_compatible(t.key_type, dtype.key) and arrow_type_compatible(
            t.item_type, dtype.value
        )
    if root == "ROW":
        if not pa.types.is_struct(t):
            return False
        children = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        if set(children) != {f.name for f in dtype.fields}:
            return False
        return all(arrow_type_compatible(children[f.name], f.type) for f in dtype.fields)
    checks: dict[str, Callable[[pa.DataType], bool]] = {
        "BOOLEAN": pa.types.is_boolean,
        "TINYINT": pa.types.is_int8,
        "SMALLINT": lambda x: pa.types.is_int8(x) or pa.types.is_int16(x),
        "INT": lambda x: pa.types.is_int8(x) or pa.types.is_int16(x) or pa.types.is_int32(x),
        "BIGINT": lambda x: pa.types.is_signed_integer(x),
        "FLOAT": pa.types.is_float32,
        "DOUBLE": lambda x: pa.types.is_float32(x) or pa.types.is_float64(x),
        "DATE": pa.types.is_date32,
        "TIME": lambda x: x == pa.time32("ms"),
        "DECIMAL": lambda x: (
            pa.types.is_decimal(x) and x.precision == dtype.precision and x.scale == (dtype.scale or 0)
        ),
    }
    if root in checks:
        return checks[root](t)
    if root in CHARACTER_ROOTS:
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t))
    if root in BINARY_ROOTS:
        return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))
    if root in TIMESTAMP_ROOTS:
        return bool(pa.types.is_timestamp(t))
    return False


def leaf_count(t: pa.DataType) -> int:
    """How many Parquet leaf columns an Arrow field of this type spans."""
    if pa.types.is_dictionary(t):
        return 1
    if pa.types.is_struct(t):
        return sum(leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return leaf_count(t.key_type) + leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return leaf_count(t.value_type)
    return 1
