"""Typed input (Parquet, Arrow tables) made into the table's columns without changing a value.

A column whose type equals the table's is kept. Otherwise a conversion is made only when no value can
change, which is known from the types or checked value by value:

* **by type** (:func:`widens`): integers to wider integers (``int32`` -> ``BIGINT``; unsigned to a strictly
  wider signed type), integers of up to 16 bits to ``FLOAT`` and up to 32 bits to ``DOUBLE``, ``float`` to
  ``double``; ``decimal(p, s)`` to ``decimal(p', s')`` with ``s' >= s`` and ``p' - s' >= p - s``;
  timestamps and times to a finer unit with the same time-zone kind (naive stays naive; an instant in any
  zone is the same instant in UTC); ``string``/``large_string``, ``binary``/``large_binary``/
  ``fixed_size_binary``; dictionary-encoded columns (decoded); lists, maps and structs whose children
  follow these rules; an all-null column to any type;
* **checked** (:func:`checked`): between integer types, between decimals and from integers to decimals,
  from integers to floating point, to a coarser timestamp or time unit, ``date64`` to ``date32``. Arrow's
  safe cast verifies every value (``int64`` 7 fits ``INT``; 2**40 does not, nor 1 ns in microseconds), and
  the first value that would change is refused with its row (``SourceValueError``). Python callers'
  ``pa.table({"id": [1, 2]})`` is ``int64``; it reaches an ``INT`` column when every value fits.

Everything else (``double`` -> ``FLOAT`` or ``DECIMAL``, ``double`` -> ``INT``, a string to a date or a
number, a naive timestamp to an instant) is refused with :class:`~airflow_lakeformat.core.errors.RegisterError`
naming the file, the column and both types: converting it would change values or guess. Text formats are
parsed by ``text.py``, which knows how a value is written; a typed file's types are taken at their word.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.sources.schema import SourceValueError, WriteSchema, check_columns

_UNIT_ORDER = {"s": 0, "ms": 1, "us": 2, "ns": 3}
_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 19}


def _int_widens(source: pa.DataType, target: pa.DataType) -> bool:
    if not pa.types.is_integer(target):
        if pa.types.is_floating(target):
            limit = 16 if target.bit_width == 32 else 32
            return bool(source.bit_width <= limit)
        if pa.types.is_decimal(target):
            return bool(target.precision - target.scale >= _INT_DIGITS[source.bit_width])
        return False
    if pa.types.is_signed_integer(source):
        return bool(pa.types.is_signed_integer(target) and target.bit_width >= source.bit_width)
    if pa.types.is_unsigned_integer(target):
        return bool(target.bit_width >= source.bit_width)
    return bool(target.bit_width > source.bit_width)


def _temporal_widens(source: pa.DataType, target: pa.DataType) -> bool:
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        same_kind = (source.tz is None) == (target.tz is None)
        return bool(same_kind and _UNIT_ORDER[target.unit] >= _UNIT_ORDER[source.unit])
    if pa.types.is_time(source) and pa.types.is_time(target):
        return bool(_UNIT_ORDER[target.unit] >= _UNIT_ORDER[source.unit])
    return bool(pa.types.is_date(source) and pa.types.is_date32(target))


def _children_widen(source: pa.DataType, target: pa.DataType) -> bool:
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    if any(f(source) for f in lists) and any(f(target) for f in lists[:2]):
        return widens(source.value_type, target.value_type)
    if pa.types.is_map(source) and pa.types.is_map(target):
        return widens(source.key_type, target.key_type) and widens(source.item_type, target.item_type)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        given = {source.field(i).name: source.field(i).type for i in range(source.num_fields)}
        wanted = {target.field(i).name: target.field(i).type for i in range(target.num_fields)}
        return set(given) <= set(wanted) and all(widens(t, wanted[n]) for n, t in given.items())
    return False


def widens(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of ``source`` converts to ``target`` unchanged (see the module docstring)."""
    if source.equals(target) or pa.types.is_null(source):
        return True
    if pa.types.is_dictionary(source):
        return widens(source.value_type, target)
    if pa.types.is_integer(source):
        return _int_widens(source, target)
    if pa.types.is_floating(source):
        return bool(pa.types.is_floating(target) and target.bit_width >= source.bit_width)
    if pa.types.is_decimal(source):
        return bool(
            pa.types.is_decimal(target)
            and target.scale >= source.scale
            and target.precision - target.scale >= source.precision - source.scale
        )
    texts = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)
    if any(f(source) for f in texts):
        return any(f(target) for f in texts)
    binaries = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)
    if any(f(source) for f in (*binaries, pa.types.is_fixed_size_binary)):
        return any(f(target) for f in binaries)
    if pa.types.is_temporal(source):
        return _temporal_widens(source, target)
    return _children_widen(source, target)


