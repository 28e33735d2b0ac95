"""Writing rows into a primary-key table as Paimon's writer does: level-0 files of merged, key-sorted records.

Java's writer (``KeyValueFileStoreWrite`` creating one ``MergeTreeWriter`` per partition and bucket; pypaimon's
``KeyValueDataWriter``) and this module do the same, for one batch of rows:

1. **Row kinds.** Every row is an insert (+I) unless a *row-kind column* names its kind: the table option
   ``rowkind.field`` (a column of the table, kept as a value as Java keeps it) or the write's
   ``row_kind_column`` argument (a column of the input; removed before the rows are conformed unless it is
   a table column too). Values are Java's short strings ``+I``, ``-U``, ``+U``, ``-D`` (``RowKind
   #fromShortString``) or their bytes 0..3; null or other values are refused. Then ``RowKindFilter``:
   ``ignore-delete`` drops -U and -D rows, ``ignore-update-before`` drops -U rows, before any sequence
   number is given.
2. **Routing.** The rows are conformed to the current schema and routed to (partition, bucket); the bucket
   is ``DefaultBucketFunction`` of the bucket key, ``bucket-key`` or else the primary key minus the
   partition keys (``TableSchema#bucketKeys``).
3. **Sequence numbers.** Per bucket, in input order, from the bucket's next sequence number: the highest
   ``maxSequenceNumber`` of its live files + 1 (``MergeTreeWriter`` restores it; pypaimon's
   ``_seq_number_stats``), or 0 for an overwrite (Java writes an overwrite with ``ignorePreviousFiles``).
4. **Merge.** Java sorts its write buffer by key (then ``sequence.field``, then sequence number) and flushes
   it through the table's merge function (``SortBufferWriteBuffer#forEach``, ``ReducerMergeFunctionWrapper``),
   so a key appears once per file; here ``merge_kv`` with ``drop_deletes=False`` (level 0 keeps retractions).
5. **Files.** ``write_kv`` at level 0 with ``fileSource`` APPEND (``MergeTreeWriter#flushWriteBuffer``), rolled
   at ``target-file-size``; one ADD entry per file with the partition's bucket count.
6. **Commit.** One APPEND snapshot (OVERWRITE of a partition when asked) through the Committer, exactly once
   per commit user and identifier. Before every publish attempt the bucket's live sequence numbers are
   checked again: if a concurrent writer took numbers at or above ours, our files are discarded and the
   batch is written again from the new maximum (a lower number would lose against older data).

Refused, typed (:class:`UnsupportedFormatError`) before anything is written: ``bucket=-1`` (dynamic bucket:
a key's bucket is kept in the table's hash index, which this writer does not maintain; with partition keys
outside the primary key it is a cross-partition upsert, whose global key index is not maintained either),
``bucket=-2`` (postponed buckets), ``changelog-producer=input`` (the writer must write the input as changelog
files too), ``deletion-vectors.enabled`` (readers skip level 0 until a compaction we do not run maintains the
vectors: our rows would stay invisible), ``row-tracking.enabled``/``data-evolution.enabled``, a
``bucket-function.type`` other than the default, a level-0 file format other than Parquet, and the merge
options ``MergeSpec`` refuses (named).
Input Paimon's merge would fail on is refused with :class:`RegisterError`: records of one key the merge
function rejects (``merge_kv``), and retractions into a ``first-row`` table (unless ``ignore-delete``), into a
``partial-update`` table without ``partial-update.remove-record-on-delete``, and into an ``aggregation`` table
whose aggregate functions cannot retract (``fields.<f>.ignore-retract``). Batch readers skip level 0 of a
``first-row`` table: its rows become visible after a compaction, as with Java's writer.

Example:
    >>> done = write_primary_key_rows(table, rows, commit_user="cdc", commit_identifier=7, row_kind_column="op")  # doctest: +SKIP
    >>> done.result.snapshot.commit_kind.value  # doctest: +SKIP
    'APPEND'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    MaintenanceRefusedError,
    RegisterError,
    UnsupportedFormatError,
    UsageError,
)
from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import kv_arrow_schema
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind, Snapshot
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.bucketing import bucket_key_type_supported
from airflow_lakeformat.core.paimon.write.layout import Layout
from airflow_lakeformat.core.paimon.write.live_state import check_total_buckets, read_live_state
from airflow_lakeformat.core.paimon.write.rows import conform_rows, group_rows

ROW_KINDS = ("+I", "-U", "+U", "-D")  # RowKind short strings, by byte value
ROW_KIND_OPTION = "rowkind.field"
WRITE_ATTEMPTS = 3  # writes of the batch when concurrent writers keep taking its sequence numbers
DYNAMIC_BUCKET = -1
POSTPONE_BUCKET = -2

_RETRACT = np.array([False, True, False, True])  # RowKind byte -> isRetract
# Errors after which nothing of the commit was published (the files may go).
_REFUSED = (CommitConflictError, CommitRetriesExhaustedError, RegisterError, ValueError)


@dataclass(frozen=True)
class PkWriteTable:
    """What a primary-key write needs to know about the table, checked once (:func:`pk_write_table`)."""

    layout: Layout
    spec: MergeSpec


@dataclass
class PkWritten:
    """The outcome of :func:`write_primary_key_rows`.

    ``result`` is None when nothing was committed (every row filtered out, no overwrite). ``added`` and
    ``deletes`` are the committed ADD and DELETE entries; ``discarded`` counts this run's files removed
    because the same commit had already landed; ``rows_filtered`` the rows ``ignore-delete`` /
    ``ignore-update-before`` dropped.
    """

    result: CommitResult | None
    added: list[ManifestEntry] = field(default_factory=list)
    deletes: list[ManifestEntry] = field(default_factory=list)
    discarded: int = 0
    rows_filtered: int = 0


class _SequencesTaken(CommitConflictError):
    """A concurrent writer committed sequence numbers at or above this batch's in one of its buckets."""


