"""Rewriting one file group of an Iceberg data compaction: read with the deletes applied, write target-size files.

Follows Java's ``SparkBinPackFileRewriteRunner`` (1.10.2) for a group of the current partition spec:

1. **Read** each input file in record batches with the table's **current** schema (columns matched by field id:
   renamed columns followed, added ones null, dropped ones gone, ``int``/``float`` promoted): straight with
   pyarrow, the group's position-delete files read once and each file's deleted positions masked out; a file
   without field ids or with deletion vectors goes through pyiceberg's ``ArrowScan``. Then drop the rows its
   **equality deletes** match (null-safe, on the equality columns resolved by field id). Only live rows come out,
   one input file at a time (a group's rows are never all in memory).
2. **Write** Parquet files with field ids through pyiceberg's Parquet writer (row groups of up to 64 MiB of Arrow
   data gathered from the input batches; a column keeps its dictionary only when its first rows in the file repeat
   values, as parquet-mr falls back to plain encoding when the dictionary does not pay off), rolling to a new
   file once about ``split_size`` bytes of input (on-disk bytes, in proportion to the rows read) went into the
   current one, as Java splits the group's read into ``expectedOutputFiles`` pieces; each output file's partition
   is the group's.
3. **Describe** each output as a ``DataFile`` (statistics from the Parquet footer: counts, null counts, bounds).

With ``strategy=sort`` (Java's ``SparkSortFileRewriteRunner``) the group's live rows go through the external merge
sort of ``data_compaction_sort`` (bounded memory: sorted runs spilled to disk, then merged) and are written in
order, ``ceil(rows / expectedOutputFiles)`` rows per file as Java's range shuffle splits them, so the group's
files follow each other in the sort order; they carry ``sort_order_id`` 0, as Java's rewrite writes them.

A group whose rows are all deleted writes no file. Groups holding files of an older partition spec are
re-partitioned by the current spec's transforms (``data_compaction_repartition``), as Java's default
``output-spec-id`` writes them; the sort strategy on such a group is refused. Nothing here commits: the files are new and unreferenced until the ``replace`` commit names them.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import CompactionCandidate, FileGroup
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_project import GroupProjection
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_sort import (
    UNSORTED_ORDER_ID,
    ExternalSort,
    SortBudget,
)

# Arrow bytes gathered before they go to the Parquet writer as one row group: a file compacted from many small
# inputs gets a few large row groups (as Java's writers, 128 MiB by default), not one per input batch
ROW_GROUP_BUFFER_BYTES = 64 * 1024 * 1024
# a column whose first rows are more than this share distinct values is written without a dictionary (parquet-mr
# falls back to plain encoding when the dictionary does not pay off; pyarrow would dictionary-encode every column)
DICTIONARY_MAX_DISTINCT_RATIO = 0.5
DICTIONARY_SAMPLE_ROWS = 10_000

# pyarrow's decoding threads while reading input files: off in a forked worker (data_compaction_workers), where
# every core already runs a worker and a small file's columns cost more to hand to threads than to decode
ARROW_THREADS: ContextVar[bool] = ContextVar("lakeformat_compaction_arrow_threads", default=True)
# the locations every writer opened in the current group (thread or executor): what a failed group removes
_OPENED: ContextVar[list[str] | None] = ContextVar("lakeformat_compaction_opened", default=None)
# told each location before its file is created (a worker process tells its parent: data_compaction_workers)
_ANNOUNCE: ContextVar[Callable[[str], None] | None] = ContextVar(
    "lakeformat_compaction_announce", default=None
)


@contextmanager
def recording_locations() -> Iterator[list[str]]:
    """Collect every output location the writers of this thread open meanwhile, finished or not (one group)."""
    opened: list[str] = []
    token = _OPENED.set(opened)
    try:
        yield opened
    finally:
        _OPENED.reset(token)


@contextmanager
def announcing_locations(announce: Callable[[str], None]) -> Iterator[None]:
    """Call ``announce(location)`` before each output file the writers of this thread create meanwhile (so that
    whoever waits on this process knows every file it may leave, even when it dies before finishing one)."""
    token = _ANNOUNCE.set(announce)
    try:
        yield
    finally:
        _ANNOUNCE.reset(token)


if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionKey, PartitionSpec
    from pyiceberg.schema import Schema

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable


@dataclass
class RewrittenFiles:
    """What rewriting one group produced: new data files (not yet committed) and the rows they hold."""

    group: FileGroup
    outputs: list[DataFile] = field(default_factory=list)
    # every location written, finished or not: what to discard when the group is not committed
    locations: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_written: int = 0
    runs_spilled: int = 0  # sort strategy: sorted runs written to disk (0: the group was sorted in memory)

    @property
    def rows_deleted(self) -> int:
        return self.rows_read - self.rows_written


class _PartitionPath:
    """What pyiceberg's location provider asks of a partition key: its ``to_path()``."""

    def __init__(self, spec: PartitionSpec, schema: Schema, values: tuple[Any, ...]) -> None:
        from pyiceberg.typedef import Record

        self._path = spec.partition_to_path(Record(*values), schema) if spec.fields else ""

    def to_path(self) -> str:
        return self._path


