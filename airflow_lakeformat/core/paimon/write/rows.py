"""Arrow rows made ready for a table: converted to its types (``core/sources``), then grouped by partition and bucket."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.arrow_types import arrow_schema, internal_values
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.write.bucketing import row_buckets
from airflow_lakeformat.core.paimon.write.layout import Layout
from airflow_lakeformat.core.sources import WriteSchema, conform_table


def write_schema(schema: TableSchema) -> WriteSchema:
    """The table's columns as every write must deliver them (Paimon's Parquet layout and type names)."""
    return WriteSchema(arrow_schema(schema), {f.name: f.type.sql() for f in schema.fields})


def conform_rows(data: pa.Table, schema: TableSchema, source: str = "input") -> pa.Table:
    """Select, order and convert the input's columns to the table's Arrow types, only where no value can
    change (``core/sources/conform.py``); refuse what does not fit, typed."""
    return conform_table(data, write_schema(schema), source)


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


# Built on first use: pa.array() of a Python sequence imports pandas (pyarrow checks for pandas types),
# which would cost every process that merely imports this module about 2.5 s.
_ROW_NUMBERS: list[pa.Array | None] = [None]


def _row_numbers(count: int) -> pa.Array:
    """``0 .. count - 1`` as an int64 array, sliced from a cached one (building it per batch costs)."""
    cached = _ROW_NUMBERS[0]
    if cached is None or len(cached) < count:
        size = max(count, 2 * (len(cached) if cached is not None else 0))
        cached = _ROW_NUMBERS[0] = pa.array(range(size), pa.int64())
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
