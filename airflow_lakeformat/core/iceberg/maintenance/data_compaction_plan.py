"""Which data files an Iceberg data compaction rewrites, in which groups: Java's bin-pack planner, step by step.

Follows ``BinPackRewriteFilePlanner`` and ``SizeBasedFileRewritePlanner`` of Java Iceberg 1.10.2 (the planner of
``rewrite_data_files``, apache/iceberg #12493), on values: the caller scans the starting snapshot and hands over
one :class:`CompactionCandidate` per live data file with the deletes that apply to it. Then:

1. **Group by partition**: files of the current spec by their partition tuple; files of any other spec all under
   the current spec's all-null tuple (their rows may span several current partitions). A current-spec file whose
   partition values are all null lands in that same group, as in Java.
2. **Select files** (skipped with ``rewrite-all``): a file is a candidate when its size is outside
   [min-file-size-bytes, max-file-size-bytes] (strict), when ``delete-file-threshold`` or more deletes apply to
   it, or when its file-scoped deletes remove at least ``delete-ratio-threshold`` of its rows.
3. **Bin-pack** each partition's candidates next-fit (lookback 1) into groups of at most
   ``max-file-group-size-bytes``; a file larger than that gets a group of its own.
4. **Select groups** (skipped with ``rewrite-all``): a group is kept with more than one file and at least
   ``min-input-files`` files, or more than one file and more than the target's bytes, or more bytes than
   ``max-file-size-bytes``, or a member selected for its deletes. A lone small file is never rewritten.
5. **Limit** to ``max-files-to-rewrite`` files (groups in plan order, the last one cut), then order the groups by
   ``rewrite-job-order``. Unlike Java 1.10.2 (#15576, fixed in 1.11.0) a cut group's sizing is computed from the
   files it keeps.

Each group carries Java's sizing: the expected number of output files and the read split size. With
``strategy=sort`` selection and grouping are the same (Java's ``SparkShufflingDataRewritePlanner`` extends the
bin-pack planner); only the expected output files are computed on the group's bytes times ``compression-factor``
(at least 1), and the group carries the sort keys its rewrite sorts by.

Example:
    >>> from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
    >>> small = [CompactionCandidate(f"f{i}.parquet", 0, ("a",), 100, 10) for i in range(5)]
    >>> [len(g.files) for g in plan_file_groups(small, current_spec_id=0, options=CompactionOptions())]
    [5]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_sort import SortKey

DeleteContent = Literal["position", "equality", "deletion-vector"]
# Java's inputSplitSize adds the file-open cost it sets for the read (5 KiB) to each split.
SPLIT_OVERHEAD = 5 * 1024


@dataclass(frozen=True)
class AttachedDelete:
    """A delete file (or deletion vector) that applies to a data file at the starting snapshot."""

    path: str
    content: DeleteContent
    record_count: int
    # Position deletes naming one data file (referenced_data_file set, or equal file_path bounds) and
    # deletion vectors; only these count towards the delete ratio, as in Java.
    file_scoped: bool


@dataclass(frozen=True)
class CompactionCandidate:
    """One live data file of the starting snapshot, as the planner needs it."""

    path: str
    spec_id: int
    partition: tuple[Any, ...]
    file_size: int
    record_count: int
    deletes: tuple[AttachedDelete, ...] = ()


@dataclass(frozen=True)
class FileGroup:
    """Files of one partition key rewritten together, with Java's sizing of the output."""

    partition: tuple[Any, ...]
    files: tuple[CompactionCandidate, ...]
    reasons: dict[str, int] = field(default_factory=dict)
    expected_output_files: int = 1
    split_size: int = 0
    # the sort strategy's keys (data_compaction_sort); empty for bin-pack
    sort_keys: tuple[SortKey, ...] = ()

    @property
    def input_bytes(self) -> int:
        return sum(f.file_size for f in self.files)

    @property
    def input_records(self) -> int:
        return sum(f.record_count for f in self.files)

    @property
    def delete_files(self) -> tuple[str, ...]:
        """The distinct delete files applied while rewriting this group, in first-seen order."""
        return tuple(dict.fromkeys(d.path for f in self.files for d in f.deletes))

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": list(self.partition),
            "files": len(self.files),
            "inputBytes": self.input_bytes,
            "inputRecords": self.input_records,
            "deleteFiles": len(self.delete_files),
            "expectedOutputFiles": self.expected_output_files,
            "splitSize": self.split_size,
            "reasons": dict(self.reasons),
            "paths": [f.path for f in self.files],
        }