def equality_delete_keys(
    table: IcebergTable, delete_file: DataFile
) -> tuple[list[str], set[tuple[Any, ...]]]:
    """The current schema's names of an equality delete's columns, and the set of deleted key tuples."""
    schema = table.metadata.schema()
    ids = list(delete_file.equality_ids or [])
    names = [schema.find_column_name(i) for i in ids]
    if any(n is None for n in names):
        raise UnsupportedFormatError(
            delete_file.file_path, f"an equality column (field ids {ids}) is no longer in the table's schema"
        )
    with table.table.io.new_input(delete_file.file_path).open() as stream:
        deletes = pq.read_table(stream)
    by_id = {
        int(f.metadata[b"PARQUET:field_id"]): f.name
        for f in deletes.schema
        if f.metadata and b"PARQUET:field_id" in f.metadata
    }
    columns = [by_id.get(i, name) for i, name in zip(ids, names, strict=True)]
    missing = [c for c in columns if c not in deletes.column_names]
    if missing:
        raise UnsupportedFormatError(delete_file.file_path, f"equality delete file lacks columns {missing}")
    values = zip(*(deletes.column(c).to_pylist() for c in columns), strict=True)
    return cast("list[str]", names), set(values)


def drop_deleted(
    batch: pa.RecordBatch, deletes: Iterable[tuple[list[str], set[tuple[Any, ...]]]]
) -> pa.RecordBatch:
    """The rows of ``batch`` no equality delete matches (null matches null, as the spec says)."""
    keep: list[bool] | None = None
    for names, keys in deletes:
        if not keys:
            continue
        rows = zip(*(batch.column(n).to_pylist() for n in names), strict=True)
        matches = [row not in keys for row in rows]
        keep = matches if keep is None else [a and b for a, b in zip(keep, matches, strict=True)]
    return batch if keep is None else batch.filter(pa.array(keep, pa.bool_()))


class PositionDeletes:
    """A group's reading state: its position-delete files, each read once (``file_path``, ``pos``), the positions
    picked per file; and its schema conversions, each done once per distinct Arrow schema (``projection``)."""

    def __init__(self, table: IcebergTable) -> None:
        self._table = table
        self._read: dict[str, pa.Table] = {}
        self.projection = GroupProjection()

    def positions(self, data_file: DataFile, delete_files: Iterable[DataFile]) -> np.ndarray[Any, Any]:
        """The sorted, distinct deleted positions of ``data_file`` in ``delete_files``."""
        import pyarrow.compute as pc

        found: list[np.ndarray[Any, Any]] = []
        for delete_file in delete_files:
            deletes = self._read.get(delete_file.file_path)
            if deletes is None:
                with self._table.table.io.new_input(delete_file.file_path).open() as stream:
                    deletes = pq.read_table(stream, columns=["file_path", "pos"])
                self._read[delete_file.file_path] = deletes
            mine = deletes.filter(pc.equal(deletes.column("file_path"), data_file.file_path))
            found.append(mine.column("pos").to_numpy().astype(np.int64))
        return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def read_live_rows(
    table: IcebergTable,
    candidate: CompactionCandidate,
    files: Mapping[str, DataFile],
    equality: Mapping[str, tuple[list[str], set[tuple[Any, ...]]]],
    deletes: PositionDeletes | None = None,
) -> Iterator[pa.RecordBatch]:
    """One input file's live rows in the current schema: position deletes as a mask, equality deletes dropped.

    Read straight with pyarrow (:func:`read_direct`) when the file carries field ids and its deletes are Parquet
    (``deletes``: the group's position-delete files, read once per group); otherwise through pyiceberg's
    ``ArrowScan`` (name mapping, deletion vectors).
    """
    from pyiceberg.manifest import FileFormat

    applicable = [equality[d.path] for d in candidate.deletes if d.content == "equality"]
    position_files = [files[d.path] for d in candidate.deletes if d.content == "position"]
    batches = None
    if deletes is not None and all(f.file_format == FileFormat.PARQUET for f in position_files):
        batches = read_direct(
            table,
            files[candidate.path],
            deletes.positions(files[candidate.path], position_files),
            deletes.projection,
        )
    if batches is None:
        batches = _read_with_arrow_scan(table, files[candidate.path], position_files)
    for batch in batches:
        live = drop_deleted(batch, applicable)
        if live.num_rows:
            yield live


