"""Paimon's manifest merge policy as a pure function over manifest metas.

This follows ``ManifestFileLegacyMerger`` (Paimon master; ``ManifestFileMerger`` in 2.0). The
block-copying ``ManifestFileBlockMerger`` applies the same policy. A merge first tries a **full
compaction**, then a **minor** one:

* Full (``tryFullCompaction``). A manifest *must change* if it has DELETE entries or is smaller
  than the target size. If those manifests total less than the threshold, there is no full
  compaction. Otherwise every DELETE identity of the input is collected. Manifests that need not
  change and cannot hold a deleted file pass through untouched. That is all of them when nothing
  is deleted; when the table is partitioned, it is those whose partition stats exclude every
  deleted partition. The rest are read and only their ADD entries whose identity was not deleted
  are kept. A manifest that need not change and lost nothing passes through; the others go through
  one rolling writer. The input is the complete base + delta, so every DELETE has met its ADD and
  none is written: this is the only place where DELETEs are dropped. If at most one manifest is
  left to merge, the full compaction is skipped.
* Minor (``compactMinor``). Walk the manifests in order, collecting them into a group until the
  group's size reaches the target. Then fold the group with ``FileEntry.mergeEntries`` (ADD and
  DELETE pairs cancel, unmatched DELETEs are **kept**, a second ADD is an error) and write the
  result in its place. A one-manifest group stays as it is, and a group that folds to nothing
  leaves no manifest. The group left at the end is merged only if it has at least
  ``merge_min_count`` manifests.

Result order is Java's. Minor keeps every group where it was. Full returns the untouched
manifests, then the ones that were read but passed through, then the new files; no DELETE
remains, so order no longer matters.

One deliberate difference from Java: Java's full compaction drops *every* ADD whose identity is
deleted anywhere. If a file was added again after its DELETE (Paimon never does that), the fold
(``mergeEntries``) would still see it live, and Java would lose it. Here an ADD is dropped only if a
DELETE of its identity comes after it in list order, so the merged list always folds to the same
live files as the input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry, ManifestFileMeta, merge_entries
from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, DataType

MergeMode = Literal["none", "minor", "full"]
ReadManifest = Callable[[ManifestFileMeta], list[ManifestEntry]]
WriteManifests = Callable[[Iterable[ManifestEntry]], list[ManifestFileMeta]]
MayContain = Callable[[ManifestFileMeta, bytes], bool]


@dataclass(frozen=True)
class ManifestMergeResult:
    manifests: list[ManifestFileMeta]
    """The merged manifest list, in order. Untouched metas are the input objects themselves."""
    written: list[ManifestFileMeta]
    """New manifest files this merge wrote (delete them if the commit using them fails)."""
    rewritten: list[ManifestFileMeta]
    """Input manifests that the merged list no longer references."""
    mode: MergeMode

    @property
    def changed(self) -> bool:
        return self.mode != "none"


def merge_manifests(
    manifests: Sequence[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    *,
    target_file_size: int,
    full_compaction_threshold: int,
    merge_min_count: int,
    partitioned: bool,
    partition_stats_may_contain: MayContain | None = None,
) -> ManifestMergeResult:
    """Merge a snapshot's complete manifest list (base + delta) with Paimon's policy.

    ``read(meta)`` returns a manifest's entries in file order. ``write(entries)`` writes entries,
    in order, into one or more new manifests rolled at about the target size and returns their
    metas (:class:`~airflow_lakeformat.core.paimon.manifest_writer.RollingManifestWriter` does). It may be
    given a lazy iterable. Entries carry their Avro records, so a ``write`` whose schema includes
    the inputs' extra fields keeps them.

    ``partition_stats_may_contain(meta, partition)`` says whether a manifest's partition stats
    allow it to hold entries of ``partition`` (e.g. :func:`partition_may_contain` with the
    table's partition types bound). Without it, a partitioned table's full compaction reads
    every manifest to find out; ones that lose nothing still pass through. Slower, same result.

    The forced merge of ``compact_manifest`` is ``merge_min_count=1, full_compaction_threshold=1``.

    Raises :class:`~airflow_lakeformat.core.errors.DuplicateFileError` if a minor group adds a
    file twice. Files already written by then are in the caller's writer (see
    ``RollingManifestWriter.written``).
    """
    if full_compaction_threshold <= 0:
        raise ValueError("manifest full compaction threshold must be positive")
    inputs = list(manifests)
    result = _try_full_compaction(
        inputs,
        read,
        write,
        target_file_size,
        full_compaction_threshold,
        partitioned,
        partition_stats_may_contain,
    )
    if result is not None:
        return result
    return _minor_compaction(inputs, read, write, target_file_size, merge_min_count)


def must_change(meta: ManifestFileMeta, target_file_size: int) -> bool:
    """Java's full-compaction ``mustChange`` filter: has DELETEs or is below the target size."""
    return meta.num_deleted_files > 0 or meta.file_size < target_file_size


def _finish(
    inputs: list[ManifestFileMeta],
    merged: list[ManifestFileMeta],
    written: list[ManifestFileMeta],
    mode: MergeMode,
) -> ManifestMergeResult:
    kept = {id(m) for m in merged}
    rewritten = [m for m in inputs if id(m) not in kept]
    if not written and not rewritten:
        mode = "none"
    return ManifestMergeResult(merged, written, rewritten, mode)


# -- full compaction -------------------------------------------------------------------------------