def checked(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether ``source`` converts to ``target`` by a cast that Arrow checks value by value (see above)."""
    if pa.types.is_dictionary(source):
        return checked(source.value_type, target)
    if pa.types.is_integer(source):
        return bool(
            pa.types.is_integer(target) or pa.types.is_decimal(target) or pa.types.is_floating(target)
        )
    if pa.types.is_decimal(source):
        return bool(pa.types.is_decimal(target))
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        return (source.tz is None) == (target.tz is None)
    if pa.types.is_time(source) and pa.types.is_time(target):
        return True
    return bool(pa.types.is_date64(source) and pa.types.is_date32(target))


def _first_changed(column: pa.ChunkedArray | pa.Array, target: pa.DataType) -> tuple[int, Any]:
    """The first row whose value Arrow's safe cast to ``target`` refuses (the whole cast failed)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    low, high = 0, len(array)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            array.slice(low, middle - low).cast(target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            high = middle
        else:
            low = middle
    return low, array[low].as_py()


def _first_null(column: pa.ChunkedArray | pa.Array) -> int:
    mask = pc.is_null(column)
    return int(pc.index(mask, True).as_py())


def conform_column(
    column: pa.ChunkedArray | pa.Array, target: pa.Field, schema: WriteSchema, source: str, first_row: int = 1
) -> pa.ChunkedArray | pa.Array:
    """One typed input column as the table's column, or a typed refusal naming file, column and types."""
    name = target.name
    type_name = schema.type_name(name)
    if not column.type.equals(target.type):
        if not (widens(column.type, target.type) or checked(column.type, target.type)):
            raise RegisterError(
                source,
                f"column {name!r} is {column.type} in the input and {type_name} in the table: it cannot be "
                f"cast to {type_name} without changing or guessing values (convert it first)",
            )
        try:
            column = column.cast(target.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            index, value = _first_changed(column, target.type)
            raise SourceValueError(
                source,
                first_row + index,
                name,
                f"{value!r} ({column.type}) cannot be cast to {type_name} unchanged: {str(exc).splitlines()[0]}",
            ) from None
    if not target.nullable and column.null_count:
        raise SourceValueError(
            source,
            first_row + _first_null(column),
            name,
            f"NOT NULL column {name!r} has {column.null_count} nulls",
        )
    return column


def conform_table(
    data: pa.Table | pa.RecordBatch, schema: WriteSchema, source: str = "input", first_row: int = 1
) -> pa.Table:
    """Select, order and convert typed input columns to ``schema``; missing nullable columns become nulls.

    Args:
        data: the input rows (a Parquet file's table, an Arrow table given to a write, a parsed text batch).
        schema: the table's columns (:class:`WriteSchema`).
        source: the input's name for errors (a path).
        first_row: the number of ``data``'s first row in its file, for errors.

    Returns:
        A table of exactly ``schema.arrow``.

    Example:
        >>> conform_table(pa.table({"id": pa.array([1], pa.int32())}), schema)  # doctest: +SKIP
    """
    check_columns(list(data.schema.names), schema, source)
    arrays = []
    for target in schema.arrow:
        if target.name not in data.schema.names:
            arrays.append(pa.nulls(data.num_rows, target.type))
            continue
        arrays.append(conform_column(data.column(target.name), target, schema, source, first_row))
    return pa.Table.from_arrays(arrays, schema=schema.arrow)