def _refuse(table: Table, problem: str) -> UnsupportedFormatError:
    return UnsupportedFormatError(table.uri, f"writing rows into a primary-key table with {problem}")


def pk_write_table(table: Table) -> PkWriteTable:
    """The layout and merge spec of a primary-key table rows are written into; refuses what we cannot write.

    Args:
        table: a primary-key table, at its current schema.

    Raises:
        UnsupportedFormatError: naming the option (dynamic or postponed buckets, cross-partition upsert,
            ``changelog-producer=input``, row tracking, a non-default bucket function, a level-0 format
            other than Parquet).

    Example:
        >>> pk_write_table(table).layout.bucket  # doctest: +SKIP
        2
    """
    from airflow_lakeformat.core.paimon.merge_tree.kv_write import level_format

    schema = table.schema
    options = schema.table_options
    if not schema.is_primary_key_table:
        raise UsageError(f"{table.uri}: not a primary-key table")
    _check_bucket_mode(table)
    producer = (options.get("changelog-producer") or "none").strip().lower()
    if producer == "input":
        raise _refuse(
            table, "changelog-producer=input (the writer must write its input as changelog files too)"
        )
    for flag in ("row-tracking.enabled", "data-evolution.enabled"):
        if parse_bool(options.get(flag) or "false"):
            raise _refuse(table, f"{flag}=true (row ids are not assigned)")
    if parse_bool(options.get("deletion-vectors.enabled") or "false"):
        raise _refuse(
            table,
            "deletion-vectors.enabled=true (batch readers skip level-0 files until a compaction that maintains "
            "deletion vectors makes them visible, and this tool does not run one)",
        )
    function = (options.get("bucket-function.type") or "default").strip().lower()
    if function != "default":
        raise _refuse(table, f"bucket-function.type={function} (only the default bucket function)")
    file_format = level_format(schema, 0)
    if file_format != "parquet":
        raise _refuse(table, f"file format {file_format} at level 0 (only parquet files are written)")
    keys = tuple(k.strip() for k in (options.get("bucket-key") or "").split(",") if k.strip())
    keys = keys or tuple(schema.trimmed_primary_keys)
    outside = [k for k in keys if k not in schema.primary_keys]
    if outside:
        raise _refuse(table, f"bucket-key {list(outside)} outside the primary key (Paimon rejects it)")
    types = tuple(schema.field(k).type for k in keys)
    for key, dtype in zip(keys, types, strict=True):
        if not bucket_key_type_supported(dtype):
            raise _refuse(table, f"bucket key {key!r} of type {dtype.sql()} (not hashed as Java hashes it)")
    layout = Layout(schema, DataFilePaths(schema), options.bucket, keys, types)
    try:
        spec = MergeSpec.from_schema(schema, table.uri)
    except MaintenanceRefusedError as exc:  # a write is no maintenance: the table is what is refused
        raise _refuse(table, exc.problem) from exc
    return PkWriteTable(layout, spec)


