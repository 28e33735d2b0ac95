"""What a merge-tree compaction of one bucket picks, where it writes, and which files it only upgrades.

Pure functions over the :class:`~.levels.LevelSortedRun` list of one bucket (``levels.level_sorted_runs``).
Java classes cited per function: ``compact/UniversalCompaction.java``, ``EarlyFullCompaction.java``,
``CompactStrategy#pickFullCompaction``, ``MergeTreeCompactManager#triggerCompaction``,
``MergeTreeCompactTask#doCompact``/``upgrade``/``rewrite``.

* **Minor** (:func:`pick_universal`, :func:`pick_minor`), in order:

  0. early full compaction: total size < ``compaction.total-size-threshold``, or the size of the runs not at
     the max level > ``compaction.incremental-size-threshold`` -> every run to the max level (never for a
     single run). ``compaction.optimization-interval`` is NOT applied: it needs the time of the bucket's
     last full compaction, which a stateless job does not know (a fresh Java writer would full-compact at
     once; we leave that to ``--full``);
  1. size amplification (needs ``runs >= num-sorted-run.compaction-trigger``): if
     ``100 * size(all runs but the oldest) > compaction.max-size-amplification-percent * size(oldest)``,
     every run to the max level;
  2. size ratio (needs ``runs >= trigger``): from the newest run, keep adding the next run while
     ``candidates * (100 + compaction.size-ratio [+ off-peak ratio]) / 100 >= next``; once two runs are
     in, runs at level <= 1 are absorbed whatever their size (Paimon master, #9185); at least 2 runs;
  3. file count: if ``runs > trigger``, the newest ``runs - trigger + 1`` runs, extended by size ratio.

  Output level (``createUnit``): all runs -> max level; else the level of the first unpicked run - 1; if
  that is 0, runs are absorbed until one at a level > 0 is included and its level is used; never level 0.
  A unit of one file already at its output level is dropped (``MergeTreeCompactManager``).
* **Full** (:func:`pick_full`): no runs -> nothing; exactly one run at the max level -> nothing (no deletion
  vectors or record-level expiry are supported; with ``compaction.force-rewrite-all-files`` its files are
  rewritten); else every run to the max level.
* **Drop deletes** (:func:`drop_delete`): ``output level != 0 and output level >= highest non-empty level``
  (no deletion vectors, no ``forceKeepDelete``).
* **Upgrade vs rewrite** (:func:`unit_actions`, ``MergeTreeCompactTask#doCompact``): the unit's files are
  cut into interval sections; sections of several runs are rewritten; in a one-run section, each file
  smaller than ``target-file-size * compaction.small-file-ratio`` (0.7) joins the pending rewrite, a larger
  one flushes the pending rewrite and is upgraded (level change only, if its level differs). A pending
  rewrite that is a single one-run section is upgraded file by file instead. An upgrade becomes a rewrite of
  that file alone when the output is the max level and the file may hold deletes (``deleteRowCount > 0`` or
  null as Java decides; callers should pass ``kv_read.retraction_check``, which also reads the rows of a file
  that claims 0, because pypaimon 2.1 records 0 for files holding -D rows), or with
  ``compaction.force-rewrite-all-files``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from airflow_lakeformat.core.paimon.manifest import DataFileMeta
from airflow_lakeformat.core.paimon.merge_tree.levels import (
    DEFAULT_COMPACTION_TRIGGER,
    KeyOrder,
    LevelSortedRun,
    SortedRun,
    interval_partition,
)
from airflow_lakeformat.core.paimon.options import TableOptions
from airflow_lakeformat.core.units import parse_bool, parse_memory_size

# CoreOptions#targetFileSize(hasPrimaryKey): 128 MB for primary-key tables when the option is unset.
PK_TARGET_FILE_SIZE = 128 << 20
DEFAULT_MAX_SIZE_AMP = 200
DEFAULT_SIZE_RATIO = 1
DEFAULT_SMALL_FILE_RATIO = 0.7


@dataclass(frozen=True)
class CompactionOptions:
    """The options of a primary-key table that steer its merge-tree compaction, with Paimon's defaults."""

    trigger: int = DEFAULT_COMPACTION_TRIGGER
    max_size_amp: int = DEFAULT_MAX_SIZE_AMP
    size_ratio: int = DEFAULT_SIZE_RATIO
    target_file_size: int = PK_TARGET_FILE_SIZE
    small_file_ratio: float = DEFAULT_SMALL_FILE_RATIO
    total_size_threshold: int | None = None
    incremental_size_threshold: int | None = None
    force_rewrite_all_files: bool = False
    offpeak_start_hour: int = -1
    offpeak_end_hour: int = -1
    offpeak_ratio: int = 0

    @classmethod
    def from_options(cls, options: TableOptions) -> CompactionOptions:
        """Read ``num-sorted-run.compaction-trigger``, ``compaction.*`` and ``target-file-size``."""

        def number(key: str, default: int) -> int:
            raw = options.get(key)
            return default if raw is None else int(raw)

        def size(key: str) -> int | None:
            raw = options.get(key)
            return None if raw is None else parse_memory_size(raw)

        ratio = options.get("compaction.small-file-ratio")
        return cls(
            trigger=number("num-sorted-run.compaction-trigger", DEFAULT_COMPACTION_TRIGGER),
            max_size_amp=number("compaction.max-size-amplification-percent", DEFAULT_MAX_SIZE_AMP),
            size_ratio=number("compaction.size-ratio", DEFAULT_SIZE_RATIO),
            # Not options.get: its default is the append tables' 256 MB (CoreOptions#targetFileSize(hasPk)).
            target_file_size=parse_memory_size(options.raw["target-file-size"])
            if "target-file-size" in options.raw
            else PK_TARGET_FILE_SIZE,
            small_file_ratio=DEFAULT_SMALL_FILE_RATIO if ratio is None else float(ratio),
            total_size_threshold=size("compaction.total-size-threshold"),
            incremental_size_threshold=size("compaction.incremental-size-threshold"),
            force_rewrite_all_files=parse_bool(options.get("compaction.force-rewrite-all-files") or "false"),
            offpeak_start_hour=number("compaction.offpeak.start.hour", -1),
            offpeak_end_hour=number("compaction.offpeak.end.hour", -1),
            offpeak_ratio=number("compaction.offpeak-ratio", 0),
        )

    @property
    def min_file_size(self) -> int:
        """``CoreOptions#compactionFileSize``: files at least this big are upgraded rather than rewritten."""
        return int(self.target_file_size * self.small_file_ratio)

    def ratio_for_offpeak(self, hour: int) -> int:
        """``OffPeakHours#currentRatio``: the extra size ratio during off-peak hours (0 when disabled)."""
        start, end = self.offpeak_start_hour, self.offpeak_end_hour
        if start < 0 or end < 0 or start == end:
            return 0
        inside = start <= hour < end if start < end else (hour >= start or hour < end)
        return self.offpeak_ratio if inside else 0


