"""The run of a primary-key compaction: plan, merge each bucket, commit one COMPACT snapshot.

Java's ``compact`` procedure (``compact_strategy`` ``full`` or ``minor``) done in this process:

1. :func:`~.plan.plan_primary_key_compaction` refuses what cannot be compacted safely (:mod:`.refusals`,
   the merge options ``MergeSpec`` does not implement) and plans every (partition, bucket); a dry run
   stops here and writes nothing;
2. buckets are compacted one at a time: upgraded files become ADD entries of the same file at the output
   level; each rewrite reads its sections one at a time (``kv_files.read_kv`` per file), merges a section
   with the table's merge engine (``merge_engines.merge_kv``, retractions dropped when ``dropDelete``) and
   streams the merged sections into ``kv_files.write_kv`` at the output level, rolled at the target file
   size. Peak memory is therefore bounded by the largest section of one bucket (with overlapping level-0
   files that is usually the whole bucket) plus one output file's buffer, never by the table;
3. :func:`~.commit.commit_changes` commits every bucket in one COMPACT snapshot, validating each bucket
   before every publish attempt; a bucket that changed under us is dropped and reported in
   ``skippedBuckets`` (its new files discarded), the others are committed. Nothing to compact writes no
   snapshot.

A failure while merging or writing (for example :class:`~airflow_lakeformat.core.errors.AmbiguousSequenceError`)
discards every file written so far, none of them published, and raises; nothing is committed.

Example:
    >>> compact_primary_key_table(table, mode="full").summary()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.maintenance.result_repr import short_repr
from airflow_lakeformat.core.maintenance.results import summary
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.manifest import DataFileMeta, FileKind, ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree.commit import BucketChange, commit_changes, delete_entries
from airflow_lakeformat.core.paimon.merge_tree.plan import (
    BucketPlan,
    PrimaryKeyCompactionPlan,
    plan_primary_key_compaction,
)
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BucketResult:
    """What one bucket's compaction did (or, in a dry run, would do)."""

    unit: BucketPlan
    files_written: int = 0
    rows_written: int = 0
    bytes_written: int = 0
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        rewritten = self.unit.rewritten
        rows_in = sum(e.file.row_count for e in rewritten)
        doc = {
            "partition": self.unit.partition_spec,
            "bucket": self.unit.bucket,
            "outputLevel": self.unit.output_level,
            "dropDeletes": self.unit.drop_deletes,
            "sortedRunsBefore": self.unit.runs_before,
            "sortedRunsAfter": self.unit.runs_after,
            "filesIn": len(rewritten),
            "filesOut": self.files_written,
            "filesUpgraded": len(self.unit.upgrades),
            "rowsIn": rows_in,
            "rowsOut": self.rows_written,
        }
        if self.skipped is not None:
            doc["skipped"] = self.skipped
        return doc


@short_repr
@dataclass
class PrimaryKeyCompactionResult:
    """The outcome of :func:`compact_primary_key_table`: per-bucket counts, the snapshot, skipped buckets."""

    table: str
    mode: str
    dry_run: bool
    snapshot_before: int | None
    snapshot_id: int | None  # the COMPACT snapshot; None for a dry run or when nothing was committed
    buckets: list[BucketResult] = field(default_factory=list)
    deletes_dropped: int = 0
    duration_seconds: float = 0.0

    @property
    def committed(self) -> list[BucketResult]:
        return [b for b in self.buckets if b.skipped is None]

    def to_json(self) -> dict[str, Any]:
        done = self.committed
        rewritten = [e for b in done for e in b.unit.rewritten]
        return {
            "operation": "compact-data",
            "format": "paimon",
            "table": self.table,
            "mode": self.mode,
            "primaryKey": True,
            "dryRun": self.dry_run,
            "snapshotBefore": self.snapshot_before,
            "snapshotId": self.snapshot_id,
            "groups": len(done),
            "filesRewritten": len(rewritten),
            "filesUpgraded": sum(len(b.unit.upgrades) for b in done),
            "filesWritten": sum(b.files_written for b in done),
            "bytesRewritten": sum(e.file.file_size for e in rewritten),
            "bytesWritten": sum(b.bytes_written for b in done),
            "rowsRewritten": sum(e.file.row_count for e in rewritten),
            "rowsWritten": sum(b.rows_written for b in done),
            "deletesDropped": self.deletes_dropped,
            "buckets": [b.to_json() for b in self.buckets],
            "skippedBuckets": [
                {"partition": b.unit.partition_spec, "bucket": b.unit.bucket, "reason": b.skipped}
                for b in self.buckets
                if b.skipped is not None
            ],
            "durationSeconds": round(self.duration_seconds, 3),
        }

    def summary(self) -> str:
        """One line: what was (or would be) compacted, and which buckets were skipped."""
        return summary(self.to_json())