def _check_bucket_mode(table: Table) -> None:
    schema = table.schema
    bucket = schema.table_options.bucket
    outside = [k for k in schema.partition_keys if k not in schema.primary_keys]
    if bucket == DYNAMIC_BUCKET and outside:
        raise _refuse(
            table,
            f"bucket=-1 and partition keys {outside} outside the primary key (a cross-partition upsert: "
            "the global key index that finds a key's partition is not maintained)",
        )
    if bucket == DYNAMIC_BUCKET:
        raise _refuse(
            table,
            "bucket=-1 (dynamic bucket: a key's bucket is kept in the table's hash index, which this "
            "writer does not maintain)",
        )
    if bucket == POSTPONE_BUCKET:
        raise _refuse(table, "bucket=-2 (postponed rows are moved into buckets by Paimon's own compaction)")
    if bucket <= 0:
        raise _refuse(table, f"bucket={bucket}")
    if outside:
        raise _refuse(table, f"partition keys {outside} outside the primary key (Paimon rejects it)")


# ---- row kinds -------------------------------------------------------------------------------------


def row_kind_column_name(table: Table, row_kind_column: str | None) -> str | None:
    """The column holding the rows' kinds: the write's ``row_kind_column``, else ``rowkind.field``.

    Raises:
        UsageError: both are set and differ.
    """
    option = (table.schema.table_options.get(ROW_KIND_OPTION) or "").strip() or None
    if row_kind_column is not None and option is not None and row_kind_column != option:
        raise UsageError(
            f"{table.uri}: row_kind_column={row_kind_column!r} but the table's {ROW_KIND_OPTION} is {option!r}"
        )
    return row_kind_column or option


def row_kinds(data: pa.Table, name: str, where: str) -> np.ndarray:
    """The RowKind byte of every row from column ``name`` (``+I``/``-U``/``+U``/``-D`` or 0..3).

    Raises:
        RegisterError: the column is missing, of another type, or holds a null or an unknown kind.
    """
    if name not in data.column_names:
        raise RegisterError(where, f"the row-kind column {name!r} is not in the input")
    column = data.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        kinds = pc.index_in(column, value_set=pa.array(ROW_KINDS, column.type))
    elif pa.types.is_integer(column.type):
        inside = pc.and_(pc.greater_equal(column, 0), pc.less_equal(column, 3))
        kinds = pc.if_else(inside, column, pa.scalar(None, column.type))
    else:
        raise RegisterError(where, f"the row-kind column {name!r} is {column.type}, not a string or integer")
    bad = pc.is_null(kinds)
    if pc.any(bad).as_py():
        row = int(pc.index(bad, True).as_py())
        value = column[row].as_py()
        raise RegisterError(
            where,
            f"row {row + 1}: row kind {value!r} in column {name!r} is not one of {', '.join(ROW_KINDS)}",
        )
    return np.asarray(kinds.to_numpy(zero_copy_only=False), dtype=np.int8)


def keep_row_kinds(kinds: np.ndarray, spec: MergeSpec) -> np.ndarray | None:
    """``RowKindFilter``: the rows to keep (None: all), dropping -U/-D under ``ignore-delete`` and -U under
    ``ignore-update-before``."""
    drop = np.zeros(len(kinds), dtype=bool)
    if spec.ignore_delete:
        drop |= _RETRACT[kinds]
    if spec.ignore_update_before:
        drop |= kinds == 1
    return ~drop if drop.any() else None


