"""``spark-submit`` job ``write``: append a Parquet, CSV or JSON-lines source to an append table in one commit.

    spark-submit write.py --table URI --source PATH_OR_URI --source-format parquet|csv|json
        [--source-reader auto|spark|python] [--commit-user U --commit-identifier N]
        [--overwrite k=v,...|'*'] [--result PATH]

Executors write data files straight into the table's layout with pyarrow (partitioned and bucketed
as the table says, rolling at ``target-file-size``) and return their DataFileMeta records; the
driver numbers the files' sequence numbers as one writer would and commits one snapshot.

* Who reads the source (``--source-reader auto``): pyarrow inside the tasks for Parquet and for
  every remote source (``s3://`` ...: Spark has no object-store connector here); Spark for local
  CSV (header, every value as text) and JSON lines (primitives as text), and for local Parquet in
  Hive-style ``key=value`` directories (Spark reads those as columns). Spark's Parquet reader would
  hand the rows to the tasks as Arrow batches rebuilt row by row in the JVM, which cost 3 to 4
  times the write itself (bench/README.md); pyarrow reads the files' columns directly. Either way
  each value is then cast to its column's type (a value that does not fit fails the job with the
  typed error). ``--source-reader spark|python`` forces the choice (``spark`` for a URI the
  cluster's Spark can read, e.g. ``s3a://``).
* The Python reader's plan: the driver lists the source files (with their sizes) and gives each
  task a share balanced by bytes, largest first; with fewer Parquet files than tasks, files are
  cut into their row groups so one big file still keeps every task busy.
* The result reports ``sourceReader``, ``sessionSeconds`` (starting Spark: fixed cost),
  ``writeSeconds`` (the tasks: what grows with the data) and ``commitSeconds``.
* With ``--commit-user`` and ``--commit-identifier`` a re-run finds the snapshot an earlier run
  landed and returns it without writing anything: re-running after any failure is safe.

Files written by a failed or killed run are referenced by no snapshot; orphan cleanup removes them.
"""

from __future__ import annotations

import argparse
import json
import pickle
import posixpath
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.paths import parse_overwrite_spec
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.live_state import next_sequence_numbers
from airflow_lakeformat.core.paimon.write.rolling_writer import RollingFileWriter
from airflow_lakeformat.core.paimon.write.rows import write_schema
from airflow_lakeformat.core.paimon.written_files import commit_written_files
from airflow_lakeformat.core.sources import EXTENSIONS, SourceFormat, WriteSchema, iter_source_batches
from airflow_lakeformat.core.sources.schema import check_columns
from airflow_lakeformat.core.sources.text import parse_text_table
from airflow_lakeformat.spark.runtime import (
    JobContext,
    check_fault,
    executor_storage_options,
    run_job,
)

JOB = "write"
FORMATS = ("parquet", "csv", "json")
# What tasks return: one row per data file, ordered by task and by the file's place in the task.
_RESULT_SCHEMA = "task int, idx int, entry binary"
# What one task of the Python reader reads: (path, bytes, row groups or None for the whole file).
SourceUnit = tuple[str, int, tuple[int, ...] | None]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--source", required=True, help="file or directory: a local path, file:// or s3://")
    parser.add_argument("--source-format", required=True, choices=FORMATS)
    parser.add_argument("--commit-user", help="commit user (default: a new lakeformat-spark-write-<uuid>)")
    parser.add_argument(
        "--commit-identifier", type=int, help="with the same --commit-user, a re-run never commits twice"
    )
    parser.add_argument(
        "--overwrite", metavar="PARTITION_SPEC", help="replace partitions k=v[,k=v] ('*' = all)"
    )
    parser.add_argument(
        "--source-reader",
        choices=("auto", "spark", "python"),
        default="auto",
        help="who reads the source: Spark, or pyarrow on the executors (auto: Spark for local paths)",
    )


def is_local(uri: str) -> bool:
    return "://" not in uri or uri.lower().startswith("file://")


