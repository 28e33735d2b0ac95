"""``spark-submit`` job ``write``: append a Parquet, CSV or JSON-lines source to an append table in one commit.

    spark-submit write.py --table URI --source PATH_OR_URI --source-format parquet|csv|json
        [--source-reader auto|spark|python] [--commit-user U --commit-identifier N]
        [--overwrite k=v,...|'*'] [--result PATH]

Executors write data files straight into the table's layout with pyarrow (partitioned and bucketed
as the table says, rolling at ``target-file-size``) and return their DataFileMeta records; the
driver numbers the files' sequence numbers as one writer would and commits one snapshot.

* Local sources (a path or ``file://``) are read by Spark: CSV with a header and every value as
  text, JSON lines with primitives as text, Parquet as typed; each value is then cast to its
  column's type (a value that does not fit fails the job with the typed error).
* Other sources (``s3://`` ...) are read in Python on the executors (Spark has no object-store
  connector here): the driver lists the source files and distributes them. ``--source-reader``
  overrides the choice: ``python`` for local Parquet skips Spark's row conversion (faster; one
  task per file at most), ``spark`` for a URI the cluster's Spark can read (``s3a://``).
* With ``--commit-user`` and ``--commit-identifier`` a re-run finds the snapshot an earlier run
  landed and returns it without writing anything: re-running after any failure is safe.

Files written by a failed or killed run are referenced by no snapshot; orphan cleanup removes them.
"""

from __future__ import annotations

import argparse
import pickle
import posixpath
import sys
import uuid
from collections.abc import Iterable, Iterator
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
from airflow_lakeformat.core.paimon.written_files import commit_written_files
from airflow_lakeformat.spark.runtime import (
    JobContext,
    check_fault,
    executor_storage_options,
    run_job,
)

JOB = "write"
FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {"parquet": (".parquet",), "csv": (".csv",), "json": (".json", ".jsonl", ".ndjson")}
# What tasks return: one row per data file, ordered by task and by the file's place in the task.
_RESULT_SCHEMA = "task int, idx int, entry binary"


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


def spark_reads(args: argparse.Namespace) -> bool:
    return bool(args.source_reader == "spark" or (args.source_reader == "auto" and is_local(args.source)))


# -- executors -----------------------------------------------------------------------------------


def _task_rows(task: int, entries: list[ManifestEntry]) -> list[tuple[int, int, bytes]]:
    return [(task, index, pickle.dumps(entry.record)) for index, entry in enumerate(entries)]


def _write_rows(
    table: Table, batches: Iterable[pa.Table | pa.RecordBatch], fail_after: int
) -> list[ManifestEntry]:
    writer = RollingFileWriter(table)
    try:
        for batch in batches:
            writer.write(batch)
            check_fault(len(writer.entries), fail_after)
        entries = writer.close()
        check_fault(len(entries), fail_after)
        return entries
    except BaseException:
        writer.abort()
        raise