def check_retractions(kinds: np.ndarray, spec: MergeSpec, where: str) -> None:
    """Refuse retractions the table's merge function would fail on when Paimon merges them later."""
    retract = _RETRACT[kinds]
    if not retract.any():
        return
    if spec.engine == "first-row":
        raise RegisterError(
            where, "merge-engine=first-row cannot accept -U/-D rows (set 'ignore-delete'='true' to drop them)"
        )
    if spec.engine == "partial-update" and not spec.remove_record_on_delete:
        raise RegisterError(
            where,
            "merge-engine=partial-update cannot accept -U/-D rows without 'ignore-delete' or "
            "'partial-update.remove-record-on-delete'",
        )
    if spec.engine == "aggregation":
        calls_retract = (kinds == 1) | ((kinds == 3) & (not spec.remove_record_on_delete))
        stuck = [a.field for a in spec.aggregates if not a.retractable]
        if calls_retract.any() and stuck:
            raise RegisterError(
                where,
                f"aggregate functions of fields {stuck} cannot retract -U/-D rows (set "
                f"'fields.{stuck[0]}.ignore-retract'='true', or 'ignore-delete')",
            )


# ---- files -----------------------------------------------------------------------------------------


@dataclass
class PkBatch:
    """Rows ready to be written: conformed to the schema, filtered by ``RowKindFilter``, with their kinds."""

    data: pa.Table
    kinds: np.ndarray
    filtered: int = 0


def prepare_rows(table: Table, target: PkWriteTable, rows: pa.Table, row_kind_column: str | None) -> PkBatch:
    """The input's kinds read (and a row-kind column the table lacks removed), the rows conformed, then
    filtered by ``ignore-delete`` / ``ignore-update-before``; retractions the merge would fail on refused.

    Raises:
        RegisterError: a row-kind value, a column or a value that does not fit, a refused retraction.
        UsageError: ``row_kind_column`` differs from the table's ``rowkind.field``.
    """
    schema = table.schema
    name = row_kind_column_name(table, row_kind_column)
    kinds = None
    if name is not None:
        kinds = row_kinds(rows, name, table.uri)
        if name not in {f.name for f in schema.fields}:
            rows = rows.drop_columns([name])
    data = conform_rows(rows, schema)
    if kinds is None:
        kinds = np.zeros(data.num_rows, dtype=np.int8)
    keep = keep_row_kinds(kinds, target.spec)
    filtered = 0
    if keep is not None:
        filtered = int((~keep).sum())
        data, kinds = data.filter(pa.array(keep)), kinds[keep]
    check_retractions(kinds, target.spec, table.uri)
    return PkBatch(data, kinds, filtered)


def kv_table(part: pa.Table, kinds: np.ndarray, first_sequence: int, table: Table) -> pa.Table:
    """The KV table of one bucket's rows (input order): keys copied from the values, sequence numbers
    ``first_sequence ..`` in order, the kinds, then the row's columns."""
    schema = table.schema
    sequence = np.arange(first_sequence, first_sequence + part.num_rows, dtype=np.int64)
    columns = [
        *(part.column(k) for k in schema.trimmed_primary_keys),
        pa.array(sequence, pa.int64()),
        pa.array(kinds, pa.int8()),
        *part.columns,
    ]
    return pa.Table.from_arrays(columns, schema=kv_arrow_schema(schema))


def write_pk_files(
    table: Table,
    target: PkWriteTable,
    batch: PkBatch,
    *,
    ignore_previous: bool,
    target_file_size: int,
    written: list[str],
) -> tuple[list[ManifestEntry], dict[tuple[bytes, int], int]]:
    """Write ``batch`` as level-0 APPEND files, one merged key-sorted run per (partition, bucket).

    Returns the ADD entries and each bucket's first sequence number. ``ignore_previous`` (an overwrite)
    numbers from 0 and ignores the live files' bucket count, as Java's overwrite does. Paths of created
    files are appended to ``written`` as they appear.
    """
    from airflow_lakeformat.core.paimon.merge_tree.kv_write import write_kv
    from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv

    layout = target.layout
    if batch.data.num_rows == 0:
        return [], {}
    groups = group_rows(batch.data, layout)
    state = None if ignore_previous else read_live_state(table, {p for p, _ in groups})
    entries: list[ManifestEntry] = []
    starts: dict[tuple[bytes, int], int] = {}
    for (partition, bucket), indices in groups.items():
        start = 0
        if state is not None:
            where = table.io.uri(table.io.join(table.root, layout.paths.bucket_directory(partition, bucket)))
            check_total_buckets(layout, state, partition, where)
            start = state.max_sequence.get((partition, bucket), -1) + 1
        if indices is None:
            part, kinds = batch.data, batch.kinds
        else:
            part, kinds = batch.data.take(pa.array(indices, pa.int64())), batch.kinds[indices]
        try:
            merged = merge_kv(kv_table(part, kinds, start, table), target.spec, drop_deletes=False)
        except MaintenanceRefusedError as exc:  # the batch holds records Paimon's merge fails on
            raise RegisterError(table.uri, exc.problem) from exc
        metas = write_kv(
            table,
            layout.schema,
            partition=partition,
            bucket=bucket,
            total_buckets=layout.bucket,
            level=0,
            data=[merged],
            target_file_size=target_file_size,
            written=written,
            file_source=FileSource.APPEND,
        )
        entries += [ManifestEntry.create(FileKind.ADD, partition, bucket, layout.bucket, m) for m in metas]
        starts[(partition, bucket)] = start
    return entries, starts