def spark_reads(args: argparse.Namespace, source_options: dict[str, Any]) -> bool:
    """Who reads the source: Spark (True) or pyarrow in the tasks (False).

    ``auto``: Python for remote sources (Spark has no object-store connector here) and for local
    Parquet, whose rows would otherwise cross from the JVM to the tasks as Arrow batches built row
    by row (the dominant cost, see bench/README.md); Spark for local CSV and JSON lines (its
    readers define how text is split into columns) and for Parquet in Hive-style ``key=value``
    directories (Spark turns those into columns) or in files the Python listing does not pick up.
    """
    if args.source_reader != "auto":
        return bool(args.source_reader == "spark")
    if not is_local(args.source):
        return False
    if args.source_format != "parquet":
        return True
    try:
        files = source_files(args.source, args.source_format, source_options)
    except RegisterError:
        return True  # let Spark read (or refuse) what it finds
    return any("=" in part for _, _, relative in files for part in relative.split("/")[:-1])


# -- executors -----------------------------------------------------------------------------------


def _task_rows(
    task: int, started_at: float, entries: list[ManifestEntry], profile: dict[str, Any]
) -> list[tuple[int, int, bytes]]:
    """One row per file written, then the task's profile as a row with ``idx`` -1."""
    rows = [(task, index, pickle.dumps(entry.record)) for index, entry in enumerate(entries)]
    profile = {"task": task, **profile, "startedAt": started_at, "finishedAt": time.time()}
    rows.append((task, -1, json.dumps(profile).encode()))
    return rows


def _write_rows(
    table: Table, batches: Iterable[pa.Table | pa.RecordBatch], fail_after: int
) -> tuple[list[ManifestEntry], dict[str, Any]]:
    """Write every batch; returns the files' entries and where the task's time went: waiting for
    its input (Spark's rows as Arrow, or pyarrow reading the source) and writing (cast, split,
    Parquet encoding, closing files with their statistics)."""
    writer = RollingFileWriter(table)
    profile: dict[str, Any] = {"inputSeconds": 0.0, "writeSeconds": 0.0, "batches": 0, "rows": 0}
    clock = time.perf_counter
    try:
        source = iter(batches)
        while True:
            started = clock()
            batch = next(source, None)
            waited = clock()
            profile["inputSeconds"] += waited - started
            if batch is None:
                break
            writer.write(batch)
            profile["writeSeconds"] += clock() - waited
            profile["batches"] += 1
            profile["rows"] += batch.num_rows
            check_fault(len(writer.entries), fail_after)
        started = clock()
        entries = writer.close()
        profile["writeSeconds"] += clock() - started
        check_fault(len(entries), fail_after)
        return entries, {k: round(v, 3) if isinstance(v, float) else v for k, v in profile.items()}
    except BaseException:
        writer.abort()
        raise


def write_arrow_partition(
    uri: str,
    options: dict[str, Any],
    fail_after: int,
    source: str,
    text_columns: frozenset[str],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: parse the text columns as the table's types, write one Spark partition's rows,
    yield the new files' records."""
    from pyspark import TaskContext

    started_at = time.time()
    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    table = Table.open(uri, options)
    schema = write_schema(table.schema)
    typed = (
        parse_text_table(batch, schema, source, text_columns=text_columns, first_row=None)
        for batch in batches
    )
    rows = _task_rows(task, started_at, *_write_rows(table, typed, fail_after))
    if rows:
        columns = list(zip(*rows, strict=True))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(columns[0], pa.int32()),
                pa.array(columns[1], pa.int32()),
                pa.array(columns[2], pa.binary()),
            ],
            names=["task", "idx", "entry"],
        )


def _read_file(
    path: str,
    source_format: str,
    options: dict[str, Any],
    schema: WriteSchema,
    row_groups: Sequence[int] | None = None,
) -> Iterator[pa.Table]:
    """The rows of one source file (of ``row_groups`` only, for Parquet, when given), in file order, as
    the table's columns: ``core.sources`` reads with the table's types, nothing inferred."""
    kind: SourceFormat = source_format  # type: ignore[assignment]
    yield from iter_source_batches(path, schema, options, kind, row_groups)