#: Writes a plan's units: ``(table, plan) -> (bucket changes, bucket results, retractions dropped per unit)``.
Rewriter = Callable[
    [Table, PrimaryKeyCompactionPlan], tuple[list[BucketChange], list[BucketResult], list[int]]
]


def compact_primary_key_table(
    table: Table,
    *,
    mode: str = "minor",
    dry_run: bool = False,
    partitions: Sequence[Mapping[str, str | None]] | None = None,
    target_file_size: int | None = None,
    committer: Committer | None = None,
    skip_conflicts: bool = True,
    progress: Progress = NO_PROGRESS,
    rewriter: Rewriter | None = None,
) -> PrimaryKeyCompactionResult:
    """Compact a primary-key table's buckets and commit one COMPACT snapshot.

    Args:
        table: a primary-key table.
        mode: ``"full"`` (every bucket to one run at the max level) or ``"minor"`` (Paimon's universal pick).
        dry_run: plan and report; write and commit nothing.
        partitions: only these partitions, matched by value.
        target_file_size: bytes per output file (default: the table's ``target-file-size``, else 128 MiB).
        committer: commits as this committer's user (default: a new user per run).
        skip_conflicts: a bucket that changed under the compaction is skipped and reported (default);
            False refuses the whole commit with ``CompactionConflictError``.
        progress: receives one step per bucket compacted.
        rewriter: writes the plan's units instead of :func:`rewrite_units` in this process (the Spark job hands
            them to executors); same contract: the bucket changes, their counts and the retractions dropped,
            aligned with ``plan.units``, nothing committed.

    Example:
        >>> compact_primary_key_table(table, mode="full").to_json()["snapshotId"]  # doctest: +SKIP
    """
    started = time.monotonic()
    plan = plan_primary_key_compaction(
        table, mode=mode, partitions=partitions, target_file_size=target_file_size
    )
    if dry_run or not plan.units:
        return _result(plan, dry_run, [BucketResult(u) for u in plan.units], None, 0, started)
    if rewriter is None:
        changes, results, dropped = rewrite_units(table, plan, progress)
    else:
        changes, results, dropped = rewriter(table, plan)
    committer = committer or Committer(table, f"lakeformat-compact-data-{uuid.uuid4()}")
    outcome = commit_changes(table, changes, committer=committer, skip_conflicts=skip_conflicts)
    for (_, bucket), why in outcome.skipped.items():
        log.warning("%s: bucket %s not compacted, it changed meanwhile: %s", table.uri, bucket, why)
    final = [
        BucketResult(
            r.unit, r.files_written, r.rows_written, r.bytes_written, outcome.skipped.get(r.unit.key)
        )
        for r in results
    ]
    snapshot = outcome.snapshot.id if outcome.snapshot is not None else None
    kept = sum(n for r, n in zip(results, dropped, strict=True) if r.unit.key not in outcome.skipped)
    return _result(plan, False, final, snapshot, kept, started)


def rewrite_units(
    table: Table, plan: PrimaryKeyCompactionPlan, progress: Progress = NO_PROGRESS
) -> tuple[list[BucketChange], list[BucketResult], list[int]]:
    """Write every unit of ``plan`` (one bucket at a time); the bucket changes to commit, with counts.

    Every file written is discarded again if any unit fails (none was published), and the error raised.
    """
    changes: list[BucketChange] = []
    results: list[BucketResult] = []
    dropped: list[int] = []
    progress.start(f"compacting {len(plan.units)} buckets", len(plan.units))
    try:
        for unit in plan.units:
            change, result, deletes = rewrite_unit(table, unit, plan.target_file_size)
            changes.append(change)
            results.append(result)
            dropped.append(deletes)
            progress.advance()
    except BaseException:
        _discard(table, [p for c in changes for p in c.written])
        raise
    finally:
        progress.finish()
    return changes, results, dropped