def _read_with_arrow_scan(
    table: IcebergTable, data_file: DataFile, position_files: list[DataFile]
) -> Iterator[pa.RecordBatch]:
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import FileScanTask

    task = FileScanTask(data_file, delete_files=set(position_files))
    scan = ArrowScan(table.metadata, table.table.io, table.metadata.schema(), AlwaysTrue())
    yield from scan.to_record_batches([task])


def read_direct(
    table: IcebergTable,
    data_file: DataFile,
    deleted: np.ndarray[Any, Any],
    projection: GroupProjection | None = None,
) -> Iterator[pa.RecordBatch] | None:
    """``data_file``'s rows in the current schema, read with pyarrow; None when the file has no field ids.

    Columns are matched by field id and brought to the current schema by pyiceberg's own projection (renamed
    columns followed, added ones null or their identity-partition value, ``int``/``float`` promoted, nanosecond
    timestamps as pyiceberg reads them); ``deleted`` positions are masked out batch by batch. ``projection``: the
    group's conversions, done once per distinct schema (``data_compaction_project``; default: one for this file).
    """
    from pyiceberg.io.pyarrow import _get_column_projection_values

    metadata = table.metadata
    schema = metadata.schema()
    projection = projection or GroupProjection()
    stream = table.table.io.new_input(data_file.file_path).open()
    try:
        parquet = pq.ParquetFile(stream)
        schemas = projection.file_schemas(parquet.schema_arrow, schema, metadata.format_version)
    except BaseException:
        stream.close()
        raise
    if schemas is None:  # no field ids: pyiceberg's scan applies the name mapping
        stream.close()
        return None
    file_schema, projected = schemas
    missing = _get_column_projection_values(
        data_file, schema, schema, metadata.specs().get(data_file.spec_id), file_schema.field_ids
    )
    downcast = metadata.format_version <= 2
    return _masked_batches(stream, parquet, schema, projected, missing, deleted, downcast, projection)


def _masked_batches(
    stream: Any,
    parquet: pq.ParquetFile,
    schema: Schema,
    projected: Schema,
    missing: dict[int, Any],
    deleted: np.ndarray[Any, Any],
    downcast: bool,
    projection: GroupProjection,
) -> Iterator[pa.RecordBatch]:
    from pyiceberg.io.pyarrow import _to_requested_schema

    def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
        return _to_requested_schema(
            schema,
            projected,
            batch,
            downcast_ns_timestamp_to_us=downcast,
            projected_missing_fields=missing,
            allow_timestamp_tz_mismatch=True,
        )

    start = 0
    with stream:
        columns = [c.name for c in projected.columns]
        for batch in parquet.iter_batches(
            batch_size=131_072, columns=columns, use_threads=ARROW_THREADS.get()
        ):
            end = start + batch.num_rows
            hit = deleted[(deleted >= start) & (deleted < end)] - start
            if len(hit):
                keep = np.ones(batch.num_rows, dtype=bool)
                keep[hit] = False
                batch = batch.filter(pa.array(keep))
            start = end
            if batch.num_rows:
                yield projection.project("read", batch, schema, projected, convert)