@dataclass(frozen=True)
class CompactUnit:
    """The runs a compaction merges and the level it writes to (``CompactUnit``)."""

    output_level: int
    runs: tuple[LevelSortedRun, ...]

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for r in self.runs for f in r.run.files]


# -- picking ---------------------------------------------------------------------------------------


def _sizes(runs: Sequence[LevelSortedRun]) -> list[int]:
    return [r.total_size for r in runs]


def create_unit(runs: Sequence[LevelSortedRun], max_level: int, run_count: int) -> CompactUnit:
    """``UniversalCompaction#createUnit``: the output level of the first ``run_count`` runs (never 0)."""
    output = max_level if run_count == len(runs) else max(0, runs[run_count].level - 1)
    if output == 0:
        # Do not write level 0: absorb runs until one at a level above 0 is in, and use its level.
        for run in runs[run_count:]:
            run_count += 1
            if run.level != 0:
                output = run.level
                break
    if run_count == len(runs):
        output = max_level
    return CompactUnit(output, tuple(runs[:run_count]))


def pick_for_size_amp(
    runs: Sequence[LevelSortedRun], max_level: int, opts: CompactionOptions
) -> CompactUnit | None:
    """``UniversalCompaction#pickForSizeAmp``: everything to the max level when the newer runs are too big."""
    if len(runs) < opts.trigger:
        return None
    sizes = _sizes(runs)
    if sum(sizes[:-1]) * 100 > opts.max_size_amp * sizes[-1]:
        return CompactUnit(max_level, tuple(runs))
    return None


