"""The value statistics (``_VALUE_STATS``) of a Parquet file, from its footer, as far as they are safe.

* **Statistics** (``_VALUE_STATS``). Too narrow a min/max makes readers skip a file that holds
  matching rows, so a column gets statistics only if every row group has min, max and null count
  for it and its Parquet order is Paimon's order: signed integers, DATE, TIME(ms), booleans,
  strings and binaries (unsigned bytes, as ``BinaryString.compareTo``/``CompareUtils`` do),
  DECIMAL of the table's precision and scale, and INT64 timestamps whose unit is not finer than
  the column's precision. FLOAT/DOUBLE (NaN), INT96 and nested types are left out. The included
  columns are stored densely, as ``SimpleStatsConverter.toBinaryDenseMode`` does: one BinaryRow of
  the included columns in schema order, their names in ``_VALUE_STATS_COLS`` (null when every
  column is included, ``[]`` when none is).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import EMPTY_STATS_ROW, SimpleStats
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import (
    BINARY_ROOTS,
    CHARACTER_ROOTS,
    INTEGER_ROOTS,
    TIMESTAMP_ROOTS,
    DataField,
    DataType,
)
from airflow_lakeformat.core.paimon.values import timestamp_from_epoch
from airflow_lakeformat.core.paimon.write.parquet_columns import parquet_logical_type

_UNIT_DIGITS = {"milliseconds": 3, "microseconds": 6, "nanoseconds": 9}


def _stats_converter(dtype: DataType, col: Any) -> Callable[[Any], Any] | None:
    """How to turn a Parquet statistics value (``min_raw``) into Paimon's internal value.

    None when the column's Parquet order is not Paimon's order, or we are not sure it is.
    """
    phys = col.physical_type
    logical = parquet_logical_type(col)
    kind = logical.get("Type")
    root = dtype.root
    if root == "BOOLEAN" and phys == "BOOLEAN":
        return bool
    if root in INTEGER_ROOTS and phys in ("INT32", "INT64"):
        if kind in ("None", None) or (kind == "Int" and logical.get("isSigned")):
            return int
        return None
    if root == "DATE" and phys == "INT32" and kind == "Date":
        return int
    if root == "TIME" and phys == "INT32" and kind == "Time" and logical.get("timeUnit") == "milliseconds":
        return int
    if root in CHARACTER_ROOTS and phys == "BYTE_ARRAY" and kind == "String":
        # Strict: a value cut inside a character (truncated statistics) is not a string at all.
        return lambda raw: bytes(raw).decode("utf-8")
    if root in BINARY_ROOTS and phys in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and kind in ("None", None):
        return bytes
    if (
        root == "DECIMAL"
        and kind == "Decimal"
        and logical.get("precision") == dtype.precision
        and logical.get("scale") == (dtype.scale or 0)
    ):
        scale = dtype.scale or 0
        if phys in ("INT32", "INT64"):
            return lambda raw: _decimal(int(raw), scale)
        if phys in ("FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
            return lambda raw: _decimal(int.from_bytes(bytes(raw), "big", signed=True), scale)
        return None
    if root in TIMESTAMP_ROOTS and phys == "INT64" and kind == "Timestamp":
        unit = logical.get("timeUnit")
        precision = dtype.precision if dtype.precision is not None else 6
        # A file unit finer than the column's precision: readers may truncate or keep the extra
        # digits depending on the code path, so no statistics can be right for both.
        digits = _UNIT_DIGITS.get(str(unit))
        if digits is None or digits > max(precision, 3):
            return None
        return lambda raw: timestamp_from_epoch(int(raw), digits)
    return None


def _decimal(unscaled: int, scale: int) -> Decimal:
    return Decimal((1 if unscaled < 0 else 0, tuple(int(d) for d in str(abs(unscaled))), -scale))


def zero_nulls(row_groups: Sequence[Any], leaf: int) -> bool:
    """Whether every row group's statistics say this leaf column holds no null (False when unknown)."""
    total = 0
    for rg in row_groups:
        st = rg.column(leaf).statistics
        if st is None or not st.has_null_count:
            return False
        total += int(st.null_count)
    return total == 0


def column_stats(
    row_groups: Sequence[Any], leaf: int, col: Any, dtype: DataType
) -> tuple[Any, Any, int] | None:
    """(min, max, null count) over all row groups, or None unless every row group is complete."""
    convert = _stats_converter(dtype, col)
    if convert is None:
        return None
    low: Any = None
    high: Any = None
    null_count = 0
    try:
        for rg in row_groups:
            rows = int(rg.num_rows)
            if rows == 0:
                continue
            st = rg.column(leaf).statistics
            if st is None or not st.has_null_count:
                return None
            nulls = int(st.null_count)
            null_count += nulls
            if not st.has_min_max:
                if nulls != rows:
                    return None  # values exist but their range is unknown
                continue
            lo, hi = convert(st.min_raw), convert(st.max_raw)
            if lo > hi:
                return None
            low = lo if low is None or lo < low else low
            high = hi if high is None or hi > high else high
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    return low, high, null_count


def dense_value_stats(
    schema: TableSchema,
    included: Sequence[DataField],
    mins: Sequence[Any],
    maxs: Sequence[Any],
    nulls: list[int | None],
    where: str,
) -> tuple[SimpleStats, list[str] | None]:
    """The statistics of the included columns in dense mode, and the ``_VALUE_STATS_COLS`` naming them."""
    types = [f.type for f in included]
    if not included:
        value_stats = SimpleStats(EMPTY_STATS_ROW, EMPTY_STATS_ROW, [])
    else:
        try:
            min_row, max_row = binary_row.encode(mins, types), binary_row.encode(maxs, types)
        except (ValueError, TypeError, OverflowError, struct.error) as exc:
            raise RegisterError(where, f"column statistics do not fit the table's types ({exc})") from exc
        value_stats = SimpleStats(min_row, max_row, nulls)
    cols = None if len(included) == len(schema.fields) else [f.name for f in included]
    return value_stats, cols