# ---- commit ----------------------------------------------------------------------------------------


def _sequences_free(
    table: Table, layout: Layout, starts: Mapping[tuple[bytes, int], int]
) -> Callable[[Snapshot | None], None]:
    """The commit's check on every attempt: no live file of our buckets holds a sequence number >= ours."""
    partitions = {p for p, _ in starts}

    def validate(latest: Snapshot | None) -> None:
        del latest  # read_live_state reads the latest snapshot; a newer one makes this attempt's publish lose
        state = read_live_state(table, partitions)
        taken = {k: state.max_sequence[k] for k, s in starts.items() if state.max_sequence.get(k, -1) >= s}
        if taken:
            raise _SequencesTaken(
                f"{table.uri}: a concurrent writer committed sequence numbers up to "
                f"{max(taken.values())} in {len(taken)} of the buckets written; writing the batch again"
            )
        for partition in partitions:
            check_total_buckets(layout, state, partition, table.uri)

    return validate


class _OverwriteStale(CommitConflictError):
    """Files were added to or removed from the overwritten partitions since the DELETE entries were made."""


def _overwrite_unchanged(
    committer: Committer, partition_filter: Mapping[str, str | None] | None, deletes: Sequence[ManifestEntry]
) -> Callable[[Snapshot | None], None]:
    """The overwrite's check on every attempt: the overwritten partitions still hold exactly the files its
    DELETE entries name. Java computes an overwrite's deletes on each attempt (``tryOverwrite``), so a
    concurrent append into the partition is replaced too; a stale list would keep it, and its rows, numbered
    above ours, would win over the overwrite's."""
    planned = {e.identifier() for e in deletes}

    def validate(latest: Snapshot | None) -> None:
        del latest  # overwrite_entries reads the latest snapshot itself
        now = {e.identifier() for e in committer.overwrite_entries(partition_filter)}
        if now != planned:
            raise _OverwriteStale(
                f"{committer.table.uri}: the overwritten partitions changed since the overwrite was planned "
                f"({len(now - planned)} files added, {len(planned - now)} removed); planning its deletes again"
            )

    return validate