def write_file_partition(
    uri: str,
    options: dict[str, Any],
    source_options: dict[str, Any],
    source_format: str,
    fail_after: int,
    task: int,
    shares: Iterator[list[SourceUnit]],
) -> Iterator[tuple[int, int, bytes]]:
    """``mapPartitionsWithIndex`` body: read this task's share of the source in Python, write it,
    return the new files' records."""
    started_at = time.time()
    table = Table.open(uri, options)
    schema = write_schema(table.schema)
    units = [unit for share in shares for unit in share]
    batches = (
        batch
        for path, _size, row_groups in units
        for batch in _read_file(path, source_format, source_options, schema, row_groups)
    )
    yield from _task_rows(task, started_at, *_write_rows(table, batches, fail_after))


# -- driver ----------------------------------------------------------------------------------------


def list_source_files(source: str, source_format: str, options: dict[str, Any]) -> list[str]:
    """The source file, or the ``source_format`` files below a source directory (hidden and ``_`` names skipped)."""
    return [path for path, _, _ in source_files(source, source_format, options)]


def source_files(source: str, source_format: str, options: dict[str, Any]) -> list[tuple[str, int, str]]:
    """:func:`list_source_files` with each file's size in bytes and path relative to the source."""
    io, path = FileIO.for_uri(source, options)
    try:
        info = io.fs.info(path)
    except FileNotFoundError as exc:
        raise RegisterError(source, "the source does not exist") from exc
    if info.get("type") != "directory":
        return [(io.uri(path), int(info.get("size") or 0), posixpath.basename(path))]
    found = []
    for full, detail in sorted(io.fs.find(path, detail=True).items()):
        name = posixpath.basename(full)
        relative = full[len(path) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in relative.split("/")):
            continue
        if name.lower().endswith(EXTENSIONS[source_format]):
            found.append((io.uri(full), int(detail.get("size") or 0), relative))
    if not found:
        raise RegisterError(source, f"no {source_format} files found below the source directory")
    return found


def plan_source_units(
    files: Sequence[tuple[str, int, str]], source_format: str, tasks: int, options: dict[str, Any]
) -> list[list[SourceUnit]]:
    """Split the source over ``tasks`` tasks, balanced by bytes, for the Python reader.

    With at least as many files as tasks each file is one unit; with fewer, Parquet files are cut
    into their row groups (footers read on the driver), so a single large file still keeps every
    task busy. Units go largest first to the least loaded task; each task then reads its units in
    source order, so the plan (and the files written) is deterministic.
    """
    units: list[SourceUnit] = [(path, size, None) for path, size, _ in files]
    if source_format == "parquet" and len(files) < tasks:
        units = []
        for path, size, _ in files:
            groups = _row_group_sizes(path, options)
            if len(groups) <= 1:
                units.append((path, size, None))
                continue
            units.extend((path, group_size, (index,)) for index, group_size in enumerate(groups))
    order = {id(unit): position for position, unit in enumerate(units)}
    shares: list[list[SourceUnit]] = [[] for _ in range(max(1, min(tasks, len(units))))]
    loads = [0] * len(shares)
    for unit in sorted(units, key=lambda u: (-u[1], order[id(u)])):
        lightest = loads.index(min(loads))
        shares[lightest].append(unit)
        loads[lightest] += unit[1]
    return [sorted(share, key=lambda u: order[id(u)]) for share in shares]


def _row_group_sizes(path: str, options: dict[str, Any]) -> list[int]:
    if is_local(path):
        metadata = pq.ParquetFile(path.removeprefix("file://")).metadata
    else:
        io, fs_path = FileIO.for_uri(path, options)
        with io.fs.open(fs_path, "rb") as handle:
            metadata = pq.ParquetFile(handle).metadata
    return [metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)]


