"""Input files (Parquet, CSV, JSON lines) read **with the table's schema as the column types**, for both formats.

Nothing is inferred: a text format's values are parsed as their column's type (``text.py``, ``csv_text.py``,
``jsonl.py``), a typed format's columns are converted only where no value can change (``conform.py``), and
anything else is a typed error naming the file, the row and the column, raised before a file is written.
The one description of "the table's columns" both formats provide is :class:`WriteSchema` (``schema.py``).

Used by every write path: the CLI's ``write``, the write operator, ``write_data_files``/``append`` given
Arrow data, and the Spark ``write`` job's tasks (:func:`iter_source_batches`, bounded memory).

Example:
    >>> from airflow_lakeformat.core.tables import open_table
    >>> table = open_table("/warehouse/db.db/events")
    >>> rows = read_source("landing/day.csv", table.write_schema())  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.sources.conform import conform_table, widens
from airflow_lakeformat.core.sources.schema import SourceValueError, WriteSchema

SourceFormat = Literal["parquet", "csv", "json"]
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "json": (".jsonl", ".json", ".ndjson"),
}

__all__ = [
    "EXTENSIONS",
    "SourceFormat",
    "SourceValueError",
    "WriteSchema",
    "conform_table",
    "iter_source_batches",
    "read_source",
    "source_format",
    "widens",
]


def source_format(path: str) -> SourceFormat:
    """The input format a file name says (``.parquet``, ``.csv``, ``.jsonl``/``.json``/``.ndjson``)."""
    lower = path.lower()
    for name, endings in EXTENSIONS.items():
        if lower.endswith(endings):
            return name  # type: ignore[return-value]
    raise RegisterError(path, "unsupported source format (use .parquet, .csv or .jsonl)")


def read_source(path: str, schema: WriteSchema, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Read one input file as a table of exactly ``schema.arrow``.

    Args:
        path: a local path or any fsspec URL; the format comes from the name (:func:`source_format`).
        schema: the table's columns (``table.write_schema()`` of the facade).
        storage_options: fsspec options for the file's store.

    Returns:
        The rows, every column of the table's type (missing nullable columns are NULL).

    Raises:
        SourceValueError: a value that does not fit its column (file, row, column, value); nothing is written.
        RegisterError: unknown, duplicate or missing NOT NULL columns, a Parquet type that could change
            values if converted, an unsupported or unreadable file.

    Example:
        >>> read_source("s3://landing/day.jsonl", schema, {"anon": False})  # doctest: +SKIP
    """
    kind = source_format(path)
    if kind != "csv":
        batches = list(iter_source_batches(path, schema, storage_options, kind))
        if not batches:
            return schema.arrow.empty_table()
        return pa.concat_tables(batches)
    from airflow_lakeformat.core.sources.csv_text import read_csv_table

    with fsspec.open(path, "rb", **dict(storage_options or {})) as handle:
        return read_csv_table(handle, schema, path)


def _parquet_batches(
    handle: Any, schema: WriteSchema, source: str, row_groups: Sequence[int] | None
) -> Iterator[pa.Table]:
    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowInvalid, OSError) as exc:
        raise RegisterError(source, f"not a readable Parquet file: {exc}") from None
    first_row = 1
    groups = range(parquet.num_row_groups) if row_groups is None else row_groups
    for index in groups:
        group = parquet.read_row_group(index)
        yield conform_table(group, schema, source, first_row)
        first_row += group.num_rows


def iter_source_batches(
    path: str,
    schema: WriteSchema,
    storage_options: Mapping[str, Any] | None = None,
    kind: SourceFormat | None = None,
    row_groups: Sequence[int] | None = None,
) -> Iterator[pa.Table]:
    """The rows of one input file as tables of ``schema.arrow``, a row group or block at a time.

    Args:
        path: a local path or fsspec URL.
        schema: the table's columns.
        storage_options: fsspec options.
        kind: the input format (default: from the file name).
        row_groups: Parquet only: read just these row groups.

    Raises:
        SourceValueError, RegisterError: as :func:`read_source`, when the offending batch is reached.
    """
    kind = kind or source_format(path)
    local = "://" not in path or path.startswith("file://")
    if kind == "parquet" and local:  # a native read, no Python file object in between
        yield from _parquet_batches(path.removeprefix("file://"), schema, path, row_groups)
        return
    with fsspec.open(path, "rb", **dict(storage_options or {})) as handle:
        if kind == "parquet":
            yield from _parquet_batches(handle, schema, path, row_groups)
        elif kind == "csv":
            from airflow_lakeformat.core.sources.csv_text import read_csv_batches

            yield from read_csv_batches(handle, schema, path)
        else:
            from airflow_lakeformat.core.sources.jsonl import read_jsonl_batches

            yield from read_jsonl_batches(handle, schema, path)