def _try_full_compaction(
    inputs: list[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    target: int,
    threshold: int,
    partitioned: bool,
    may_contain: MayContain | None,
) -> ManifestMergeResult | None:
    changing = [must_change(m, target) for m in inputs]
    if sum(m.file_size for m, c in zip(inputs, changing, strict=True) if c) < threshold:
        return None

    # Every DELETE of the input, with the position of the last DELETE of each identity.
    read_cache: dict[int, list[ManifestEntry]] = {}
    last_delete: dict[tuple[Any, ...], tuple[int, int]] = {}
    for i, meta in enumerate(inputs):
        if meta.num_deleted_files > 0:
            entries = read_cache[i] = read(meta)
            for j, entry in enumerate(entries):
                if entry.kind is FileKind.DELETE:
                    last_delete[entry.identifier()] = (i, j)
    deleted_partitions = list(dict.fromkeys(key[0] for key in last_delete))

    def may_hold_deleted(meta: ManifestFileMeta) -> bool:
        if not last_delete:
            return False  # Java: PartitionPredicate.ALWAYS_FALSE
        if not partitioned or may_contain is None:
            return True  # Java: ALWAYS_TRUE for unpartitioned tables
        return any(may_contain(meta, p) for p in deleted_partitions)

    merged: list[ManifestFileMeta] = []
    to_merge: list[int] = []
    for i, meta in enumerate(inputs):
        if not changing[i] and not may_hold_deleted(meta):
            merged.append(meta)
        else:
            to_merge.append(i)
    if len(to_merge) <= 1:
        return None

    passed_through: list[ManifestFileMeta] = []

    def surviving_adds() -> Iterator[ManifestEntry]:
        for i in to_merge:
            meta = inputs[i]
            entries = read_cache.pop(i) if i in read_cache else read(meta)
            kept: list[ManifestEntry] = []
            dropped = False
            for j, entry in enumerate(entries):
                if entry.kind is not FileKind.ADD:
                    if meta.num_deleted_files == 0:
                        # Its DELETEs were not collected, so dropping them could revive files.
                        raise CorruptMetadataError(
                            meta.file_name, "holds DELETE entries but its meta says _NUM_DELETED_FILES = 0"
                        )
                    continue
                deleted_at = last_delete.get(entry.identifier())
                if deleted_at is not None and deleted_at > (i, j):
                    dropped = True
                else:
                    kept.append(entry)
            if changing[i] or dropped:
                yield from kept
            else:
                passed_through.append(meta)

    written = write(surviving_adds())
    merged.extend(passed_through)
    merged.extend(written)
    return _finish(inputs, merged, list(written), "full")


# -- minor compaction ------------------------------------------------------------------------------


def _minor_compaction(
    inputs: list[ManifestFileMeta], read: ReadManifest, write: WriteManifests, target: int, min_count: int
) -> ManifestMergeResult:
    merged: list[ManifestFileMeta] = []
    written: list[ManifestFileMeta] = []

    def merge_group(group: list[ManifestFileMeta]) -> None:
        if len(group) <= 1:
            merged.extend(group)
            return
        folded: dict[tuple[Any, ...], ManifestEntry] = {}
        for meta in group:
            merge_entries(read(meta), folded)
        if folded:
            new = write(list(folded.values()))
            merged.extend(new)
            written.extend(new)

    group: list[ManifestFileMeta] = []
    size = 0
    for meta in inputs:
        group.append(meta)
        size += meta.file_size
        if size >= target:
            merge_group(group)
            group, size = [], 0
    if group and len(group) >= min_count:
        merge_group(group)
    else:
        merged.extend(group)
    return _finish(inputs, merged, written, "minor")


# -- partition pruning by manifest stats -----------------------------------------------------------


@lru_cache(maxsize=4096)
def _decode(data: bytes, types: tuple[DataType, ...]) -> tuple[Any, ...]:
    return tuple(binary_row.decode(data, types))


def partition_may_contain(meta: ManifestFileMeta, partition: bytes, types: Sequence[DataType]) -> bool:
    """Whether ``meta``'s ``_PARTITION_STATS`` allow it to hold entries of ``partition``.

    Checks each field against the column-wise min/max, and a null value against the null count.
    It answers True whenever it cannot be sure: undecodable or narrower stats, unknown null counts,
    all-null ranges, NaN, and binary fields (Java may order bytes differently). A wrong False would
    let a full compaction keep a manifest whose deleted files it should drop.
    """
    if not types:
        return True
    key = tuple(types)
    try:
        stats = meta.partition_stats
        values = _decode(partition, key)
        mins = _decode(stats.min_values, key)
        maxs = _decode(stats.max_values, key)
    except Exception:  # malformed rows, unsupported types: keep the manifest in play
        return True
    arity = len(key)
    if not (len(values) == len(mins) == len(maxs) == arity):
        return True
    null_counts = stats.null_counts
    if null_counts is None or len(null_counts) != arity:
        null_counts = [None] * arity
    for value, low, high, nulls, dtype in zip(values, mins, maxs, null_counts, key, strict=True):
        if value is None:
            if nulls == 0:
                return False
            continue
        if low is None or high is None or dtype.root in BINARY_ROOTS:
            continue
        if any(isinstance(v, float) and math.isnan(v) for v in (value, low, high)):
            continue
        try:
            if value < low or value > high:
                return False
        except TypeError:
            continue
    return True