def expected_output_files(group_bytes: int, options: CompactionOptions) -> int:
    """Java's ``expectedOutputFiles``: how many target-size files a group's bytes make.

    Example:
        >>> mib = 1024 * 1024
        >>> [expected_output_files(n * mib, CompactionOptions()) for n in (100, 560, 600, 1100, 1300, 10340)]
        [1, 1, 2, 2, 3, 20]
    """
    target = options.target_file_size_bytes
    if group_bytes < target:
        return 1
    ceil_files = math.ceil(group_bytes / target)
    floor_files = group_bytes // target
    if group_bytes % target > options.min_file_size_bytes:
        return ceil_files
    if group_bytes // floor_files < min(1.1 * target, options.write_max_file_size):
        return floor_files
    return ceil_files


def input_split_size(group_bytes: int, options: CompactionOptions) -> int:
    """Java's ``inputSplitSize``: bytes read per output file, at least the target, at most the roll-over size."""
    estimated = group_bytes // expected_output_files(group_bytes, options) + SPLIT_OVERHEAD
    return min(max(estimated, options.target_file_size_bytes), options.write_max_file_size)


def partition_key(
    candidate: CompactionCandidate, current_spec_id: int, partition_arity: int
) -> tuple[Any, ...]:
    """The current spec's partition tuple; any other spec's files all share the all-null tuple."""
    if candidate.spec_id == current_spec_id:
        return candidate.partition
    return (None,) * partition_arity


def group_by_partition(
    candidates: Iterable[CompactionCandidate], current_spec_id: int, partition_arity: int
) -> dict[tuple[Any, ...], list[CompactionCandidate]]:
    """Step 1: candidates per partition key, partitions and files in scan order."""
    groups: dict[tuple[Any, ...], list[CompactionCandidate]] = {}
    for candidate in candidates:
        groups.setdefault(partition_key(candidate, current_spec_id, partition_arity), []).append(candidate)
    return groups


def too_many_deletes(candidate: CompactionCandidate, options: CompactionOptions) -> bool:
    return len(candidate.deletes) >= options.delete_file_threshold


def too_high_delete_ratio(candidate: CompactionCandidate, options: CompactionOptions) -> bool:
    """File-scoped deletes remove at least the threshold's share of the file's rows (0 rows: never, Java's NaN)."""
    if not candidate.deletes or candidate.record_count <= 0:
        return False
    deleted = sum(d.record_count for d in candidate.deletes if d.file_scoped)
    return min(deleted, candidate.record_count) / candidate.record_count >= options.delete_ratio_threshold


def selection_reason(candidate: CompactionCandidate, options: CompactionOptions) -> str | None:
    """Step 2 for one file: why it is a candidate (Java's order of checks), or None."""
    if candidate.file_size < options.min_file_size_bytes:
        return "too-small"
    if candidate.file_size > options.max_file_size_bytes:
        return "too-large"
    if too_many_deletes(candidate, options):
        return "too-many-deletes"
    if too_high_delete_ratio(candidate, options):
        return "high-delete-ratio"
    return None


def bin_pack(files: Sequence[CompactionCandidate], max_group_bytes: int) -> list[list[CompactionCandidate]]:
    """Step 3: next-fit packing (Java's ``ListPacker`` with lookback 1), in the given order."""
    bins: list[list[CompactionCandidate]] = []
    weight = 0
    for candidate in files:
        if bins and weight + candidate.file_size <= max_group_bytes:
            bins[-1].append(candidate)
            weight += candidate.file_size
        else:
            bins.append([candidate])
            weight = candidate.file_size
    return bins