def pick_for_size_ratio(
    runs: Sequence[LevelSortedRun],
    max_level: int,
    opts: CompactionOptions,
    candidate_count: int = 1,
    *,
    hour: int | None = None,
) -> CompactUnit | None:
    """``UniversalCompaction#pickForSizeRatio``: the newest runs while each next run is not much bigger."""
    sizes = _sizes(runs)
    candidate_size = sum(sizes[:candidate_count])
    triggered = candidate_count > 1
    ratio = opts.size_ratio + opts.ratio_for_offpeak(datetime.now().hour if hour is None else hour)
    for index in range(candidate_count, len(runs)):
        if candidate_size * (100.0 + ratio) / 100.0 < sizes[index] and (
            not triggered or runs[index].level > 1
        ):
            break
        candidate_size += sizes[index]
        candidate_count += 1
        triggered = True
    return create_unit(runs, max_level, candidate_count) if triggered else None


def _early_full(
    runs: Sequence[LevelSortedRun], max_level: int, opts: CompactionOptions
) -> CompactUnit | None:
    """``EarlyFullCompaction#tryFullCompact`` without the interval (see the module docstring)."""
    if len(runs) == 1:
        return None
    if opts.total_size_threshold is not None and sum(_sizes(runs)) < opts.total_size_threshold:
        return CompactUnit(max_level, tuple(runs))
    if opts.incremental_size_threshold is not None:
        incremental = sum(r.total_size for r in runs if r.level != max_level)
        if incremental > opts.incremental_size_threshold:
            return CompactUnit(max_level, tuple(runs))
    return None


def pick_universal(
    num_levels: int, runs: Sequence[LevelSortedRun], opts: CompactionOptions, *, hour: int | None = None
) -> CompactUnit | None:
    """``UniversalCompaction#pick``: early full, size amplification, size ratio, then file count.

    Args:
        num_levels: the bucket's number of levels (``levels.num_levels``); the max level is one less.
        runs: the bucket's runs, newest first (``levels.level_sorted_runs``).
        opts: the table's compaction options.
        hour: the local hour for off-peak ratios (now when None).

    Example::

        >>> unit = pick_universal(6, level_sorted_runs(files, order), CompactionOptions())
        >>> unit.output_level if unit else None
    """
    max_level = num_levels - 1
    if not runs:
        return None
    unit = _early_full(runs, max_level, opts) or pick_for_size_amp(runs, max_level, opts)
    if unit is None and len(runs) >= opts.trigger:
        unit = pick_for_size_ratio(runs, max_level, opts, hour=hour)
    if unit is None and len(runs) > opts.trigger:
        unit = pick_for_size_ratio(runs, max_level, opts, len(runs) - opts.trigger + 1, hour=hour)
    return unit


def pick_minor(
    num_levels: int, runs: Sequence[LevelSortedRun], opts: CompactionOptions, *, hour: int | None = None
) -> CompactUnit | None:
    """:func:`pick_universal`, without units that change nothing (one file already at its output level)."""
    unit = pick_universal(num_levels, runs, opts, hour=hour)
    if unit is None or not unit.files:
        return None
    files = unit.files
    if len(files) == 1 and files[0].level == unit.output_level:
        return None
    return unit