def dictionary_columns(rows: pa.Table) -> list[str] | bool:
    """The columns worth a dictionary, decided on the first rows of a file as parquet-mr's fallback would.

    A flat column whose first ``DICTIONARY_SAMPLE_ROWS`` rows are mostly distinct (ids, amounts, timestamps) is
    written plain; repetitive ones (categories, dates) keep the dictionary. With nested columns nothing changes.
    """
    import pyarrow.compute as pc

    sample = rows.slice(0, DICTIONARY_SAMPLE_ROWS)
    if sample.num_rows == 0 or any(pa.types.is_nested(f.type) for f in sample.schema):
        return True
    limit = sample.num_rows * DICTIONARY_MAX_DISTINCT_RATIO
    return [
        name
        for name, column in zip(sample.column_names, sample.columns, strict=True)
        if pc.count_distinct(column, mode="all").as_py() <= limit
    ]


class _RollingWriter:
    """Parquet files of one partition, a new one after ``split_size`` bytes of input."""

    def __init__(
        self,
        table: IcebergTable,
        partition: tuple[Any, ...],
        split_size: float,
        sort_order_id: int | None = None,
    ) -> None:
        from pyiceberg.io.pyarrow import ParquetFormatModel
        from pyiceberg.table.locations import load_location_provider

        metadata = table.metadata
        self._table = table
        self._model = ParquetFormatModel()
        self._schema = metadata.schema()
        self._spec = metadata.spec()
        self._partition = partition
        self._split_size = split_size
        self._sort_order_id = sort_order_id
        self._locations = load_location_provider(metadata.location, metadata.properties)
        # an unpartitioned table's files go straight under data/ (an empty partition path would make "data//",
        # which local file systems tolerate and S3 does not)
        self._key = (
            cast("PartitionKey", _PartitionPath(self._spec, self._schema, partition))
            if self._spec.fields
            else None
        )
        self._write_uuid = uuid.uuid4()
        self._writer: Any = None
        self._output: Any = None
        self._input_bytes = 0.0
        self._buffer: list[pa.RecordBatch] = []
        self._arrow_schema: pa.Schema | None = None
        self._buffered_bytes = 0
        self._projection = GroupProjection()
        self.written: list[DataFile] = []
        self.locations: list[str] = []

    def roll_every(self, split_size: float, sort_order_id: int | None) -> None:
        """Roll after ``split_size`` units of what :meth:`write` is told (bytes, or rows for a sort)."""
        self._split_size = split_size
        self._sort_order_id = sort_order_id

    def write(self, batch: pa.RecordBatch, input_bytes: float) -> None:
        """Buffer ``batch`` (one Parquet row group per ``ROW_GROUP_BUFFER_BYTES``, not one per small input
        batch); roll to a new file once ``split_size`` units went into this one."""
        from pyiceberg.io.pyarrow import _to_requested_schema

        def convert(batch: pa.RecordBatch) -> pa.RecordBatch:
            return _to_requested_schema(
                self._schema, self._schema, batch, include_field_ids=True, format_model=self._model
            )

        converted = self._projection.project("write", batch, self._schema, self._schema, convert)
        # pyarrow reads one file's strings as string and another's as large_string (a Java file and one of ours):
        # every batch takes the first one's Arrow types, or the Parquet writer refuses the second
        if self._arrow_schema is None:
            self._arrow_schema = converted.schema
        elif not converted.schema.equals(self._arrow_schema):
            converted = converted.cast(self._arrow_schema)
        self._buffer.append(converted)
        self._buffered_bytes += converted.nbytes
        if self._buffered_bytes >= ROW_GROUP_BUFFER_BYTES:
            self._flush()
        self._input_bytes += input_bytes
        if self._input_bytes >= self._split_size:
            self.close()

    def _flush(self) -> None:
        if not self._buffer:
            return
        rows = pa.Table.from_batches(self._buffer)
        if self._writer is None:
            self._open(rows)
        self._writer.write(rows)
        self._buffer, self._buffered_bytes = [], 0

    def _open(self, first: pa.Table) -> None:
        name = f"{len(self.locations):05d}-0-{self._write_uuid}.parquet"
        location = self._locations.new_data_location(data_file_name=name, partition_key=self._key)
        self.locations.append(location)
        opened, announce = _OPENED.get(), _ANNOUNCE.get()
        if opened is not None:
            opened.append(location)
        if announce is not None:
            announce(location)
        self._output = self._table.table.io.new_output(location)
        self._writer = self._model.create_writer(self._output, self._schema, self._table.metadata.properties)
        kwargs = getattr(self._writer, "_parquet_writer_kwargs", None)
        if isinstance(kwargs, dict):  # pyiceberg's writer opens pyarrow's on its first write, with these
            kwargs["use_dictionary"] = dictionary_columns(first)

    def close(self) -> None:
        """Finish the open file (if any) and describe it as a DataFile."""
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        self._flush()
        if self._writer is None:
            return
        statistics = self._writer.close()
        data_file = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self._output.location,
            file_format=FileFormat.PARQUET,
            partition=Record(*self._partition),
            file_size_in_bytes=len(self._output),
            sort_order_id=self._sort_order_id,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )
        data_file.spec_id = self._spec.spec_id  # from_args does not take it (pyiceberg 0.12)
        self.written.append(data_file)
        self._writer = None
        self._input_bytes = 0.0