def keep_group(files: Sequence[CompactionCandidate], options: CompactionOptions) -> bool:
    """Step 4: whether a packed group is worth a rewrite (Java's ``filterFileGroups``)."""
    if options.rewrite_all:
        return True
    count = len(files)
    size = sum(f.file_size for f in files)
    enough_files = count > 1 and count >= options.min_input_files
    enough_content = count > 1 and size > options.target_file_size_bytes
    too_much_content = size > options.max_file_size_bytes
    has_deletes_to_purge = any(
        too_many_deletes(f, options) or too_high_delete_ratio(f, options) for f in files
    )
    return enough_files or enough_content or too_much_content or has_deletes_to_purge


def _make_group(
    partition: tuple[Any, ...], files: Sequence[CompactionCandidate], options: CompactionOptions
) -> FileGroup:
    reasons: dict[str, int] = {}
    for candidate in files:
        reason = "rewrite-all" if options.rewrite_all else selection_reason(candidate, options) or "in-group"
        reasons[reason] = reasons.get(reason, 0) + 1
    size = sum(f.file_size for f in files)
    # Java's SparkShufflingDataRewritePlanner: a sort's output estimate is on the bytes times compression-factor
    output_bytes = int(size * options.compression_factor) if options.strategy == "sort" else size
    return FileGroup(
        partition=partition,
        files=tuple(files),
        reasons=reasons,
        expected_output_files=max(1, expected_output_files(output_bytes, options)),
        split_size=input_split_size(size, options),
    )


def limit_files(groups: list[FileGroup], options: CompactionOptions) -> list[FileGroup]:
    """Step 5a: at most ``max-files-to-rewrite`` files, groups in plan order, the last one cut."""
    limit = options.max_files_to_rewrite
    if limit is None:
        return groups
    kept: list[FileGroup] = []
    remaining = limit
    for group in groups:
        if remaining <= 0:
            break
        if len(group.files) <= remaining:
            kept.append(group)
        else:
            kept.append(_make_group(group.partition, group.files[:remaining], options))
        remaining -= len(kept[-1].files)
    return kept


def order_groups(groups: list[FileGroup], options: CompactionOptions) -> list[FileGroup]:
    """Step 5b: Java's ``rewrite-job-order`` (``none`` keeps plan order)."""
    order = options.rewrite_job_order
    if order == "none":
        return groups
    by_bytes = order.startswith("bytes")
    descending = order.endswith("desc")
    return sorted(groups, key=lambda g: g.input_bytes if by_bytes else len(g.files), reverse=descending)


def plan_file_groups(
    candidates: Iterable[CompactionCandidate],
    *,
    current_spec_id: int,
    options: CompactionOptions,
    partition_arity: int | None = None,
) -> list[FileGroup]:
    """Steps 1 to 5: the groups a compaction rewrites, each with its sizing.

    Args:
        candidates: every live data file of the starting snapshot (after the partition filter), in scan order,
            each with the deletes that apply to it.
        current_spec_id: the table's default spec id (files of other specs are grouped together).
        options: Java's options (:class:`CompactionOptions`).
        partition_arity: the number of the current spec's partition fields; taken from a current-spec file when
            omitted (0 when there is none).

    Returns:
        The groups to rewrite, in execution order; empty when nothing is worth a rewrite.
    """
    candidates = list(candidates)
    if partition_arity is None:
        arity = next((len(c.partition) for c in candidates if c.spec_id == current_spec_id), 0)
    else:
        arity = partition_arity
    groups: list[FileGroup] = []
    for partition, files in group_by_partition(candidates, current_spec_id, arity).items():
        selected = files if options.rewrite_all else [f for f in files if selection_reason(f, options)]
        for packed in bin_pack(selected, options.max_file_group_size_bytes):
            if keep_group(packed, options):
                groups.append(_make_group(partition, packed, options))
    return order_groups(limit_files(groups, options), options)