def pick_full(num_levels: int, runs: Sequence[LevelSortedRun], opts: CompactionOptions) -> CompactUnit | None:
    """``CompactStrategy#pickFullCompaction``: every run to the max level, unless that is already the state.

    Args:
        num_levels: the bucket's number of levels; the max level is one less.
        runs: the bucket's runs, newest first.
        opts: the table's compaction options (``compaction.force-rewrite-all-files``).
    """
    max_level = num_levels - 1
    if not runs:
        return None
    if len(runs) == 1 and runs[0].level == max_level:
        return CompactUnit(max_level, tuple(runs)) if opts.force_rewrite_all_files else None
    return CompactUnit(max_level, tuple(runs))


def drop_delete(output_level: int, highest_non_empty_level: int) -> bool:
    """``MergeTreeCompactManager``: retractions may go only when nothing older can exist below the output."""
    return output_level != 0 and output_level >= highest_non_empty_level


# -- upgrade or rewrite ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Upgrade:
    """Move a file to the output level without rewriting it (same name, new level)."""

    file: DataFileMeta
    level: int


@dataclass(frozen=True)
class Rewrite:
    """Merge these sections (each a list of overlapping runs) into new files at the output level."""

    sections: tuple[tuple[SortedRun, ...], ...]
    level: int
    drop_delete: bool

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for section in self.sections for run in section for f in run.files]


Action = Upgrade | Rewrite


def may_hold_deletes_by_metadata(f: DataFileMeta) -> bool:
    """``MergeTreeCompactTask#containsDeleteRecords``: ``deleteRowCount`` > 0 or unknown."""
    count = f.delete_row_count
    return count is None or count > 0


def unit_actions(
    unit: CompactUnit,
    order: KeyOrder,
    *,
    max_level: int,
    drop_deletes: bool,
    opts: CompactionOptions,
    may_hold_deletes: Callable[[DataFileMeta], bool] = may_hold_deletes_by_metadata,
    miscounts_deletes: Callable[[DataFileMeta], bool] | None = None,
) -> list[Action]:
    """``MergeTreeCompactTask#doCompact``: the unit as upgrades and rewrites, in key order.

    Files already at the output level that would be upgraded are left alone (no action). The rewrites'
    files plus the upgraded and left-alone files are exactly the unit's files.

    Args:
        unit: the picked unit.
        order: the key order (``levels.key_order``).
        max_level: the bucket's max level.
        drop_deletes: :func:`drop_delete` for the unit.
        opts: the table's compaction options (small-file threshold, force-rewrite-all-files).
        may_hold_deletes: whether a file may hold -U/-D rows; asked only of files that would be upgraded
            to the max level. Pass ``kv_read.retraction_check(...)`` for tables pypaimon wrote.
        miscounts_deletes: whether a file's ``deleteRowCount`` of 0 hides -U/-D rows (pypaimon 2.1 writes 0
            for every file); asked of files that would be upgraded below the max level. Such a file is
            rewritten instead (its deletes kept, now counted): moved up as it is, a reader that reads one
            level without merging (Java's raw-convertible split) would return its retractions as rows.
            Pass ``kv_read.miscounted_deletes_check(...)``; None: counts are trusted (Java's files).
    """
    out = unit.output_level
    actions: list[Action] = []
    pending: list[tuple[SortedRun, ...]] = []

    def upgrade(f: DataFileMeta) -> None:
        if (
            opts.force_rewrite_all_files
            or (out == max_level and may_hold_deletes(f))
            or (
                out != max_level and f.level != out and miscounts_deletes is not None and miscounts_deletes(f)
            )
        ):
            actions.append(Rewrite(((SortedRun((f,)),),), out, drop_deletes))
        elif f.level != out:
            actions.append(Upgrade(f, out))

    def flush() -> None:
        if not pending:
            return
        if len(pending) == 1 and len(pending[0]) == 1:
            for f in pending[0][0].files:
                upgrade(f)
        else:
            actions.append(Rewrite(tuple(pending), out, drop_deletes))
        pending.clear()

    for section in interval_partition(unit.files, order):
        if len(section) > 1:
            pending.append(tuple(section))
            continue
        for f in section[0].files:
            if f.file_size < opts.min_file_size:
                pending.append((SortedRun((f,)),))
            else:
                flush()
                upgrade(f)
    flush()
    return actions
