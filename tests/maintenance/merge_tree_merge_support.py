"""Hand-made KV tables for the merge-engine tests (``test_merge_tree_merge*.py``): no files, no table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.paimon.merge_tree.kv_schema import (
    KEY_PREFIX,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    kv_arrow_schema,
)
from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec
from airflow_lakeformat.core.paimon.schema import TableSchema

INS, UB, UA, D = 0, 1, 2, 3


def make_schema(
    fields: Mapping[str, str],
    keys: Iterable[str] = ("k",),
    partitions: Iterable[str] = (),
    options: Mapping[str, str] | None = None,
) -> TableSchema:
    """A schema of ``fields`` (name -> Paimon type) with primary key ``keys`` and table ``options``."""
    opts = dict(options or {})
    return TableSchema.from_json(
        {
            "id": 0,
            "fields": [{"id": i, "name": n, "type": t} for i, (n, t) in enumerate(fields.items())],
            "partitionKeys": list(partitions),
            "primaryKeys": list(keys),
            "options": opts,
        }
    )


def kv_table(schema: TableSchema, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """A KV table of ``rows``: each a dict of field values plus ``seq`` and ``kind`` (default +I)."""
    rows = list(rows)
    arrow = kv_arrow_schema(schema)
    columns: dict[str, list[Any]] = {}
    for field in arrow:
        if field.name.startswith(KEY_PREFIX):
            columns[field.name] = [r[field.name[len(KEY_PREFIX) :]] for r in rows]
        elif field.name == SEQUENCE_NUMBER:
            columns[field.name] = [r["seq"] for r in rows]
        elif field.name == VALUE_KIND:
            columns[field.name] = [r.get("kind", INS) for r in rows]
        else:
            columns[field.name] = [r.get(field.name) for r in rows]
    return pa.table(columns, schema=arrow)


def merged(
    schema: TableSchema, rows: Iterable[Mapping[str, Any]], *, drop: bool = False
) -> list[dict[str, Any]]:
    """merge_kv of ``rows`` as dicts: field values plus ``seq`` and ``kind`` (no ``_KEY_*`` columns, after
    checking they equal their value columns)."""
    out = merge_kv(kv_table(schema, rows), MergeSpec.from_schema(schema, "t"), drop_deletes=drop)
    result = []
    for row in out.to_pylist():
        for name in schema.trimmed_primary_keys:
            key, value = row.pop(KEY_PREFIX + name), row[name]
            assert key == value or (key != key and value != value)  # NaN keys are NaN values
        row["seq"] = row.pop(SEQUENCE_NUMBER)
        row["kind"] = row.pop(VALUE_KIND)
        result.append(row)
    return result
