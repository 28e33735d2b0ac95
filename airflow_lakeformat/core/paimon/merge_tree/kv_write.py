"""Writing merged KV rows as new data files of one bucket (Java: ``KeyValueDataFileWriter``,
``KeyValueFileWriterFactory``, ``RollingFileWriterImpl``).

* **Input**: KV tables (``kv_schema``), merged, sorted by key in Java's order, each key once (checked where
  chunks meet: a chunk starting at or below the previous chunk's last key raises ValueError). They are
  streamed into one rolling writer: a file is closed once its size reaches ``target_file_size``, checked
  after every chunk (a Parquet row group of about a quarter of the target in memory, at most
  ``MAX_CHUNK_BYTES``) where Java checks every 1000 records; the overshoot is at most one chunk.
* **Layout**: ``kv_arrow_schema`` with Java's Parquet field ids; without the ``_KEY_*`` columns when the
  table sets ``data-file.thin-mode`` (every key field is a value field in a primary-key table, so thin mode
  always applies, ``KeyValueFileWriterFactory#supportsThinMode``). Compression from ``file.compression``
  or ``file.compression.per.level``. A format other than Parquet at the output level (``file.format``,
  ``file.format.per.level``) is refused typed.
* **DataFileMeta** per file, as ``KeyValueDataFileWriter#result`` builds it: a new name
  ``<data-file.prefix><uuid>-<n>.parquet``; the output level; min/max key = the first and last key written,
  serialized as Java's ``BinaryRow``; min/max sequence number and ``deleteRowCount`` (rows of kind -U or -D,
  never null) over the rows written; exact size and row count; ``fileSource`` COMPACT (APPEND when a
  writer's level-0 files are written, ``file_source``); the schema id of
  ``schema``; creation time as local wall-clock time stored as if UTC; no extra files, index or external path.
* **Key statistics** cover every ``_KEY_*`` field (all mode, no column left out). Min and max are exact
  (Java truncates key strings at 128 characters; exact bounds are narrower and still true), computed from
  the rows; FLOAT/DOUBLE keys get null min/max (unknown: readers do not prune on them) because NaN and -0.0
  order differently in Arrow and Java.
* **Value statistics** as the append writer records them (``write/value_stats.py``: from the Parquet footer,
  only columns whose Parquet order is Paimon's order), shaped by the stats mode Java would use for the
  column: ``fields.<name>.stats-mode``, else ``none`` beyond ``metadata.stats-keep-first-n-columns``, else
  ``metadata.stats-mode.per.level`` for the output level, else ``metadata.stats-mode`` (default
  ``truncate(16)``). ``none`` leaves the column out; ``counts`` keeps only its null count; ``truncate(n)``
  cuts string and binary bounds as ``TruncateSimpleColStatsCollector`` does; ``full`` keeps them. Dense
  (``_VALUE_STATS_COLS`` names the columns) unless ``metadata.stats-dense-store`` is false.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.arrow_types import internal_values
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileSource
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import (
    RETRACT_KINDS,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    key_column,
    kv_arrow_schema,
)
from airflow_lakeformat.core.paimon.merge_tree.kv_stats import file_value_stats, key_stats_row
from airflow_lakeformat.core.paimon.merge_tree.levels import key_order
from airflow_lakeformat.core.paimon.options import TableOptions, parse_bool
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.parquet_files import MAX_CHUNK_BYTES, FileNamer, writer_options

_COMPRESSIONS = {"zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"}


def per_level(options: TableOptions, key: str) -> dict[int, str]:
    """A ``<level>:<value>,...`` option (``file.format.per.level`` and the like) as a dict."""
    raw = options.get(key)
    out: dict[int, str] = {}
    for item in (raw or "").split(","):
        if not item.strip():
            continue
        level, sep, value = item.partition(":")
        if not sep or not level.strip().isdigit():
            raise UnsupportedFormatError(key, f"cannot parse {raw!r} as '<level>:<value>,...'")
        out[int(level)] = value.strip().lower()
    return out


def level_format(schema: TableSchema, level: int) -> str:
    """The file format Java writes at ``level``: ``file.format.per.level``, else ``file.format``."""
    options = schema.table_options
    return per_level(options, "file.format.per.level").get(level, options.file_format)


def level_writer_options(schema: TableSchema, level: int) -> dict[str, Any]:
    """``pq.ParquetWriter`` options at ``level`` (``file.compression.per.level`` overrides ``file.compression``)."""
    out = writer_options(schema)
    compression = per_level(schema.table_options, "file.compression.per.level").get(level)
    if compression is not None:
        if compression not in _COMPRESSIONS:
            raise UnsupportedFormatError(compression, "file.compression.per.level names an unknown codec")
        out["compression"] = "none" if compression == "uncompressed" else compression
        if compression != "zstd":
            out.pop("compression_level", None)
        else:
            out.setdefault("compression_level", 1)
    return out


def thin_mode(schema: TableSchema) -> bool:
    """Whether files leave out the ``_KEY_*`` columns (``data-file.thin-mode``)."""
    return parse_bool(schema.table_options.get("data-file.thin-mode") or "false")


@dataclass
class _FileState:
    """What is known of the file being written, updated per chunk."""

    relative_path: str
    full_path: str
    sink: Any
    writer: pq.ParquetWriter
    rows: int = 0
    first_key: list[Any] | None = None
    last_key: list[Any] | None = None
    min_seq: int | None = None
    max_seq: int | None = None
    deletes: int = 0
    key_bounds: list[tuple[Any, Any, int]] = field(default_factory=list)
    value_nulls: list[int] = field(default_factory=list)


class _KvWriter:
    """One rolling writer into one bucket directory; :func:`write_kv` drives it."""

    def __init__(
        self,
        table: Table,
        schema: TableSchema,
        directory: str,
        level: int,
        target: int,
        file_source: FileSource = FileSource.COMPACT,
    ) -> None:
        self.table = table
        self.file_source = file_source
        self.schema = schema
        self.directory = directory
        self.level = level
        self.target = target
        self.thin = thin_mode(schema)
        self.file_schema = kv_arrow_schema(schema, thin=self.thin)
        self.full_schema = kv_arrow_schema(schema)
        self.options = level_writer_options(schema, level)
        self.namer = FileNamer(schema.table_options.get("data-file.prefix") or "data-")
        self.key_names = [key_column(k) for k in schema.trimmed_primary_keys]
        self.key_types = [schema.field(k).type for k in schema.trimmed_primary_keys]
        self.written: list[str] = []
        self.metas: list[DataFileMeta] = []
        self.current: _FileState | None = None
        self.order = key_order(self.key_types)
        self.previous_key: bytes | None = None

    def write(self, kv: pa.Table) -> None:
        if kv.num_rows == 0:
            return
        kv = _conform(kv, self.full_schema)
        per_row = max(1, kv.nbytes // kv.num_rows)
        chunk_rows = max(1, min(self.target // 4, MAX_CHUNK_BYTES) // per_row)
        offset = 0
        while offset < kv.num_rows:
            chunk = kv.slice(offset, chunk_rows)
            offset += chunk.num_rows
            state = self.current or self._open()
            self._observe(state, chunk)
            body = chunk.select(self.file_schema.names) if self.thin else chunk
            state.writer.write_table(pa.Table.from_arrays(body.columns, schema=self.file_schema))
            if state.sink.tell() >= self.target:
                self._close()

    def finish(self) -> list[DataFileMeta]:
        if self.current is not None:
            self._close()
        return self.metas

    def abort(self) -> None:
        state, self.current = self.current, None
        if state is not None:
            for closer in (state.writer.close, state.sink.close):
                with contextlib.suppress(Exception):
                    closer()

    def _open(self) -> _FileState:
        io = self.table.io
        rel = posixpath.join(self.directory, self.namer.next())
        full = io.join(self.table.root, rel)
        if io.is_local:
            io.fs.makedirs(io.join(self.table.root, self.directory), exist_ok=True)
        self.written.append(full)
        sink = io.fs.open(full, "wb")
        try:
            writer = pq.ParquetWriter(sink, self.file_schema, **self.options)
        except BaseException:
            sink.close()
            raise
        self.current = _FileState(rel, full, sink, writer, value_nulls=[0] * len(self.schema.fields))
        return self.current

    def _observe(self, state: _FileState, chunk: pa.Table) -> None:
        keys = [chunk.column(n) for n in self.key_names]
        first = [internal_values(c.slice(0, 1), t)[0] for c, t in zip(keys, self.key_types, strict=True)]
        self._check_order(first)
        if state.first_key is None:
            state.first_key = first
        last = chunk.num_rows - 1
        state.last_key = [
            internal_values(c.slice(last, 1), t)[0] for c, t in zip(keys, self.key_types, strict=True)
        ]
        self.previous_key = binary_row.encode(state.last_key, self.key_types)
        low, high = pc.min_max(chunk.column(SEQUENCE_NUMBER)).values()
        state.min_seq = low.as_py() if state.min_seq is None else min(state.min_seq, low.as_py())
        state.max_seq = high.as_py() if state.max_seq is None else max(state.max_seq, high.as_py())
        retract = pc.is_in(chunk.column(VALUE_KIND), value_set=pa.array(RETRACT_KINDS, pa.int8()))
        state.deletes += int(pc.sum(retract).as_py() or 0)
        state.rows += chunk.num_rows
        state.key_bounds = _merge_bounds(state.key_bounds, keys, self.key_types)
        offset = len(self.full_schema) - len(self.schema.fields)
        for i in range(len(self.schema.fields)):
            state.value_nulls[i] += chunk.column(offset + i).null_count

    def _check_order(self, first: list[Any]) -> None:
        """Refuse input whose chunks do not follow each other in key order (a caller's bug, caught cheaply)."""
        if self.previous_key is None:
            return
        start = binary_row.encode(first, self.key_types)
        if not self.order(start) > self.order(self.previous_key):
            raise ValueError(
                f"KV input is not sorted by unique key: {first} follows "
                f"{binary_row.decode(self.previous_key, self.key_types)}; nothing may be committed"
            )

    def _close(self) -> None:
        state, self.current = self.current, None
        assert state is not None and state.first_key is not None and state.last_key is not None
        state.writer.close()
        footer = state.writer.writer.metadata
        state.sink.close()
        size = self.table.io.size(state.full_path)
        value_stats, cols = file_value_stats(
            self.schema,
            self.level,
            footer,
            len(self.file_schema) - len(self.schema.fields),
            state.value_nulls,
        )
        self.metas.append(
            DataFileMeta.create(
                posixpath.basename(state.relative_path),
                size,
                state.rows,
                min_key=binary_row.encode(state.first_key, self.key_types),
                max_key=binary_row.encode(state.last_key, self.key_types),
                key_stats=key_stats_row(state.key_bounds, self.key_types),
                value_stats=value_stats,
                min_sequence_number=int(state.min_seq or 0),
                max_sequence_number=int(state.max_seq or 0),
                schema_id=self.schema.id,
                level=self.level,
                extra_files=[],
                creation_time=datetime.now().replace(tzinfo=timezone.utc),
                delete_row_count=state.deletes,
                file_source=self.file_source,
                value_stats_cols=cols,
            )
        )


def _conform(kv: pa.Table, target: pa.Schema) -> pa.Table:
    """The KV table in ``target``'s column order and types (a cast only where types differ)."""
    if kv.column_names != target.names:
        kv = kv.select(target.names)
    columns = [c if c.type == f.type else c.cast(f.type) for c, f in zip(kv.columns, target, strict=True)]
    return pa.Table.from_arrays(columns, schema=target)


def _merge_bounds(
    bounds: list[tuple[Any, Any, int]], columns: list[pa.ChunkedArray], types: list[Any]
) -> list[tuple[Any, Any, int]]:
    """Per key field (min, max, null count), widened by one chunk's columns (min/max None = unknown)."""
    out = []
    for index, (column, dtype) in enumerate(zip(columns, types, strict=True)):
        nulls = column.null_count
        if dtype.root in ("FLOAT", "DOUBLE") or column.null_count == len(column):
            low = high = None
        else:
            pair = pc.min_max(column)
            low, high = internal_values(
                pa.array([pair["min"].as_py(), pair["max"].as_py()], column.type), dtype
            )
        if index < len(bounds):
            old_low, old_high, old_nulls = bounds[index]
            if dtype.root not in ("FLOAT", "DOUBLE"):
                low = old_low if low is None else low if old_low is None else min(low, old_low)
                high = old_high if high is None else high if old_high is None else max(high, old_high)
            nulls += old_nulls
        out.append((low, high, nulls))
    return out


def write_kv(
    table: Table,
    schema: TableSchema,
    *,
    partition: bytes,
    bucket: int,
    total_buckets: int,
    level: int,
    data: Iterable[pa.Table],
    target_file_size: int,
    written: list[str] | None = None,
    file_source: FileSource = FileSource.COMPACT,
) -> list[DataFileMeta]:
    """Write merged, key-sorted KV tables into new files of one bucket; return their ``DataFileMeta``.

    Nothing is committed and nothing is deleted: the paths of files created are appended to ``written``
    as they appear, also when the write fails (they are then orphans for orphan cleanup).

    Args:
        table: the table.
        schema: the current schema (its layout, options and id).
        partition: the bucket's partition, its exact serialized bytes (never re-encoded).
        bucket: the bucket number.
        total_buckets: the bucket count of the partition (kept for the caller's entries; unused here).
        level: the output level (> 0 for a compaction).
        data: KV tables, merged (one row per key), sorted by key across all tables.
        target_file_size: roll to a new file once a file reaches this many bytes.
        written: a list the paths of created files are appended to.
        file_source: the files' ``_FILE_SOURCE``: COMPACT for a compaction's output (the default), APPEND for
            a writer's level-0 files (``MergeTreeWriter#flushWriteBuffer``).

    Example::

        >>> metas = write_kv(table, table.schema, partition=entry.partition, bucket=0, total_buckets=2,
        ...                  level=5, data=[merged], target_file_size=128 << 20)
    """
    del total_buckets
    if target_file_size <= 0:
        raise ValueError(f"target file size must be positive, not {target_file_size}")
    file_format = level_format(schema, level)
    if file_format != "parquet":
        raise UnsupportedFormatError(
            table.uri, f"writing {file_format} data files at level {level} (only parquet)"
        )
    directory = DataFilePaths(schema).bucket_directory(partition, bucket)
    writer = _KvWriter(table, schema, directory, level, target_file_size, file_source)
    try:
        for kv in data:
            writer.write(kv)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise
    finally:
        if written is not None:
            written.extend(writer.written)
