"""Writing Arrow data as new data files of a table, all rows at once (the CLI's ``write``, the write operator)."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_file_meta import data_file_meta_from_parquet
from airflow_lakeformat.core.paimon.write.layout import table_layout
from airflow_lakeformat.core.paimon.write.live_state import LiveState, check_total_buckets, read_live_state
from airflow_lakeformat.core.paimon.write.parquet_files import MAX_CHUNK_BYTES, FileNamer, writer_options
from airflow_lakeformat.core.paimon.write.rows import conform_rows, group_rows


def _write_rolling(
    table: Table,
    directory: str,
    data: pa.Table,
    namer: FileNamer,
    target_size: int,
    options: Mapping[str, Any],
    written: list[str],
) -> list[str]:
    """Write ``data`` into ``directory`` as files of about ``target_size`` bytes; return relative paths."""
    io = table.io
    per_row = max(1, data.nbytes // max(1, data.num_rows))
    chunk_bytes = max(1, min(target_size // 4, MAX_CHUNK_BYTES))
    chunk_rows = max(1, min(data.num_rows, chunk_bytes // per_row))
    if io.is_local:
        io.fs.makedirs(io.join(table.root, directory), exist_ok=True)
    out: list[str] = []
    offset = 0
    while offset < data.num_rows:
        rel = posixpath.join(directory, namer.next())
        full = io.join(table.root, rel)
        written.append(full)
        out.append(rel)
        with io.fs.open(full, "wb") as sink, pq.ParquetWriter(sink, data.schema, **options) as writer:
            while offset < data.num_rows:
                chunk = data.slice(offset, chunk_rows)
                writer.write_table(chunk, row_group_size=chunk.num_rows)
                offset += chunk.num_rows
                if sink.tell() >= target_size:
                    break
    return out


def write_data_files(
    table: Table, arrow_table: pa.Table, *, target_file_size: int | None = None
) -> list[ManifestEntry]:
    """Write rows as Parquet data files in the table's layout; return their ADD entries (uncommitted).

    Rows are split by partition (and, for fixed-bucket tables, by the bucket of their bucket key),
    cast to the table's types and written as ``<data-file.prefix><uuid>-<n>.parquet``, rolling at
    ``target-file-size``. On failure the files written so far are deleted; nothing is committed.
    """
    layout = table_layout(table)
    schema = layout.schema
    data = conform_rows(arrow_table, schema)
    if data.num_rows == 0:
        return []
    target = target_file_size or schema.table_options.target_file_size
    options = writer_options(schema)
    namer = FileNamer(schema.table_options.get("data-file.prefix") or "data-")
    groups = group_rows(data, layout)
    state = read_live_state(table, {p for p, _ in groups}) if layout.fixed else LiveState()
    written: list[str] = []
    entries: list[ManifestEntry] = []
    try:
        for (partition, bucket), indices in groups.items():
            where = table.io.uri(table.io.join(table.root, layout.paths.bucket_directory(partition, bucket)))
            check_total_buckets(layout, state, partition, where)
            part = data if indices is None else data.take(pa.array(indices, pa.int64()))
            directory = layout.paths.bucket_directory(partition, bucket)
            sequence = state.max_sequence.get((partition, bucket), -1) + 1 if layout.fixed else 0
            for rel in _write_rolling(table, directory, part, namer, target, options, written):
                meta = data_file_meta_from_parquet(table, rel, min_sequence_number=sequence)
                sequence = meta.max_sequence_number + 1
                entries.append(
                    ManifestEntry.create(FileKind.ADD, partition, bucket, layout.total_buckets, meta)
                )
    except BaseException:
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        discard_unpublished(table.io, written, "data-file")
        raise
    return entries