def _spark_frame(context: JobContext, source: str, source_format: str) -> Any:
    """Spark's reader with nothing inferred: CSV and JSON values as their text, Hive-style ``key=value``
    directory values as text too (``partitionColumnTypeInference`` would make ``007`` the number 7)."""
    context.spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    reader = context.spark.read
    if source_format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "false")
    elif source_format == "json":
        reader = reader.option("primitivesAsString", "true")
    return reader.format(source_format).load(source)


def text_columns(
    columns: Sequence[str], source_format: str, source: str, options: dict[str, Any]
) -> frozenset[str]:
    """The columns of a Spark-read frame that hold text to parse: every column of CSV and JSON; for Parquet,
    the Hive-style ``key=value`` directory columns (the files' own columns are typed). Directories the
    listing cannot see give none, and a string column for a typed one is then refused, typed."""
    if source_format != "parquet":
        return frozenset(columns)
    try:
        files = source_files(source, source_format, options)
    except (RegisterError, OSError, ValueError):
        return frozenset()
    keys = {
        part.split("=", 1)[0] for _, _, relative in files for part in relative.split("/")[:-1] if "=" in part
    }
    return frozenset(keys & set(columns))


# Rows per Arrow batch Spark hands a task (Spark's default: 10,000). Every batch costs the task a
# cast, a partition split and a buffer append; fewer, larger batches halve that overhead.
ARROW_BATCH_ROWS = 131_072
_ARROW_BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


def _spark_source(context: JobContext, table: Table, source: str, source_format: str) -> list[Any]:
    if not context.spark.sparkContext.getConf().contains(_ARROW_BATCH_CONF):  # the user's setting wins
        context.spark.conf.set(_ARROW_BATCH_CONF, str(ARROW_BATCH_ROWS))
    frame = _spark_frame(context, source, source_format)
    _check_columns(table, frame, source)
    if context.args.parallelism:
        frame = frame.repartition(context.args.parallelism)
    body = partial(
        write_arrow_partition,
        context.args.table,
        context.executor_options,
        context.fail_after_files,
        source,
        text_columns(
            frame.columns, source_format, source, executor_storage_options(source, context.storage_options)
        ),
    )
    return [(row.task, row.idx, bytes(row.entry)) for row in frame.mapInArrow(body, _RESULT_SCHEMA).collect()]


def _check_columns(table: Table, frame: Any, source: str) -> None:
    """Refuse unknown or missing NOT NULL columns before any task starts (values are checked as written)."""
    check_columns(list(frame.columns), write_schema(table.schema), source)


def _python_source(context: JobContext, source: str, source_format: str) -> list[Any]:
    source_options = executor_storage_options(source, context.storage_options)
    files = source_files(source, source_format, source_options)
    shares = plan_source_units(files, source_format, context.parallelism(1 << 30), source_options)
    body = partial(
        write_file_partition,
        context.args.table,
        context.executor_options,
        source_options,
        source_format,
        context.fail_after_files,
    )
    # One element per partition: task i reads exactly shares[i].
    rdd = context.spark.sparkContext.parallelize(shares, len(shares))
    return list(rdd.mapPartitionsWithIndex(body).collect())


def _task_timeline(profile: dict[str, Any], submitted: float, collected: float) -> dict[str, Any]:
    """A task's profile with its start after the job was submitted (scheduling, Python worker start,
    imports) and the wait from its end until the driver had every result, instead of clock times."""
    profile["startDelaySeconds"] = round(profile.pop("startedAt") - submitted, 3)
    profile["endDelaySeconds"] = round(collected - profile.pop("finishedAt"), 3)
    return profile


def number_sequences(table: Table, entries: list[ManifestEntry]) -> None:
    """Give the new files consecutive sequence numbers per partition and bucket, as one writer would."""
    starts = next_sequence_numbers(table, {(e.partition, e.bucket) for e in entries})
    for entry in entries:
        key = (entry.partition, entry.bucket)
        first = starts[key]
        entry.file.record["_MIN_SEQUENCE_NUMBER"] = first
        entry.file.record["_MAX_SEQUENCE_NUMBER"] = first + entry.file.row_count - 1
        starts[key] = first + entry.file.row_count


