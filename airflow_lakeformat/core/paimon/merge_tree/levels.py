"""Levels, sorted runs and interval sections of one bucket of a primary-key table (pure functions).

Java: ``mergetree/Levels.java``, ``SortedRun.java``, ``LevelSortedRun.java``, ``compact/IntervalPartition.java``,
``CoreOptions#numLevels``.

* **Number of levels**: the option ``num-levels``, else ``num-sorted-run.compaction-trigger + 1`` (6 by
  default), widened to ``highest level present + 1`` as ``Levels`` does when it restores a bucket. The max
  level is one less.
* **Sorted runs** (``Levels#levelSortedRuns``): every level-0 file is its own run, newest first (max sequence
  number descending, then min sequence number, creation time and file name ascending); then one run per
  non-empty level >= 1, its files ordered by min key.
* **Key order**: min/max keys are serialized BinaryRows of the trimmed primary key. They are compared as
  Java's generated ``RecordComparator`` compares key rows: field by field, nulls first, strings and binaries
  as unsigned bytes, floating point as ``Float.compare``/``Double.compare``, everything else by value.
* **Interval partition** (``IntervalPartition#partition``): files sorted by (min key, max key) are cut into
  *sections* wherever a file's min key is greater than the largest max key seen in the section so far; inside
  a section files are packed greedily into the fewest runs: each file joins the run whose last max key is
  smallest if its min key is greater than that, else it starts a new run. Sections never overlap each other,
  so each is merged on its own; the runs inside one section are ordered by creation here (Java's heap order
  "does not matter" and is not reproduced).

Everything works on :class:`~airflow_lakeformat.core.paimon.manifest.DataFileMeta` of ONE (partition,
bucket); callers keep a file-name -> manifest-entry map (file names are unique within a bucket).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import DataFileMeta
from airflow_lakeformat.core.paimon.options import TableOptions
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, CHARACTER_ROOTS, DataType

DEFAULT_COMPACTION_TRIGGER = 5

KeyOrder = Callable[[bytes], tuple[Any, ...]]


@dataclass(frozen=True)
class SortedRun:
    """Files whose key ranges do not overlap, ordered by key (``SortedRun``)."""

    files: tuple[DataFileMeta, ...]

    @property
    def total_size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True)
class LevelSortedRun:
    """A sorted run and the level it lives at (``LevelSortedRun``)."""

    level: int
    run: SortedRun

    @property
    def total_size(self) -> int:
        return self.run.total_size


# -- key order -------------------------------------------------------------------------------------


def _field_order(dtype: DataType) -> Callable[[Any], Any]:
    root = dtype.root
    if root in CHARACTER_ROOTS:
        return lambda v: v.encode("utf-8")
    if root in BINARY_ROOTS:
        return bytes
    if root in ("FLOAT", "DOUBLE"):
        # Float.compare: -0.0 < 0.0 and NaN above everything (all NaNs equal).
        return lambda v: (1, 0.0, 0.0) if math.isnan(v) else (0, v, math.copysign(1.0, v))
    return lambda v: v


def key_order(key_types: Sequence[DataType]) -> KeyOrder:
    """A sort key for serialized key rows that orders them as Java's key comparator does (nulls first).

    Args:
        key_types: the types of the trimmed primary-key fields, in primary-key order.

    Example::

        >>> order = key_order([parse_type("INT")])
        >>> sorted(keys, key=order)
    """
    types = list(key_types)
    orders = [_field_order(t) for t in types]
    cache: dict[bytes, tuple[Any, ...]] = {}

    def sort_key(row: bytes) -> tuple[Any, ...]:
        found = cache.get(row)
        if found is None:
            values = binary_row.decode(row, types)
            found = tuple(
                (0,) if v is None else (1, order(v)) for v, order in zip(values, orders, strict=False)
            )
            if len(cache) < 1_000_000:
                cache[row] = found
        return found

    return sort_key


def schema_key_order(schema: TableSchema) -> KeyOrder:
    """:func:`key_order` of the schema's trimmed primary key."""
    return key_order([schema.field(name).type for name in schema.trimmed_primary_keys])


# -- levels ----------------------------------------------------------------------------------------


def configured_num_levels(options: TableOptions) -> int:
    """``CoreOptions#numLevels``: ``num-levels``, else ``num-sorted-run.compaction-trigger + 1``."""
    raw = options.get("num-levels")
    if raw is not None:
        return int(raw)
    trigger = options.get("num-sorted-run.compaction-trigger")
    return (int(trigger) if trigger is not None else DEFAULT_COMPACTION_TRIGGER) + 1


