"""Arrow rows made ready for a table: cast to its types, then grouped by partition and bucket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.arrow_types import arrow_schema, internal_values
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.write.bucketing import row_buckets
from airflow_lakeformat.core.paimon.write.layout import Layout


def conform_rows(data: pa.Table, schema: TableSchema) -> pa.Table:
    """Select, order and cast the input's columns to the table's Arrow types; refuse what does not fit."""
    target = arrow_schema(schema)
    names = [f.name for f in schema.fields]
    extra = [n for n in data.column_names if n not in set(names)]
    if extra:
        raise RegisterError("input", f"columns {extra} are not in the table (columns: {names})")
    if len(set(data.column_names)) != len(data.column_names):
        raise RegisterError("input", "duplicate column names")
    arrays = []
    for f, af in zip(schema.fields, target, strict=True):
        if f.name not in data.column_names:
            if not f.type.nullable:
                raise RegisterError("input", f"NOT NULL column {f.name!r} is missing")
            arrays.append(pa.nulls(data.num_rows, af.type))
            continue
        column = data.column(f.name)
        try:
            column = column if column.type == af.type else column.cast(af.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise RegisterError(
                "input", f"column {f.name!r} ({column.type}) cannot be cast to {f.type.sql()}: {exc}"
            ) from exc
        if not f.type.nullable and column.null_count:
            raise RegisterError("input", f"NOT NULL column {f.name!r} has {column.null_count} nulls")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=target)


def group_rows(data: pa.Table, layout: Layout) -> dict[tuple[bytes, int], list[int] | None]:
    """Row indices per (partition, bucket); None means every row."""
    schema = layout.schema
    keys = schema.partition_keys
    types = list(schema.partition_types)
    if not keys and not layout.fixed:
        return {(binary_row.encode([], []), 0): None}
    if keys:
        columns = [internal_values(data.column(k), t) for k, t in zip(keys, types, strict=True)]
        encoded: dict[tuple[Any, ...], bytes] = {}
        partitions = []
        for row in zip(*columns, strict=True):
            value = encoded.get(row)
            if value is None:
                value = binary_row.encode(list(row), types)
                encoded[row] = value
            partitions.append(value)
    else:
        partitions = [binary_row.encode([], [])] * data.num_rows
    buckets = (
        row_buckets(data, layout.bucket_keys, layout.bucket_key_types, layout.bucket)
        if layout.fixed
        else [0] * data.num_rows
    )
    groups: dict[tuple[bytes, int], list[int]] = {}
    for index, key in enumerate(zip(partitions, buckets, strict=True)):
        groups.setdefault(key, []).append(index)
    if len(groups) == 1:
        return {next(iter(groups)): None}
    return dict(groups)


_ROW_NUMBERS: list[pa.Array] = [pa.array([], pa.int64())]


def _row_numbers(count: int) -> pa.Array:
    """``0 .. count - 1`` as an int64 array, sliced from a cached one (building it per batch costs)."""
    cached = _ROW_NUMBERS[0]
    if len(cached) < count:
        cached = _ROW_NUMBERS[0] = pa.array(range(max(count, 2 * len(cached))), pa.int64())
    return cached.slice(0, count)


def split_rows(data: pa.Table, layout: Layout) -> Mapping[tuple[bytes, int], Any]:
    """Row indices per (partition, bucket), as :func:`group_rows` computes them; None means every row.

    Unaware-bucket tables group by the partition columns in Arrow (a hash aggregation), which keeps
    the per-row work out of Python; each distinct partition is encoded once, from the same internal
    values, so its bytes are the ones :func:`group_rows` would produce.
    """
    keys = layout.schema.partition_keys
    if layout.fixed or not keys:
        return group_rows(data, layout)
    grouped = (
        data.select(list(keys))
        .append_column("__row", _row_numbers(data.num_rows))
        .group_by(list(keys), use_threads=False)
        .aggregate([("__row", "list")])
    )
    types = list(layout.schema.partition_types)
    columns = [internal_values(grouped.column(k), t) for k, t in zip(keys, types, strict=True)]
    rows = grouped.column("__row_list")
    if grouped.num_rows == 1:
        return {(binary_row.encode([c[0] for c in columns], types), 0): None}
    return {
        (binary_row.encode([c[i] for c in columns], types), 0): rows[i].values
        for i in range(grouped.num_rows)
    }
