"""The plan of a primary-key compaction: per (partition, bucket), what is upgraded and what is merged.

Against the latest snapshot (Java's ``MergeTreeCompactManager#triggerCompaction`` per bucket, the
``compact`` procedure for the whole table):

1. the live ADD entries (``live_files.live_entries``), optionally only of some partitions, grouped by
   (partition, bucket); the table and file refusals of :mod:`.refusals` run before anything else;
2. per bucket, the sorted runs (``levels.level_sorted_runs``, level-0 files newest first) and the number
   of levels (``num-levels`` or trigger + 1, widened to the highest level present, as ``Levels`` restores
   a bucket: a file above ``num-levels - 1`` makes its level the max);
3. the unit: in ``full`` mode ``CompactStrategy#pickFullCompaction`` (every run to the max level unless the
   bucket is one max-level run already), in ``minor`` mode Paimon's ``UniversalCompaction`` pick
   (``universal.pick_minor``);
4. ``dropDelete = output level != 0 and output level >= highest non-empty level``; the unit cut into
   actions (``universal.unit_actions``, ``MergeTreeCompactTask#doCompact``): big files of one-run sections
   are upgraded (same file, new level), everything else is merged section by section and written at the
   output level, rolled at ``target-file-size`` (128 MiB for primary-key tables unless set).

A plan is a value: :meth:`PrimaryKeyCompactionPlan.to_json` and ``summary()``; planning writes nothing. Each
bucket records the identities live when planned and ``M``, the largest sequence number of its inputs, for
the commit's validation (:mod:`.commit`).

Example:
    >>> plan = plan_primary_key_compaction(table, mode="full")  # doctest: +SKIP
    >>> plan.summary()  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.manifest import ManifestEntry
from airflow_lakeformat.core.paimon.merge_tree import refusals
from airflow_lakeformat.core.paimon.merge_tree.kv_read import miscounted_deletes_check, retraction_check
from airflow_lakeformat.core.paimon.merge_tree.levels import (
    KeyOrder,
    level_sorted_runs,
    non_empty_highest_level,
    num_levels,
    schema_key_order,
)
from airflow_lakeformat.core.paimon.merge_tree.universal import (
    CompactionOptions,
    Rewrite,
    Upgrade,
    drop_delete,
    pick_full,
    pick_minor,
    unit_actions,
)
from airflow_lakeformat.core.paimon.paths import PartitionCodec, PartitionFilter
from airflow_lakeformat.core.paimon.summary import target_file_size as table_target_file_size
from airflow_lakeformat.core.paimon.table import Table


@dataclass(frozen=True)
class BucketPlan:
    """One (partition, bucket)'s unit: files upgraded, sections merged, the output level.

    ``rewrites`` holds one tuple per rewrite (one rolling output), of sections (files whose key ranges
    overlap), in key order. ``inputs`` are every file the unit deletes: the rewritten and the upgraded ones.
    """

    partition: bytes
    bucket: int
    total_buckets: int | None
    partition_spec: dict[str, Any]
    max_level: int
    output_level: int
    drop_deletes: bool
    upgrades: tuple[ManifestEntry, ...]
    rewrites: tuple[tuple[tuple[ManifestEntry, ...], ...], ...]
    runs_before: int
    runs_after: int
    known: frozenset[tuple[Any, ...]] = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[bytes, int]:
        return (self.partition, self.bucket)

    @property
    def rewritten(self) -> list[ManifestEntry]:
        return [e for rewrite in self.rewrites for section in rewrite for e in section]

    @property
    def inputs(self) -> list[ManifestEntry]:
        return [*self.rewritten, *self.upgrades]

    @property
    def max_sequence_number(self) -> int:
        return max((e.file.max_sequence_number for e in self.inputs), default=-1)

    @property
    def label(self) -> str:
        return (
            f"partition {self.partition_spec} bucket {self.bucket}"
            if self.partition_spec
            else (f"bucket {self.bucket}")
        )

    def to_json(self) -> dict[str, Any]:
        rewritten = self.rewritten
        return {
            "partition": self.partition_spec,
            "bucket": self.bucket,
            "outputLevel": self.output_level,
            "maxLevel": self.max_level,
            "dropDeletes": self.drop_deletes,
            "sortedRunsBefore": self.runs_before,
            "sortedRunsAfter": self.runs_after,
            "filesRewritten": [e.file.file_name for e in rewritten],
            "filesUpgraded": [e.file.file_name for e in self.upgrades],
            "rowsRewritten": sum(e.file.row_count for e in rewritten),
            "bytesRewritten": sum(e.file.file_size for e in rewritten),
        }


@dataclass(frozen=True)
class PrimaryKeyCompactionPlan:
    """What a primary-key compaction will do, against one snapshot."""

    table: str
    mode: str
    snapshot_id: int | None
    schema_id: int
    target_file_size: int
    live_files: int
    buckets: int  # buckets looked at
    units: tuple[BucketPlan, ...]

    @property
    def files_to_rewrite(self) -> int:
        return sum(len(u.rewritten) for u in self.units)

    @property
    def files_to_upgrade(self) -> int:
        return sum(len(u.upgrades) for u in self.units)

    @property
    def bytes_to_rewrite(self) -> int:
        return sum(e.file.file_size for u in self.units for e in u.rewritten)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "mode": self.mode,
            "snapshotId": self.snapshot_id,
            "schemaId": self.schema_id,
            "targetFileSize": self.target_file_size,
            "liveFiles": self.live_files,
            "buckets": self.buckets,
            "units": [u.to_json() for u in self.units],
            "filesToRewrite": self.files_to_rewrite,
            "filesToUpgrade": self.files_to_upgrade,
            "bytesToRewrite": self.bytes_to_rewrite,
        }

    def summary(self) -> str:
        """One line: how many buckets, files and bytes the plan touches."""
        if not self.units:
            return f"{self.table}: {self.mode} primary-key compaction: nothing to compact ({self.buckets} buckets)"
        return (
            f"{self.table}: {self.mode} primary-key compaction of {len(self.units)} of {self.buckets} buckets: "
            f"rewrite {self.files_to_rewrite} files ({self.bytes_to_rewrite} bytes), upgrade {self.files_to_upgrade}"
        )


def plan_primary_key_compaction(
    table: Table,
    *,
    mode: str = "minor",
    partitions: Sequence[Mapping[str, str | None]] | None = None,
    target_file_size: int | None = None,
) -> PrimaryKeyCompactionPlan:
    """Plan a full or minor compaction of every bucket of a primary-key table; writes nothing.

    Args:
        table: a primary-key table.
        mode: ``"full"`` (every bucket to one max-level run) or ``"minor"`` (Paimon's universal pick).
        partitions: only partitions matching one of these specs, by value (``[{"dt": "2024-01-01"}]``).
        target_file_size: bytes per output file (default: the table's ``target-file-size``, else 128 MiB).

    Raises:
        UnsupportedFormatError: a table or file this compaction cannot handle (:mod:`.refusals`: changelog
            producers, deletion vectors, ``bucket=-2``, non-Parquet or external files; exit code 5).
        MaintenanceRefusedError: a merge option not implemented or a merge Paimon would fail on
            (``MergeSpec``), a file of an older schema with other fields, two records of a key with one
            sequence (``AmbiguousSequenceError``); exit code 9.

    Example:
        >>> plan_primary_key_compaction(table, mode="full").to_json()["units"]  # doctest: +SKIP
    """
    from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

    refusals.check_table(table, mode)
    schema = table.schema
    spec = MergeSpec.from_schema(schema, table.uri)  # refuses merge options it does not implement
    target = target_file_size or table_target_file_size(table)
    if target <= 0:
        raise ValueError(f"target file size must be positive, not {target}")
    opts = dataclasses.replace(CompactionOptions.from_options(schema.table_options), target_file_size=target)
    codec = PartitionCodec(schema)
    matches = PartitionFilter(codec, partitions, table.uri)
    latest = table.snapshot_manager.latest_snapshot()
    entries = live_entries(table, latest) if latest is not None else []
    by_bucket: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    totals: dict[bytes, set[int | None]] = {}
    for entry in entries:
        if matches(entry.partition):
            by_bucket.setdefault((entry.partition, entry.bucket), []).append(entry)
            totals.setdefault(entry.partition, set()).add(entry.total_buckets)
    refusals.check_total_buckets(table, totals, codec.to_json)
    order = schema_key_order(schema)
    units: list[BucketPlan] = []
    for (partition, bucket), files in sorted(
        by_bucket.items(), key=lambda kv: (codec.path(kv[0][0]), kv[0][1])
    ):
        refusals.check_bucket_files(table, files)
        unit = _plan_bucket(partition, bucket, files, mode, opts, order, table, codec)
        if unit is not None:
            refusals.check_first_row_output(table, spec.engine, unit.output_level, unit.max_level, unit.label)
            refusals.check_output_format(table, unit.output_level)
            units.append(unit)
    return PrimaryKeyCompactionPlan(
        table=table.uri,
        mode=mode,
        snapshot_id=latest.id if latest else None,
        schema_id=schema.id,
        target_file_size=target,
        live_files=len(entries),
        buckets=len(by_bucket),
        units=tuple(units),
    )


def _plan_bucket(
    partition: bytes,
    bucket: int,
    entries: list[ManifestEntry],
    mode: str,
    opts: CompactionOptions,
    order: KeyOrder,
    table: Table,
    codec: PartitionCodec,
) -> BucketPlan | None:
    by_name = {e.file.file_name: e for e in entries}
    files = [e.file for e in entries]
    levels = num_levels(table.schema.table_options, files)
    runs = level_sorted_runs(files, order)
    unit = pick_full(levels, runs, opts) if mode == "full" else pick_minor(levels, runs, opts)
    if unit is None:
        return None
    max_level = levels - 1
    drop = drop_delete(unit.output_level, non_empty_highest_level(files))
    check = retraction_check(table, table.schema, by_name)  # pypaimon records 0 deletes for -D files
    actions = unit_actions(
        unit,
        order,
        max_level=max_level,
        drop_deletes=drop,
        opts=opts,
        may_hold_deletes=check,
        miscounts_deletes=miscounted_deletes_check(table, table.schema, by_name),
    )
    upgrades = tuple(by_name[a.file.file_name] for a in actions if isinstance(a, Upgrade))
    rewrites = tuple(
        tuple(tuple(by_name[f.file_name] for run in section for f in run.files) for section in a.sections)
        for a in actions
        if isinstance(a, Rewrite)
    )
    if not upgrades and not rewrites:
        return None
    in_unit = {f.file_name for f in unit.files}
    rest = [f for f in files if f.file_name not in in_unit]
    after_levels = {f.level for f in rest if f.level > 0} | {unit.output_level}
    total = next((e.total_buckets for e in entries if e.total_buckets is not None), None)
    return BucketPlan(
        partition=partition,
        bucket=bucket,
        total_buckets=total,
        partition_spec=codec.to_json(partition),
        max_level=max_level,
        output_level=unit.output_level,
        drop_deletes=drop,
        upgrades=upgrades,
        rewrites=rewrites,
        runs_before=len(runs),
        runs_after=sum(1 for f in rest if f.level == 0) + len(after_levels),
        known=frozenset(e.identifier() for e in entries),
    )
