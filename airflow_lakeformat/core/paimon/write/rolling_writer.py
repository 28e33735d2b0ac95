"""Streaming rows into new data files, batch by batch (Spark tasks, data compaction)."""

from __future__ import annotations

import contextlib
import posixpath
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.paimon.arrow_types import arrow_schema
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_file_meta import data_file_meta_from_parquet
from airflow_lakeformat.core.paimon.write.layout import table_layout
from airflow_lakeformat.core.paimon.write.parquet_files import MAX_CHUNK_BYTES, FileNamer, writer_options
from airflow_lakeformat.core.paimon.write.rows import conform_rows, split_rows


@dataclass
class _OpenFile:
    relative_path: str
    sink: Any
    writer: pq.ParquetWriter


class RollingFileWriter:
    """Streams rows into new data files of a table, per partition and bucket, rolling at the target size.

    The counterpart of :func:`.data_files.write_data_files` for writers that see their rows in batches (a Spark
    task, a compaction rewrite): one open Parquet file per partition and bucket, rows buffered into
    row groups of about a quarter of the target size as :func:`write_data_files` cuts them, and a file
    closed once it reaches ``target-file-size``. Memory stays bounded by the buffered row groups.

    It reads nothing of the table's state: sequence numbers count from 0 per partition and bucket in
    write order, and the caller renumbers them (:func:`.live_state.next_sequence_numbers`). It deletes nothing:
    every file is listed in ``written`` the moment it is created, so the files of a failed write can
    be accounted for (they stay orphans until orphan cleanup removes them).

    ``into`` names the one partition (its exact serialized bytes, which are never re-encoded) and
    bucket every row belongs to, for rewrites of existing files; otherwise rows are split as
    :func:`write_data_files` splits them.
    """

    def __init__(
        self,
        table: Table,
        *,
        target_file_size: int | None = None,
        file_source: FileSource = FileSource.APPEND,
        into: tuple[bytes, int] | None = None,
        total_buckets: int | None = None,
        max_buffer_bytes: int = 256 << 20,
    ) -> None:
        self.table = table
        self.layout = table_layout(table)
        schema = self.layout.schema
        self.target_file_size = target_file_size or schema.table_options.target_file_size
        self.chunk_bytes = max(1, min(self.target_file_size // 4, MAX_CHUNK_BYTES))
        self.max_buffer_bytes = max_buffer_bytes
        self.file_source = file_source
        self.into = into
        self.total_buckets = self.layout.total_buckets if total_buckets is None else total_buckets
        self.written: list[str] = []
        self.entries: list[ManifestEntry] = []
        self._options = writer_options(schema)
        self._schema = arrow_schema(schema)
        self._namer = FileNamer(schema.table_options.get("data-file.prefix") or "data-")
        self._buffers: dict[tuple[bytes, int], list[pa.Table]] = {}
        self._buffered: dict[tuple[bytes, int], int] = {}
        self._files: dict[tuple[bytes, int], _OpenFile] = {}
        self._next_sequence: dict[tuple[bytes, int], int] = {}

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Cast rows to the table's types (refusing what does not fit) and buffer or write them."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        data = conform_rows(data, self.layout.schema)
        if data.num_rows == 0:
            return
        groups = {self.into: None} if self.into is not None else split_rows(data, self.layout)
        for key, indices in groups.items():
            part = data if indices is None else data.take(indices)
            self._buffers.setdefault(key, []).append(part)
            self._buffered[key] = self._buffered.get(key, 0) + part.nbytes
            if self._buffered[key] >= self.chunk_bytes:
                self._flush(key)
        if sum(self._buffered.values()) > self.max_buffer_bytes:
            # Many partitions at once: smaller row groups rather than unbounded memory.
            for key in list(self._buffers):
                self._flush(key)

    def close(self) -> list[ManifestEntry]:
        """Write what is buffered, close every file and return the ADD entries of all files written."""
        for key in list(self._buffers):
            self._flush(key)
        for key in list(self._files):
            self._close_file(key)
        return self.entries

    def abort(self) -> None:
        """Close open files without describing them; they stay on storage, listed in ``written``."""
        self._buffers.clear()
        self._buffered.clear()
        for handle in self._files.values():
            for closer in (handle.writer.close, handle.sink.close):
                with contextlib.suppress(Exception):
                    closer()
        self._files.clear()

    def _flush(self, key: tuple[bytes, int]) -> None:
        parts = self._buffers.pop(key, [])
        self._buffered.pop(key, None)
        if not parts:
            return
        chunk = pa.concat_tables(parts)
        handle = self._files.get(key) or self._open_file(key)
        handle.writer.write_table(chunk, row_group_size=chunk.num_rows)
        if handle.sink.tell() >= self.target_file_size:
            self._close_file(key)

    def _open_file(self, key: tuple[bytes, int]) -> _OpenFile:
        io = self.table.io
        directory = self.layout.paths.bucket_directory(*key)
        rel = posixpath.join(directory, self._namer.next())
        full = io.join(self.table.root, rel)
        if io.is_local:
            io.fs.makedirs(io.join(self.table.root, directory), exist_ok=True)
        self.written.append(full)
        sink = io.fs.open(full, "wb")
        try:
            writer = pq.ParquetWriter(sink, self._schema, **self._options)
        except BaseException:
            sink.close()
            raise
        handle = _OpenFile(rel, sink, writer)
        self._files[key] = handle
        return handle

    def _close_file(self, key: tuple[bytes, int]) -> None:
        handle = self._files.pop(key)
        handle.writer.close()
        handle.sink.close()
        start = self._next_sequence.get(key, 0)
        meta = data_file_meta_from_parquet(
            self.table, handle.relative_path, min_sequence_number=start, file_source=self.file_source
        )
        self._next_sequence[key] = meta.max_sequence_number + 1
        partition, bucket = key
        self.entries.append(ManifestEntry.create(FileKind.ADD, partition, bucket, self.total_buckets, meta))