def rewrite_group(
    table: IcebergTable,
    group: FileGroup,
    files: Mapping[str, DataFile],
) -> RewrittenFiles:
    """Read ``group``'s files with their deletes applied and write them as new files of the group's partition.

    Args:
        table: the table (its current schema, spec, properties and FileIO).
        group: a planned group (``data_compaction_plan``) of the current spec.
        files: the ``DataFile`` of every input and delete file of the group, by path (read from the manifests of
            the starting snapshot).

    Returns:
        The new files (written, not committed) and row counts.

    Raises:
        UnsupportedFormatError: a sort strategy on a group holding files of an older partition spec.
    """
    current = table.metadata.default_spec_id
    if any(c.spec_id != current for c in group.files) and table.metadata.spec().fields:
        from airflow_lakeformat.core.iceberg.maintenance import data_compaction_repartition as repartition

        return repartition.rewrite_repartitioned(table, group, files)  # into the current spec, as Java writes
    equality = {
        d.path: equality_delete_keys(table, files[d.path])
        for c in group.files
        for d in c.deletes
        if d.content == "equality"
    }
    result, deletes = RewrittenFiles(group), PositionDeletes(table)
    writer = _RollingWriter(
        table, group.partition if group.files[0].spec_id == current else (), group.split_size
    )
    try:
        if group.sort_keys:
            _write_sorted(table, group, files, equality, writer, result, deletes=deletes)
        else:
            for candidate in group.files:
                result.rows_read += candidate.record_count
                bytes_per_row = candidate.file_size / max(1, candidate.record_count)
                for batch in read_live_rows(table, candidate, files, equality, deletes):
                    result.rows_written += batch.num_rows
                    writer.write(batch, batch.num_rows * bytes_per_row)
        writer.close()
    finally:
        result.outputs = writer.written
        result.locations = writer.locations
    return result


def _write_sorted(
    table: IcebergTable,
    group: FileGroup,
    files: Mapping[str, DataFile],
    equality: Mapping[str, tuple[list[str], set[tuple[Any, ...]]]],
    writer: _RollingWriter,
    result: RewrittenFiles,
    budget: SortBudget | None = None,
    deletes: PositionDeletes | None = None,
) -> None:
    """The sort strategy: every live row of the group through the external sort, then written in order.

    Files are cut every ``ceil(rows / expectedOutputFiles)`` rows, as Java's range shuffle spreads the group over
    that many partitions; a batch that straddles a cut is sliced, so each file holds a contiguous key range.
    """
    with ExternalSort(group.sort_keys, budget) as sorter:
        for candidate in group.files:
            result.rows_read += candidate.record_count
            for batch in read_live_rows(table, candidate, files, equality, deletes):
                sorter.add(batch)
        per_file = max(1, math.ceil(sorter.rows / max(1, group.expected_output_files)))
        writer.roll_every(per_file, UNSORTED_ORDER_ID)
        room = per_file
        for chunk in sorter.sorted_tables():
            for batch in chunk.to_batches():
                offset = 0
                while offset < batch.num_rows:
                    piece = batch.slice(offset, min(room, batch.num_rows - offset))
                    writer.write(piece, piece.num_rows)
                    result.rows_written += piece.num_rows
                    offset += piece.num_rows
                    room = room - piece.num_rows or per_file
        result.runs_spilled = sorter.runs_spilled