def _commit_batch(
    committer: Committer,
    entries: Sequence[ManifestEntry],
    *,
    kind: CommitKind,
    commit_identifier: int,
    overwrite: bool,
    partition_filter: Mapping[str, str | None] | None,
    sequences_free: Callable[[Snapshot | None], None],
) -> tuple[CommitResult, list[ManifestEntry]]:
    """Commit the batch's files: an append checked by ``sequences_free``; an overwrite with its DELETE entries
    made again (the files kept) while the partitions change under it, :data:`WRITE_ATTEMPTS` times."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        deletes = committer.overwrite_entries(partition_filter, entries) if overwrite else []
        validate = _overwrite_unchanged(committer, partition_filter, deletes) if overwrite else sequences_free
        try:
            result = committer.commit(
                [*deletes, *entries],
                kind=kind,
                commit_identifier=commit_identifier,
                check_conflicts=True,
                validate=validate,
            )
        except _OverwriteStale:
            if attempt == WRITE_ATTEMPTS:
                raise
            continue
        return result, deletes
    raise AssertionError("unreachable")  # the loop returns or raises


def _discard(table: Table, paths: Sequence[str]) -> int:
    from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

    return discard_unpublished(table.io, paths, "data-file").total_files if paths else 0


def write_primary_key_rows(
    table: Table,
    rows: pa.Table,
    *,
    commit_user: str | None = None,
    commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
    overwrite: bool = False,
    partition_filter: Mapping[str, str | None] | None = None,
    row_kind_column: str | None = None,
    target_file_size: int | None = None,
    commit_empty: bool = False,
) -> PkWritten:
    """Upsert (and delete) ``rows`` into a primary-key table: level-0 files, one APPEND snapshot, once.

    Args:
        table: a primary-key table with a fixed bucket count.
        rows: the rows (any column order; a row-kind column as ``row_kind_column`` / ``rowkind.field`` says).
        commit_user: the commit user (None: a new ``lakeformat-<uuid>``).
        commit_identifier: with the commit user, identifies the commit across re-runs (exactly once).
        overwrite: replace the live files of ``partition_filter`` (None: the whole table) instead of appending.
        partition_filter: the overwritten partition, by value.
        row_kind_column: an input column holding each row's kind (``+I``, ``-U``, ``+U``, ``-D``).
        target_file_size: roll files at this size (default: the table's ``target-file-size``, else 128 MiB).
        commit_empty: commit an empty snapshot when no row is left to write (the CLI's ``write``).

    Returns:
        :class:`PkWritten`: the commit's result (None when nothing was committed) and entries.

    Raises:
        UnsupportedFormatError: the table is refused (nothing written).
        RegisterError, UsageError: the input is refused (nothing written).
        CommitConflictError: concurrent writers took the batch's sequence numbers on every attempt.

    Example:
        >>> write_primary_key_rows(table, pa.table({"k": [1], "v": ["a"], "op": ["-D"]}),
        ...                        commit_user="cdc", commit_identifier=3, row_kind_column="op")  # doctest: +SKIP
    """
    from airflow_lakeformat.core.paimon.summary import target_file_size as table_target_file_size

    target = pk_write_table(table)
    batch = prepare_rows(table, target, rows, row_kind_column)
    size = target_file_size or table_target_file_size(table)
    committer = Committer(table, commit_user)
    kind = CommitKind.OVERWRITE if overwrite else CommitKind.APPEND
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        written: list[str] = []
        try:
            entries, starts = write_pk_files(
                table, target, batch, ignore_previous=overwrite, target_file_size=size, written=written
            )
        except BaseException:
            _discard(table, written)
            raise
        if not entries and not overwrite and not commit_empty:
            return PkWritten(None, rows_filtered=batch.filtered)
        try:
            result, deletes = _commit_batch(
                committer,
                entries,
                kind=kind,
                commit_identifier=commit_identifier,
                overwrite=overwrite,
                partition_filter=partition_filter,
                sequences_free=_sequences_free(table, target.layout, starts),
            )
        except _SequencesTaken:
            _discard(table, written)
            if attempt == WRITE_ATTEMPTS:
                raise
            continue
        except _REFUSED:
            _discard(table, written)
            raise
        discarded = _discard(table, written) if result.already_committed else 0
        return PkWritten(result, entries, deletes, discarded, batch.filtered)
    raise AssertionError("unreachable")  # the loop returns or raises


def write_fields(done: PkWritten, elapsed: float) -> dict[str, object]:
    """The facade's ``write_rows`` document of a primary-key write (the append writer's keys)."""
    result = done.result
    if result is None:
        return {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0,
                "snapshotId": None, "alreadyCommitted": False}  # fmt: skip
    if result.already_committed:
        return {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0,
                "snapshotId": result.snapshot.id, "alreadyCommitted": True, "discarded": done.discarded}  # fmt: skip
    return {
        "filesWritten": len(done.added),
        "rowsWritten": sum(e.file.row_count for e in done.added),
        "bytesWritten": sum(e.file.file_size for e in done.added),
        "filesDeleted": len(done.deletes),
        "snapshotId": result.snapshot.id,
        "alreadyCommitted": False,
        "commitKind": result.snapshot.commit_kind.value,
        "durationSeconds": round(elapsed, 3),
    }