def num_levels(options: TableOptions, files: Iterable[DataFileMeta]) -> int:
    """The bucket's number of levels: the configured count widened to ``highest level present + 1``.

    Args:
        options: the table's options.
        files: the bucket's live files.

    Example::

        >>> num_levels(schema.table_options, files)  # 6 with defaults; 8 if a file sits at level 7
        6
    """
    highest = max((f.level for f in files), default=-1)
    count = max(configured_num_levels(options), highest + 1)
    if count < 2:
        # Levels' checkArgument: a merge tree needs level 0 and at least one level above it.
        raise UnsupportedFormatError(
            "num-levels", f"a merge tree needs at least 2 levels, the table gives {count}"
        )
    return count


def non_empty_highest_level(files: Iterable[DataFileMeta]) -> int:
    """``Levels#nonEmptyHighestLevel``: the highest level holding a file, -1 when there is none."""
    return max((f.level for f in files), default=-1)


def _creation_millis(f: DataFileMeta) -> float:
    created = f.creation_time
    if created is None:
        return -math.inf
    if isinstance(created, datetime):
        if created.tzinfo is None:
            created = created.replace(tzinfo=timezone.utc)
        return created.timestamp() * 1000
    return float(created)


def level0_order(f: DataFileMeta) -> tuple[int, int, float, str]:
    """Level 0's order, newest first: max sequence desc, min sequence, creation time, file name asc."""
    return (-f.max_sequence_number, f.min_sequence_number, _creation_millis(f), f.file_name)


def level_sorted_runs(files: Iterable[DataFileMeta], order: KeyOrder) -> list[LevelSortedRun]:
    """``Levels#levelSortedRuns``: level-0 files newest first (one run each), then one run per level >= 1.

    Args:
        files: the live files of one bucket.
        order: the key order (:func:`key_order`); files of a level >= 1 are sorted by min key.
    """
    by_level: dict[int, list[DataFileMeta]] = {}
    for f in files:
        by_level.setdefault(f.level, []).append(f)
    runs = [LevelSortedRun(0, SortedRun((f,))) for f in sorted(by_level.pop(0, []), key=level0_order)]
    for level in sorted(by_level):
        ordered = sorted(by_level[level], key=lambda f: order(f.min_key))
        runs.append(LevelSortedRun(level, SortedRun(tuple(ordered))))
    return runs


def overlapping_pairs(run: SortedRun, order: KeyOrder) -> list[tuple[str, str]]:
    """Neighbouring files of a run whose key ranges overlap (``SortedRun#validate``); [] for a valid run."""
    files = run.files
    return [
        (files[i - 1].file_name, files[i].file_name)
        for i in range(1, len(files))
        if not order(files[i].min_key) > order(files[i - 1].max_key)
    ]


# -- interval partition ----------------------------------------------------------------------------


def interval_partition(files: Iterable[DataFileMeta], order: KeyOrder) -> list[list[SortedRun]]:
    """``IntervalPartition#partition``: non-overlapping sections, each packed into the fewest sorted runs.

    Args:
        files: the files of a compaction unit (any levels).
        order: the key order (:func:`key_order`).

    Example::

        >>> [[r.files for r in section] for section in interval_partition(files, order)]
    """
    ordered = sorted(files, key=lambda f: (order(f.min_key), order(f.max_key)))
    sections: list[list[SortedRun]] = []
    section: list[DataFileMeta] = []
    bound: tuple[Any, ...] | None = None
    for f in ordered:
        low = order(f.min_key)
        if section and bound is not None and low > bound:
            sections.append(_pack_section(section, order))
            section, bound = [], None
        section.append(f)
        high = order(f.max_key)
        if bound is None or high > bound:
            bound = high
    if section:
        sections.append(_pack_section(section, order))
    return sections


def _pack_section(files: list[DataFileMeta], order: KeyOrder) -> list[SortedRun]:
    """Greedy packing into the fewest runs: a file joins the run ending lowest if it starts after that end."""
    runs: list[list[DataFileMeta]] = [[files[0]]]
    # Heap of (max key of the run's last file, run index): the run ending lowest is on top.
    heap: list[tuple[tuple[Any, ...], int]] = [(order(files[0].max_key), 0)]
    for f in files[1:]:
        end, index = heap[0]
        if order(f.min_key) > end:
            runs[index].append(f)
            heapq.heapreplace(heap, (order(f.max_key), index))
        else:
            runs.append([f])
            heapq.heappush(heap, (order(f.max_key), len(runs) - 1))
    return [SortedRun(tuple(run)) for run in runs]