def run(context: JobContext) -> dict[str, Any]:
    args = context.args
    table = context.open_table()
    RollingFileWriter(table)  # refuses tables we cannot write before any work starts
    committer = Committer(table, args.commit_user or f"lakeformat-spark-write-{uuid.uuid4()}")
    identifier = BATCH_COMMIT_IDENTIFIER if args.commit_identifier is None else args.commit_identifier
    kind = CommitKind.OVERWRITE if args.overwrite is not None else CommitKind.APPEND
    overwrite = parse_overwrite_spec(args.overwrite) if args.overwrite is not None else None
    document: dict[str, Any] = {
        "operation": "write",
        "format": "paimon",
        "commitUser": committer.commit_user,
        "commitIdentifier": identifier,
        "dryRun": args.dry_run,
    }
    if identifier != BATCH_COMMIT_IDENTIFIER:
        landed = committer.find_landed(identifier, kind)
        if landed is not None:
            return {
                **document, "snapshotId": landed.id, "alreadyCommitted": True, "filesWritten": 0,
                "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0,
            }  # fmt: skip
    source_options = executor_storage_options(args.source, context.storage_options)
    by_spark = spark_reads(args, source_options)
    document["sourceReader"] = "spark" if by_spark else "python"
    if args.dry_run:
        # Checks what can be checked without writing: the table, the source and its columns.
        if by_spark:
            _check_columns(table, _spark_frame(context, args.source, args.source_format), args.source)
            sources = None
        else:
            sources = len(list_source_files(args.source, args.source_format, source_options))
        return {
            **document, "snapshotId": None, "alreadyCommitted": False, "filesWritten": 0, "rowsWritten": 0,
            "bytesWritten": 0, "filesDeleted": 0, "sourceFiles": sources,
        }  # fmt: skip
    context.spark  # noqa: B018 - start the session apart, so the timings below are the work alone
    started, submitted = time.monotonic(), time.time()
    if by_spark:
        rows = _spark_source(context, table, args.source, args.source_format)
    else:
        rows = _python_source(context, args.source, args.source_format)
    written, collected = time.monotonic(), time.time()
    entries = [
        ManifestEntry(pickle.loads(data)) for _, i, data in sorted(rows, key=lambda r: r[:2]) if i >= 0
    ]
    document["tasks"] = [
        _task_timeline(json.loads(data), submitted, collected) for _, i, data in sorted(rows) if i < 0
    ]
    number_sequences(table, entries)
    empty = {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0}
    if not entries and not (args.overwrite is not None and committer.overwrite_entries(overwrite)):
        return {**document, "snapshotId": None, "alreadyCommitted": False, **empty}
    context.before_commit()
    done = commit_written_files(
        committer,
        entries,
        overwrite=args.overwrite is not None,
        partition_filter=overwrite,
        commit_identifier=identifier,
    )
    result = done.result
    document["writeSeconds"] = round(written - started, 3)  # tasks: read, convert, write (what scales)
    document["commitSeconds"] = round(time.monotonic() - written, 3)  # numbering and the commit
    if result.already_committed:
        return {**document, "snapshotId": result.snapshot.id, "alreadyCommitted": True, **empty}
    return {
        **document,
        "snapshotId": result.snapshot.id,
        "alreadyCommitted": False,
        "commitKind": result.snapshot.commit_kind.value,
        "filesWritten": len(entries),
        "rowsWritten": sum(e.file.row_count for e in entries),
        "bytesWritten": sum(e.file.file_size for e in entries),
        "filesDeleted": len(done.deletes),
    }


def main(argv: list[str] | None = None) -> int:
    return run_job(JOB, argv, configure, run)


if __name__ == "__main__":
    # Run the module under its package name, so Spark pickles the task functions by reference.
    from airflow_lakeformat.spark.jobs import write as job

    sys.exit(job.main())
