"""Data compaction of append-only tables: bin-pack small data files per partition and bucket.

One planner serves both modes: :func:`compact_data` runs the plan in this process (small tables),
the Spark job ``compact_data`` ships the plan's groups to executors, which call
:func:`rewrite_group`, and commits on the driver with :func:`commit_data_compaction`. Given the same
table both modes make the same plan and write the same rows into the same number of files.

Rules, chosen so a rewrite can never change what readers see:

* Only append tables without primary keys (a primary-key table's files are merged by key, which is
  Paimon's LSM compaction, not a bin-pack), without deletion vectors, row tracking or data
  evolution, and with the default bucket modes (``-1`` or a fixed count).
* Candidates are live level-0 Parquet files smaller than ``target-file-size`` written with the
  current schema, without extra files, an embedded index or an external path; anything else is
  left alone and counted in the plan's ``skipped``.
* Per partition and bucket, candidates are taken in sequence-number order and packed greedily into
  groups of at most ``target-file-size`` input bytes; a group with fewer than ``min_file_count``
  files is not worth a rewrite and is dropped. In fixed-bucket tables a group never spans a file
  that is not a candidate, so each group covers a contiguous range of the bucket's sequence numbers.
* The rewrite streams each input's row groups into new files of the same partition (the exact
  partition bytes of the inputs) and bucket, rolling at ``target-file-size``; rows are checked
  against the manifest's row counts on the way in and out. New files are ``FileSource.COMPACT``
  and keep the inputs' sequence numbers: together they cover exactly the inputs' [min, max] range.
* The commit is one COMPACT snapshot of DELETE + ADD entries through the ordinary
  :class:`~airflow_lakeformat.core.paimon.commit.Committer`, whose conflict check refuses it when a planned
  file is no longer live (another compaction or an overwrite got there first). Concurrent appends
  do not conflict. Files of a refused or failed rewrite are never deleted here: they are orphans,
  which orphan cleanup removes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError, UnsupportedFormatError
from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import FileKind, FileSource, ManifestEntry
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.paths import DataFilePaths, PartitionCodec, PartitionFilter
from airflow_lakeformat.core.paimon.snapshot import BATCH_COMMIT_IDENTIFIER, CommitKind
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.layout import PARQUET_EXTENSION
from airflow_lakeformat.core.paimon.write.rolling_writer import RollingFileWriter

# Paimon's ``compaction.min.file-num`` default.
DEFAULT_MIN_FILE_COUNT = 5
UNAWARE_BUCKET = -1


@dataclass(frozen=True)
class CompactionGroup:
    """Small files of one partition and bucket, rewritten together into new files."""

    partition: bytes
    bucket: int
    total_buckets: int
    entries: tuple[ManifestEntry, ...]
    partition_spec: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def file_count(self) -> int:
        return len(self.entries)

    @property
    def bytes(self) -> int:
        return sum(e.file.file_size for e in self.entries)

    @property
    def rows(self) -> int:
        return sum(e.file.row_count for e in self.entries)

    @property
    def min_sequence_number(self) -> int:
        return min(e.file.min_sequence_number for e in self.entries)

    @property
    def max_sequence_number(self) -> int:
        return max(e.file.max_sequence_number for e in self.entries)

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition_spec,
            "bucket": self.bucket,
            "files": [e.file.file_name for e in self.entries],
            "fileCount": self.file_count,
            "bytes": self.bytes,
            "rows": self.rows,
        }


@dataclass(frozen=True)
class DataCompactionPlan:
    """What a data compaction will rewrite, against one snapshot."""

    table: str
    snapshot_id: int | None
    schema_id: int
    target_file_size: int
    min_file_count: int
    live_files: int
    candidates: int
    skipped: dict[str, int]
    groups: tuple[CompactionGroup, ...]

    @property
    def files_to_rewrite(self) -> int:
        return sum(g.file_count for g in self.groups)

    @property
    def bytes_to_rewrite(self) -> int:
        return sum(g.bytes for g in self.groups)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "snapshotId": self.snapshot_id,
            "schemaId": self.schema_id,
            "targetFileSize": self.target_file_size,
            "minFileCount": self.min_file_count,
            "liveFiles": self.live_files,
            "candidates": self.candidates,
            "skipped": dict(sorted(self.skipped.items())),
            "groups": [g.to_json() for g in self.groups],
            "filesToRewrite": self.files_to_rewrite,
            "bytesToRewrite": self.bytes_to_rewrite,
        }


@short_repr
@dataclass
class DataCompactionResult:
    dry_run: bool
    snapshot_before: int | None
    snapshot_id: int | None  # the COMPACT snapshot, None for a dry run or when nothing was worth it
    groups: int
    files_rewritten: int
    files_written: int
    bytes_rewritten: int
    bytes_written: int
    rows_rewritten: int
    duration_seconds: float = 0.0

    def summary(self) -> str:
        """One line: what was (or would be) rewritten."""
        return summary(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "operation": "compact-data",
            "format": "paimon",
            "dryRun": self.dry_run,
            "snapshotBefore": self.snapshot_before,
            "snapshotId": self.snapshot_id,
            "groups": self.groups,
            "filesRewritten": self.files_rewritten,
            "filesWritten": self.files_written,
            "bytesRewritten": self.bytes_rewritten,
            "bytesWritten": self.bytes_written,
            "rowsRewritten": self.rows_rewritten,
            "durationSeconds": round(self.duration_seconds, 3),
        }


# -- planning ------------------------------------------------------------------------------------


def check_compactable(table: Table) -> None:
    """Refuse tables whose data files a bin-pack rewrite would get wrong."""
    schema = table.schema
    options = schema.table_options
    where = table.uri
    if schema.is_primary_key_table:
        raise UnsupportedFormatError(
            where,
            "data compaction of a primary-key table (its files are merged by key, which is Paimon's own "
            "compaction); only append tables are bin-packed",
        )
    for flag in ("deletion-vectors.enabled", "row-tracking.enabled", "data-evolution.enabled"):
        if parse_bool(options.get(flag) or "false"):
            raise UnsupportedFormatError(where, f"data compaction of a table with {flag}=true")
    if options.bucket != UNAWARE_BUCKET and options.bucket <= 0:
        raise UnsupportedFormatError(where, f"data compaction of a table with bucket={options.bucket}")
    if options.file_format != "parquet":
        raise UnsupportedFormatError(
            where, f"data compaction of a table with file.format={options.file_format} (only parquet)"
        )


def _skip_reason(entry: ManifestEntry, schema_id: int, target: int) -> str | None:
    f = entry.file
    if not f.file_name.endswith(PARQUET_EXTENSION):
        return "notParquet"
    if f.level != 0:
        return "notLevel0"
    if f.schema_id != schema_id:
        return "otherSchema"
    if f.external_path or f.extra_files or f.embedded_index is not None or f.first_row_id is not None:
        return "extraFilesOrExternal"
    if f.file_size >= target:
        return "large"
    return None


def _order(entry: ManifestEntry) -> tuple[int, int, str]:
    f = entry.file
    return (f.min_sequence_number, f.max_sequence_number, f.file_name)


def _pack(files: list[ManifestEntry], target: int) -> list[list[ManifestEntry]]:
    """Greedy, order-preserving bins of at most ``target`` input bytes (a bigger file gets a bin alone)."""
    bins: list[list[ManifestEntry]] = []
    current: list[ManifestEntry] = []
    size = 0
    for entry in files:
        if current and size + entry.file.file_size > target:
            bins.append(current)
            current, size = [], 0
        current.append(entry)
        size += entry.file.file_size
    if current:
        bins.append(current)
    return bins


def plan_data_compaction(
    table: Table,
    *,
    partitions: Sequence[Mapping[str, str | None]] | None = None,
    min_file_count: int | None = None,
    target_file_size: int | None = None,
) -> DataCompactionPlan:
    """Group the latest snapshot's small files per partition and bucket, bin-packed up to the target size.

    ``partitions`` restricts the plan to partitions matching any of the given specs
    (``{"dt": "2024-01-01"}``); ``min_file_count`` defaults to the table's ``compaction.min.file-num``
    (Paimon's default 5) and ``target_file_size`` to its ``target-file-size``.
    """
    check_compactable(table)
    schema = table.schema
    options = schema.table_options
    target = target_file_size or options.target_file_size
    if target <= 0:
        raise ValueError(f"target file size must be positive, not {target}")
    minimum = min_file_count
    if minimum is None:
        minimum = int(options.get("compaction.min.file-num") or DEFAULT_MIN_FILE_COUNT)
    if minimum < 2:
        raise ValueError(f"min file count must be at least 2, not {minimum}")
    codec = PartitionCodec(schema)
    matches = PartitionFilter(codec, partitions, table.uri)
    latest = table.snapshot_manager.latest_snapshot()
    entries = live_entries(table, latest) if latest is not None else []
    by_bucket: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for entry in entries:
        if matches(entry.partition):
            by_bucket.setdefault((entry.partition, entry.bucket), []).append(entry)
    skipped: dict[str, int] = {}
    candidates = 0
    groups: list[CompactionGroup] = []
    fixed = options.bucket > 0
    for (partition, bucket), files in sorted(
        by_bucket.items(), key=lambda kv: (codec.path(kv[0][0]), kv[0][1])
    ):
        # Runs of consecutive candidates; in an unaware-bucket table sequence numbers carry no
        # order across writers, so all its candidates form one run.
        runs: list[list[ManifestEntry]] = [[]]
        for entry in sorted(files, key=_order):
            reason = _skip_reason(entry, schema.id, target)
            if reason is None:
                candidates += 1
                runs[-1].append(entry)
                continue
            skipped[reason] = skipped.get(reason, 0) + 1
            if fixed and runs[-1]:
                runs.append([])
        for run in runs:
            for chosen in _pack(run, target):
                if len(chosen) < minimum:
                    continue
                total = next((e.total_buckets for e in chosen if e.total_buckets is not None), options.bucket)
                groups.append(
                    CompactionGroup(partition, bucket, total, tuple(chosen), codec.to_json(partition))
                )
    return DataCompactionPlan(
        table=table.uri,
        snapshot_id=latest.id if latest else None,
        schema_id=schema.id,
        target_file_size=target,
        min_file_count=minimum,
        live_files=len(entries),
        candidates=candidates,
        skipped=skipped,
        groups=tuple(groups),
    )


# -- rewriting -----------------------------------------------------------------------------------


def rewrite_group(
    table: Table,
    group: CompactionGroup,
    *,
    target_file_size: int,
    written: list[str] | None = None,
) -> list[ManifestEntry]:
    """Rewrite one group's files into new files of its partition and bucket; return their ADD entries.

    Paths of the files created are appended to ``written`` as they appear, also when the rewrite
    fails (they are then orphans). Nothing is committed and nothing is deleted.
    """
    paths = DataFilePaths(table.schema)
    writer = RollingFileWriter(
        table,
        target_file_size=target_file_size,
        file_source=FileSource.COMPACT,
        into=(group.partition, group.bucket),
        total_buckets=group.total_buckets,
    )
    try:
        for entry in group.entries:
            full = table.io.join(table.root, paths.relative_path(entry))
            where = table.io.uri(full)
            try:
                with table.io.fs.open(full, "rb") as handle:
                    parquet = pq.ParquetFile(handle)
                    if parquet.metadata.num_rows != entry.file.row_count:
                        raise CorruptMetadataError(
                            where,
                            f"holds {parquet.metadata.num_rows} rows but its manifest entry says "
                            f"{entry.file.row_count}; not compacting it",
                        )
                    for index in range(parquet.num_row_groups):
                        writer.write(parquet.read_row_group(index))
            except FileNotFoundError as exc:
                raise MissingMetadataError(where, "the live files the compaction plan read") from exc
        added = writer.close()
    except BaseException:
        writer.abort()
        raise
    finally:
        if written is not None:
            written.extend(writer.written)
    rows = sum(e.file.row_count for e in added)
    if rows != group.rows:
        raise CorruptMetadataError(
            table.uri,
            f"rewrote {group.rows} rows of {group.file_count} files into {rows} rows; not committing",
        )
    _assign_sequence_numbers(added, group.min_sequence_number, group.max_sequence_number)
    return added


def _assign_sequence_numbers(added: list[ManifestEntry], low: int, high: int) -> None:
    """Consecutive ranges from the inputs' minimum, kept within [low, high]; the last file ends at ``high``.

    So the new files cover the same sequence range the inputs did, and a fixed-bucket writer that
    restores the bucket's maximum continues exactly where it would have.
    """
    counter = low
    for index, entry in enumerate(added):
        record = entry.file.record
        first = min(counter, high)
        last = high if index == len(added) - 1 else min(counter + entry.file.row_count - 1, high)
        record["_MIN_SEQUENCE_NUMBER"] = first
        record["_MAX_SEQUENCE_NUMBER"] = max(first, last)
        counter += entry.file.row_count


# -- committing ----------------------------------------------------------------------------------


def commit_data_compaction(
    table: Table,
    plan: DataCompactionPlan,
    rewritten: Sequence[Sequence[ManifestEntry]],
    *,
    committer: Committer | None = None,
    started: float | None = None,
) -> DataCompactionResult:
    """Commit the rewritten groups (aligned with ``plan.groups``) as one COMPACT snapshot.

    DELETE entries of every planned file plus the ADD entries of the new files. The committer checks
    conflicts against the latest snapshot: a planned file that is no longer live refuses the commit
    (:class:`~airflow_lakeformat.core.errors.CommitConflictError`), and nothing is published.
    """
    started = time.monotonic() if started is None else started
    if len(rewritten) != len(plan.groups):
        raise ValueError(f"{len(rewritten)} rewritten groups for a plan of {len(plan.groups)}")
    added = [entry for group in rewritten for entry in group]
    if not plan.groups:
        return _result(plan, False, None, added, started)
    deletes = [entry.to_delete() for group in plan.groups for entry in group.entries]
    if any(e.kind is not FileKind.ADD for e in added):
        raise ValueError("rewritten entries must be ADD entries")
    committer = committer or Committer(table, f"lakeformat-compact-data-{uuid.uuid4()}")
    result = committer.commit(
        [*deletes, *added], kind=CommitKind.COMPACT, commit_identifier=BATCH_COMMIT_IDENTIFIER
    )
    return _result(plan, False, result.snapshot.id, added, started)


def _result(
    plan: DataCompactionPlan,
    dry_run: bool,
    snapshot_id: int | None,
    added: Sequence[ManifestEntry],
    started: float,
) -> DataCompactionResult:
    return DataCompactionResult(
        dry_run=dry_run,
        snapshot_before=plan.snapshot_id,
        snapshot_id=snapshot_id,
        groups=len(plan.groups),
        files_rewritten=plan.files_to_rewrite,
        files_written=len(added),
        bytes_rewritten=plan.bytes_to_rewrite,
        bytes_written=sum(e.file.file_size for e in added),
        rows_rewritten=sum(g.rows for g in plan.groups),
        duration_seconds=time.monotonic() - started,
    )


def dry_run_result(plan: DataCompactionPlan, started: float | None = None) -> DataCompactionResult:
    """What a dry run reports: the plan's groups and inputs, nothing written or committed."""
    return _result(plan, True, None, [], time.monotonic() if started is None else started)


def compact_data(
    table: Table,
    *,
    dry_run: bool = False,
    partitions: Sequence[Mapping[str, str | None]] | None = None,
    min_file_count: int | None = None,
    target_file_size: int | None = None,
    committer: Committer | None = None,
) -> DataCompactionResult:
    """Plan, rewrite every group in this process and commit one COMPACT snapshot (driver-side mode)."""
    started = time.monotonic()
    plan = plan_data_compaction(
        table, partitions=partitions, min_file_count=min_file_count, target_file_size=target_file_size
    )
    if dry_run:
        return dry_run_result(plan, started)
    rewritten = [rewrite_group(table, g, target_file_size=plan.target_file_size) for g in plan.groups]
    return commit_data_compaction(table, plan, rewritten, committer=committer, started=started)