def write_arrow_partition(
    uri: str, options: dict[str, Any], fail_after: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: write one Spark partition's rows, yield the new files' records."""
    from pyspark import TaskContext

    context = TaskContext.get()
    task = context.partitionId() if context is not None else 0
    entries = _write_rows(Table.open(uri, options), batches, fail_after)
    rows = _task_rows(task, entries)
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
    path: str, source_format: str, options: dict[str, Any], columns: list[str]
) -> Iterator[pa.Table]:
    io, fs_path = FileIO.for_uri(path, options)
    with io.fs.open(fs_path, "rb") as handle:
        if source_format == "parquet":
            parquet = pq.ParquetFile(handle)
            for index in range(parquet.num_row_groups):
                yield parquet.read_row_group(index)
        elif source_format == "csv":
            import pyarrow.csv as pcsv

            # As the Spark reader does: every table column as text (cast to its type later), empty = null.
            convert = pcsv.ConvertOptions(
                column_types=dict.fromkeys(columns, pa.string()), strings_can_be_null=True
            )
            yield pcsv.read_csv(handle, convert_options=convert)
        else:
            import pyarrow.json as pjson

            yield pjson.read_json(handle)


def write_file_partition(
    uri: str,
    options: dict[str, Any],
    source_options: dict[str, Any],
    source_format: str,
    fail_after: int,
    task: int,
    paths: Iterator[str],
) -> Iterator[tuple[int, int, bytes]]:
    """``mapPartitionsWithIndex`` body: read source files in Python, write them, return the files' records."""
    table = Table.open(uri, options)
    columns = [f.name for f in table.schema.fields]
    batches = (batch for path in paths for batch in _read_file(path, source_format, source_options, columns))
    yield from _task_rows(task, _write_rows(table, batches, fail_after))


# -- driver ----------------------------------------------------------------------------------------


def list_source_files(source: str, source_format: str, options: dict[str, Any]) -> list[str]:
    """The source file, or the ``source_format`` files below a source directory (hidden and ``_`` names skipped)."""
    io, path = FileIO.for_uri(source, options)
    try:
        info = io.fs.info(path)
    except FileNotFoundError as exc:
        raise RegisterError(source, "the source does not exist") from exc
    if info.get("type") != "directory":
        return [io.uri(path)]
    found = []
    for full in sorted(io.fs.find(path)):
        name = posixpath.basename(full)
        relative = full[len(path) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in relative.split("/")):
            continue
        if name.lower().endswith(_EXTENSIONS[source_format]):
            found.append(io.uri(full))
    if not found:
        raise RegisterError(source, f"no {source_format} files found below the source directory")
    return found


def _spark_frame(context: JobContext, source: str, source_format: str) -> Any:
    reader = context.spark.read
    if source_format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "false")
    elif source_format == "json":
        reader = reader.option("primitivesAsString", "true")
    return reader.format(source_format).load(source)


def _spark_source(context: JobContext, table: Table, source: str, source_format: str) -> list[Any]:
    frame = _spark_frame(context, source, source_format)
    _check_columns(table, frame)
    if context.args.parallelism:
        frame = frame.repartition(context.args.parallelism)
    body = partial(
        write_arrow_partition, context.args.table, context.executor_options, context.fail_after_files
    )
    return [(row.task, row.idx, bytes(row.entry)) for row in frame.mapInArrow(body, _RESULT_SCHEMA).collect()]


def _check_columns(table: Table, frame: Any) -> None:
    """Refuse unknown or missing NOT NULL columns before any task starts (values are checked as written)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    empty = pa.Table.from_batches([], schema=to_arrow_schema(frame.schema))
    RollingFileWriter(table).write(empty)


def _python_source(context: JobContext, source: str, source_format: str) -> list[Any]:
    source_options = executor_storage_options(source, context.storage_options)
    files = list_source_files(source, source_format, source_options)
    body = partial(
        write_file_partition,
        context.args.table,
        context.executor_options,
        source_options,
        source_format,
        context.fail_after_files,
    )
    rdd = context.spark.sparkContext.parallelize(files, context.parallelism(len(files)))
    return list(rdd.mapPartitionsWithIndex(body).collect())


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
    if args.dry_run:
        # Checks what can be checked without writing: the table, the source and its columns.
        if spark_reads(args):
            _check_columns(table, _spark_frame(context, args.source, args.source_format))
            sources = None
        else:
            source_options = executor_storage_options(args.source, context.storage_options)
            sources = len(list_source_files(args.source, args.source_format, source_options))
        return {
            **document, "snapshotId": None, "alreadyCommitted": False, "filesWritten": 0, "rowsWritten": 0,
            "bytesWritten": 0, "filesDeleted": 0, "sourceFiles": sources,
        }  # fmt: skip
    if spark_reads(args):
        rows = _spark_source(context, table, args.source, args.source_format)
    else:
        rows = _python_source(context, args.source, args.source_format)
    entries = [ManifestEntry(pickle.loads(data)) for _, _, data in sorted(rows, key=lambda r: (r[0], r[1]))]
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