def rewrite_unit(
    table: Table, unit: BucketPlan, target_file_size: int
) -> tuple[BucketChange, BucketResult, int]:
    """Upgrade and rewrite one bucket's unit; nothing is committed.

    Returns:
        The bucket's change (DELETE/ADD entries, validation data), its counts, and the retractions dropped.
    """
    from airflow_lakeformat.core.paimon.merge_tree.kv_files import write_kv

    total = unit.total_buckets if unit.total_buckets is not None else table.schema.table_options.bucket
    written: list[str] = []
    adds: list[ManifestEntry] = [_upgraded(e, unit.output_level) for e in unit.upgrades]
    new_files: list[DataFileMeta] = []
    try:
        for rewrite in unit.rewrites:
            new_files += write_kv(
                table,
                table.schema,
                partition=unit.partition,
                bucket=unit.bucket,
                total_buckets=total,
                level=unit.output_level,
                data=_merged_sections(table, unit, rewrite),
                target_file_size=target_file_size,
                written=written,
            )
    except BaseException:
        _discard(table, written)
        raise
    adds += [ManifestEntry.create(FileKind.ADD, unit.partition, unit.bucket, total, m) for m in new_files]
    retracts_in = sum(e.file.delete_row_count or 0 for e in unit.rewritten)
    retracts_out = sum(m.delete_row_count or 0 for m in new_files)
    change = BucketChange(
        partition=unit.partition,
        bucket=unit.bucket,
        total_buckets=unit.total_buckets,
        deletes=delete_entries(unit.inputs),
        adds=tuple(adds),
        max_sequence_number=unit.max_sequence_number,
        known=unit.known,
        written=tuple(written),
        label=unit.label,
    )
    result = BucketResult(
        unit,
        files_written=len(new_files),
        rows_written=sum(m.row_count for m in new_files),
        bytes_written=sum(m.file_size for m in new_files),
    )
    return change, result, max(0, retracts_in - retracts_out)


def _merged_sections(
    table: Table, unit: BucketPlan, sections: tuple[tuple[ManifestEntry, ...], ...]
) -> Iterator[pa.Table]:
    """Each section read and merged on its own, in key order (sections never overlap)."""
    from airflow_lakeformat.core.paimon.merge_tree.kv_files import read_kv
    from airflow_lakeformat.core.paimon.merge_tree.merge_engines import merge_kv
    from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

    schema = table.schema
    spec = MergeSpec.from_schema(schema, table.uri)
    for section in sections:
        kv = pa.concat_tables([read_kv(table, entry, schema) for entry in section])
        yield merge_kv(kv, spec, drop_deletes=unit.drop_deletes)


def _upgraded(entry: ManifestEntry, level: int) -> ManifestEntry:
    """The ADD of the same file at ``level`` (``DataFileMeta#upgrade``: only the level changes)."""
    if level <= entry.file.level:
        raise ValueError(f"upgrade of {entry.file.file_name} from level {entry.file.level} to {level}")
    record = {**entry.file.record, "_LEVEL": level}
    return ManifestEntry({**entry.record, "_KIND": int(FileKind.ADD), "_FILE": record})


def _discard(table: Table, paths: Sequence[str]) -> None:
    if paths:
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        discard_unpublished(table.io, paths, "data")


def _result(
    plan: PrimaryKeyCompactionPlan,
    dry_run: bool,
    buckets: list[BucketResult],
    snapshot_id: int | None,
    deletes_dropped: int,
    started: float,
) -> PrimaryKeyCompactionResult:
    return PrimaryKeyCompactionResult(
        table=plan.table,
        mode=plan.mode,
        dry_run=dry_run,
        snapshot_before=plan.snapshot_id,
        snapshot_id=snapshot_id,
        buckets=buckets,
        deletes_dropped=deletes_dropped,
        duration_seconds=time.monotonic() - started,
    )
