"""The ``DataFileMeta`` Paimon's append writer would record for a Parquet file, read from its footer.

The footer is checked column by column against the table's schema (:mod:`.parquet_columns`), the
value statistics are the ones :mod:`.value_stats` can vouch for, and the sequence numbers are
``[min_sequence_number, min + rows - 1]`` of the counter the caller passes (:mod:`.live_state` says
where a writer's counter starts).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileSource, SimpleStats
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import DataField
from airflow_lakeformat.core.paimon.write.layout import check_data_file_name, table_relative_path
from airflow_lakeformat.core.paimon.write.parquet_columns import (
    NESTED_ROOTS,
    arrow_type_compatible,
    leaf_count,
    parquet_column_problem,
)
from airflow_lakeformat.core.paimon.write.value_stats import column_stats, dense_value_stats, zero_nulls


@dataclass(frozen=True)
class _FileFacts:
    row_count: int
    value_stats: SimpleStats
    value_stats_cols: list[str] | None


def _inspect(pf: Any, schema: TableSchema, where: str) -> _FileFacts:
    """Check a Parquet footer against the schema and compute the file's value statistics."""
    meta = pf.metadata
    pschema = pf.schema
    file_arrow = pschema.to_arrow_schema()
    # Map top-level Arrow fields to their leaf columns by position (names may contain dots).
    leaves: dict[str, tuple[int, int]] = {}
    position = 0
    for name, ftype in zip(file_arrow.names, file_arrow.types, strict=True):
        if name in leaves:
            raise RegisterError(where, f"column {name!r} appears twice")
        count = leaf_count(ftype)
        leaves[name] = (position, count)
        position += count
    table_names = [f.name for f in schema.fields]
    extra = [n for n in file_arrow.names if n not in set(table_names)]
    if extra:
        raise RegisterError(
            where, f"columns {extra} are not in the table's schema {schema.id} (columns: {table_names})"
        )
    row_groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    rows = int(meta.num_rows)
    if sum(int(rg.num_rows) for rg in row_groups) != rows:
        raise RegisterError(where, "row groups do not add up to the footer's row count")

    included: list[DataField] = []
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[int | None] = []
    for f in schema.fields:
        dtype = f.type
        if f.name not in leaves:
            if not dtype.nullable:
                raise RegisterError(where, f"NOT NULL column {f.name!r} is missing from the file")
            # Paimon's reader fills a missing column with nulls: these statistics are exact.
            included.append(f)
            mins.append(None)
            maxs.append(None)
            nulls.append(rows)
            continue
        first, count = leaves[f.name]
        file_field = file_arrow.field(f.name)
        primitive = count == 1 and not pa.types.is_nested(file_field.type)
        if dtype.root in NESTED_ROOTS:
            if not arrow_type_compatible(file_field.type, dtype):
                raise RegisterError(
                    where, f"column {f.name!r} of type {file_field.type} cannot be read as {dtype.sql()}"
                )
            primitive = False
        elif not primitive:
            raise RegisterError(
                where, f"column {f.name!r} is nested in the file but {dtype.sql()} in the table"
            )
        else:
            problem = parquet_column_problem(dtype, pschema.column(first))
            if problem is not None:
                raise RegisterError(where, f"column {f.name!r}: {problem}")
        if not dtype.nullable:
            if primitive:
                maybe_null = pschema.column(first).max_definition_level > 0 and not zero_nulls(
                    row_groups, first
                )
            else:
                maybe_null = file_field.nullable
            if maybe_null:
                raise RegisterError(where, f"NOT NULL column {f.name!r} may hold nulls in the file")
        stats = column_stats(row_groups, first, pschema.column(first), dtype) if primitive else None
        if stats is None:
            continue
        included.append(f)
        mins.append(stats[0])
        maxs.append(stats[1])
        nulls.append(stats[2])

    value_stats, cols = dense_value_stats(schema, included, mins, maxs, nulls, where)
    return _FileFacts(rows, value_stats, cols)


def data_file_meta_from_parquet(
    table: Table,
    relative_or_full_path: str,
    *,
    schema_id: int | None = None,
    file_source: FileSource = FileSource.APPEND,
    creation_time: datetime | None = None,
    min_sequence_number: int = 0,
) -> DataFileMeta:
    """The ``DataFileMeta`` Paimon's append writer would record for this Parquet file.

    Reads only the footer. Sequence numbers are ``[min_sequence_number, min + rows - 1]`` (see
    :mod:`.live_state`); the creation time defaults to local wall-clock time, which Paimon stores as if UTC.
    """
    schema = (
        table.schema if schema_id is None or schema_id == table.schema.id else table.schema_by_id(schema_id)
    )
    rel = table_relative_path(table, relative_or_full_path)
    full = table.io.join(table.root, rel)
    where = table.io.uri(full)
    name = posixpath.basename(rel)
    check_data_file_name(name, where)
    try:
        size = table.io.size(full)
        with table.io.fs.open(full, "rb") as handle:
            facts = _inspect(pq.ParquetFile(handle), schema, where)
    except FileNotFoundError as exc:
        raise RegisterError(where, "file does not exist") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise RegisterError(where, f"not a readable Parquet file ({exc})") from exc
    if facts.row_count == 0:
        raise RegisterError(where, "the file has no rows (Paimon never writes empty data files)")
    return DataFileMeta.create(
        name,
        size,
        facts.row_count,
        value_stats=facts.value_stats,
        min_sequence_number=min_sequence_number,
        max_sequence_number=min_sequence_number + facts.row_count - 1,
        schema_id=schema.id,
        level=0,
        extra_files=[],
        creation_time=_wall_clock_as_utc(creation_time or datetime.now()),
        delete_row_count=0,
        file_source=file_source,
        value_stats_cols=facts.value_stats_cols,
    )


def _wall_clock_as_utc(value: datetime) -> datetime:
    """Paimon's ``_CREATION_TIME`` convention: local wall-clock time stored as if it were UTC.

    fastavro converts a *naive* datetime from the local zone, so label the wall-clock reading UTC.
    """
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
