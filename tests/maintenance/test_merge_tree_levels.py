"""Levels, sorted runs, interval sections and the universal-compaction pick of a primary-key bucket (issue 27).

The pick cases follow the semantics of Paimon's ``UniversalCompactionTest`` and ``IntervalPartitionTest``
(same inputs, same expected units), rewritten against ``merge_tree.levels`` / ``merge_tree.universal``.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import DataFileMeta
from airflow_lakeformat.core.paimon.merge_tree.levels import (
    LevelSortedRun,
    SortedRun,
    interval_partition,
    key_order,
    level_sorted_runs,
    non_empty_highest_level,
    num_levels,
    overlapping_pairs,
)
from airflow_lakeformat.core.paimon.merge_tree.universal import (
    CompactionOptions,
    CompactUnit,
    Rewrite,
    Upgrade,
    create_unit,
    drop_delete,
    pick_for_size_amp,
    pick_for_size_ratio,
    pick_full,
    pick_minor,
    pick_universal,
    unit_actions,
)
from airflow_lakeformat.core.paimon.options import TableOptions
from airflow_lakeformat.core.paimon.types import parse_type

INT = [parse_type("INT")]
ORDER = key_order(INT)
_COUNTER = iter(range(1_000_000))


def key(value: int | None) -> bytes:
    return binary_row.encode([value], INT)


def meta(
    size: int = 1,
    level: int = 0,
    low: int = 0,
    high: int = 0,
    *,
    seq: tuple[int, int] = (0, 0),
    deletes: int | None = 0,
    name: str | None = None,
    created: datetime | None = None,
) -> DataFileMeta:
    return DataFileMeta.create(
        name or f"data-{next(_COUNTER)}.parquet",
        size,
        1,
        min_key=key(low),
        max_key=key(high),
        min_sequence_number=seq[0],
        max_sequence_number=seq[1],
        level=level,
        delete_row_count=deletes,
        creation_time=created,
    )


def run(level: int, size: int) -> LevelSortedRun:
    return LevelSortedRun(level, SortedRun((meta(size, level),)))


def level0(*sizes: int) -> list[LevelSortedRun]:
    return [run(0, s) for s in sizes]


def sizes_of(unit: CompactUnit | None) -> list[int]:
    assert unit is not None
    return [f.file_size for f in unit.files]


def opts(max_size_amp: int, size_ratio: int, trigger: int, **extra: int) -> CompactionOptions:
    return CompactionOptions(trigger=trigger, max_size_amp=max_size_amp, size_ratio=size_ratio, **extra)


# -- picking (UniversalCompactionTest) -------------------------------------------------------------


def test_output_level_of_a_unit_never_level_0() -> None:
    runs = [run(level, 1) for level in (0, 0, 1, 3, 4)]
    assert [create_unit(runs, 5, count).output_level for count in (1, 2, 3, 4, 5)] == [1, 1, 2, 3, 5]
    # The first count absorbs the second level-0 run to reach level 1.
    assert len(create_unit(runs, 5, 1).runs) == 3


def test_pick_by_size_amplification_size_ratio_and_file_count() -> None:
    o = opts(25, 1, 3)
    assert sizes_of(pick_universal(3, level0(1, 2, 3, 3), o)) == [1, 2, 3, 3]
    assert sizes_of(pick_universal(4, [run(0, 1), run(1, 1), run(2, 1), run(3, 50)], o)) == [1, 1, 1]
    # By file count, then extended by size ratio: 3 joins the candidates.
    assert sizes_of(pick_universal(4, [run(0, 1), run(1, 2), run(2, 3), run(3, 50)], o)) == [1, 2, 3]


def test_no_output_level_0() -> None:
    o = opts(25, 1, 3)
    unit = pick_universal(3, [run(0, 1), run(0, 1), run(1, 1), run(2, 50)], o)
    assert sizes_of(unit) == [1, 1, 1] and unit is not None and unit.output_level == 1
    unit = pick_universal(3, [run(0, 1), run(0, 2), run(1, 3), run(2, 50)], o)
    assert sizes_of(unit) == [1, 2, 3] and unit is not None and unit.output_level == 1


def test_file_count_pick_considers_level_2() -> None:
    unit = pick_universal(3, [run(0, 10), run(0, 20), run(1, 97), run(2, 100)], opts(200, 1, 3))
    assert unit is not None and len(unit.files) == 4 and unit.output_level == 2


def test_extreme_case_goes_to_the_max_level() -> None:
    unit = pick_universal(6, level0(1, 1, 1, 1024, 1024 * 1024), opts(200, 1, 5))
    assert sizes_of(unit) == [1, 1, 1, 1024, 1024 * 1024] and unit is not None and unit.output_level == 5


def _append_and_pick_for_size_amp(o: CompactionOptions, sizes: list[int]) -> list[int]:
    sizes = [1, *sizes]
    unit = pick_for_size_amp(level0(*sizes), 2, o)
    return [sum(sizes_of(unit))] if unit is not None else sizes


def test_size_amplification_sequence() -> None:
    o = opts(25, 0, 1)
    expected = [[2], [3], [4], [1, 4], [6], [1, 6], [8], [1, 8], [1, 1, 8], [11], [1, 11], [1, 1, 11], [14]]
    expected += [[1, 14], [1, 1, 14], [1, 1, 1, 14], [18]]
    sizes = [1]
    for want in expected:
        sizes = _append_and_pick_for_size_amp(o, sizes)
        assert sizes == want


def _pick_for_size_ratio(o: CompactionOptions, sizes: list[int]) -> list[int]:
    runs = [run(level, size) for level, size in enumerate(sizes)]
    unit = pick_for_size_ratio(runs, len(sizes), o) if len(runs) >= o.trigger else None
    if unit is None:
        return sizes
    picked = sizes_of(unit)
    rest = list(sizes)
    for size in picked:
        rest.remove(size)
    return [sum(picked), *rest]


def test_size_ratio_sequence() -> None:
    o = opts(25, 1, 5)
    expected = [[5], [1, 5], [1, 1, 5], [1, 1, 1, 5], [4, 5], [1, 4, 5], [1, 1, 4, 5], [3, 4, 5]]
    expected += [[1, 3, 4, 5], [2, 3, 4, 5], [1, 2, 3, 4, 5], [16], [1, 16], [1, 1, 16], [1, 1, 1, 16]]
    expected += [[4, 16], [1, 4, 16], [1, 1, 4, 16], [3, 4, 16], [1, 3, 4, 16], [2, 3, 4, 16]]
    expected += [[1, 2, 3, 4, 16], [11, 16]]
    sizes = [1, 1, 1, 1]
    for want in expected:
        sizes = _pick_for_size_ratio(o, [1, *sizes])
        assert sizes == want


def test_size_ratio_threshold() -> None:
    assert _pick_for_size_ratio(opts(25, 10, 2), [8, 9, 10]) == [8, 9, 10]
    assert _pick_for_size_ratio(opts(25, 20, 2), [8, 9, 10]) == [27]


def test_off_peak_ratio_widens_the_size_ratio() -> None:
    peak = opts(25, 10, 2, offpeak_start_hour=22, offpeak_end_hour=6, offpeak_ratio=10)
    runs = [run(level, size) for level, size in enumerate([8, 9, 10])]
    assert pick_for_size_ratio(runs, 3, peak, hour=12) is None
    assert sizes_of(pick_for_size_ratio(runs, 3, peak, hour=23)) == [8, 9, 10]


def test_total_and_incremental_size_thresholds() -> None:
    total = opts(100, 1, 3, total_size_threshold=10)
    assert sizes_of(pick_universal(3, [run(0, 1), run(1, 3), run(2, 5)], total)) == [1, 3, 5]
    assert pick_universal(3, [run(0, 2), run(1, 6), run(2, 10)], total) is None
    assert pick_universal(3, [run(2, 5)], total) is None
    incremental = opts(100, 1, 3, incremental_size_threshold=3)
    assert pick_universal(3, [run(0, 1), run(1, 2), run(2, 50)], incremental) is None
    unit = pick_universal(3, [run(0, 2), run(1, 2), run(2, 50)], incremental)
    assert unit is not None and unit.output_level == 2 and len(unit.files) == 3


def test_below_the_trigger_nothing_is_picked_and_minor_drops_no_op_units() -> None:
    o = CompactionOptions()
    assert pick_universal(6, level0(1, 1, 1, 1), o) is None
    assert pick_minor(6, [], o) is None
    assert pick_minor(6, [run(5, 10)], opts(200, 1, 1)) is None
    unit = pick_minor(6, level0(1, 1, 1, 1, 1), o)
    assert unit is not None and unit.output_level == 5 and len(unit.files) == 5


def test_full_pick() -> None:
    o = CompactionOptions()
    assert pick_full(6, [], o) is None
    assert pick_full(6, [run(5, 10)], o) is None
    assert sizes_of(pick_full(6, [run(5, 10)], CompactionOptions(force_rewrite_all_files=True))) == [10]
    unit = pick_full(6, [run(0, 1), run(3, 10)], o)
    assert unit is not None and unit.output_level == 5 and sizes_of(unit) == [1, 10]
    unit = pick_full(6, [run(4, 10)], o)
    assert unit is not None and unit.output_level == 5


def test_drop_delete_only_at_the_highest_non_empty_level() -> None:
    assert drop_delete(5, 5) and drop_delete(5, 3) and drop_delete(2, 2)
    assert not drop_delete(2, 5)
    assert not drop_delete(0, 0)


def test_options_from_table_options() -> None:
    o = CompactionOptions.from_options(TableOptions({}))
    assert (o.trigger, o.max_size_amp, o.size_ratio, o.target_file_size) == (5, 200, 1, 128 << 20)
    assert o.min_file_size == int((128 << 20) * 0.7)
    o = CompactionOptions.from_options(
        TableOptions(
            {
                "num-sorted-run.compaction-trigger": "3",
                "compaction.max-size-amplification-percent": "50",
                "compaction.size-ratio": "4",
                "target-file-size": "10 mb",
                "compaction.small-file-ratio": "0.5",
                "compaction.total-size-threshold": "1 kb",
            }
        )
    )
    assert (o.trigger, o.max_size_amp, o.size_ratio, o.min_file_size) == (3, 50, 4, 5 << 20)
    assert o.total_size_threshold == 1024


# -- levels and runs -------------------------------------------------------------------------------


def test_num_levels_default_option_and_widening() -> None:
    assert num_levels(TableOptions({}), []) == 6
    assert num_levels(TableOptions({"num-sorted-run.compaction-trigger": "3"}), []) == 4
    assert num_levels(TableOptions({"num-levels": "3"}), [meta(level=2)]) == 3
    assert num_levels(TableOptions({"num-levels": "3"}), [meta(level=7)]) == 8
    with pytest.raises(UnsupportedFormatError, match="at least 2 levels"):
        num_levels(TableOptions({"num-levels": "1"}), [meta(level=0)])
    assert non_empty_highest_level([]) == -1
    assert non_empty_highest_level([meta(level=0), meta(level=3)]) == 3


def test_level_0_newest_first_then_one_run_per_level() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    t1 = datetime(2026, 1, 2, tzinfo=timezone.utc)
    a = meta(name="a", seq=(0, 5))
    b = meta(name="b", seq=(6, 9))
    c = meta(name="c", seq=(3, 9))
    d = meta(name="d", seq=(3, 9), created=t1)
    e = meta(name="e", seq=(3, 9), created=t0)
    f = meta(name="f", seq=(3, 9), created=t0)
    high = [meta(level=3, low=20, high=30, name="h2"), meta(level=3, low=0, high=10, name="h1")]
    runs = level_sorted_runs([a, b, c, d, e, f, *high, meta(level=1, name="l1")], ORDER)
    assert [(r.level, [x.file_name for x in r.run.files]) for r in runs] == [
        (0, ["c"]),  # no creation time sorts first among equals
        (0, ["e"]),
        (0, ["f"]),
        (0, ["d"]),
        (0, ["b"]),
        (0, ["a"]),
        (1, ["l1"]),
        (3, ["h1", "h2"]),
    ]
    assert overlapping_pairs(runs[-1].run, ORDER) == []
    bad = SortedRun((meta(low=0, high=10, name="x"), meta(low=10, high=12, name="y")))
    assert overlapping_pairs(bad, ORDER) == [("x", "y")]


# -- key order -------------------------------------------------------------------------------------


def test_key_order_is_javas() -> None:
    strings = key_order([parse_type("STRING")])
    values = ["é", "z", "a", "ab", "", None, "abcdefghij", "abcdefghi"]
    ordered = sorted(values, key=lambda v: strings(binary_row.encode([v], [parse_type("STRING")])))
    assert ordered == [None, "", "a", "ab", "abcdefghi", "abcdefghij", "z", "é"]
    floats = key_order([parse_type("DOUBLE")])
    nums = [float("nan"), 1.0, -0.0, 0.0, float("-inf"), -1.0]
    ordered_f = sorted(nums, key=lambda v: floats(binary_row.encode([v], [parse_type("DOUBLE")])))
    assert [str(v) for v in ordered_f] == ["-inf", "-1.0", "-0.0", "0.0", "1.0", "nan"]
    two = [parse_type("STRING"), parse_type("INT")]
    pair = key_order(two)
    rows = [("b", 1), ("a", 10), ("a", 2), ("a", -5)]
    assert sorted(rows, key=lambda r: pair(binary_row.encode(list(r), two))) == [
        ("a", -5),
        ("a", 2),
        ("a", 10),
        ("b", 1),
    ]


# -- interval partition (IntervalPartitionTest) -----------------------------------------------------


def _intervals(sections: list[list[SortedRun]]) -> list[list[list[tuple[int, int]]]]:
    out = []
    for section in sections:
        runs = []
        for r in section:
            runs.append(
                [
                    (binary_row.decode(f.min_key, INT)[0], binary_row.decode(f.max_key, INT)[0])
                    for f in r.files
                ]
            )
        out.append(sorted(runs))
    return out


def _files(*pairs: tuple[int, int]) -> list[DataFileMeta]:
    return [meta(low=a, high=b) for a, b in pairs]


def test_interval_partition_same_min_key_and_same_max_key() -> None:
    got = _intervals(interval_partition(_files((100, 200), (100, 400), (100, 300), (100, 500)), ORDER))
    assert got == [[[(100, 200)], [(100, 300)], [(100, 400)], [(100, 500)]]]
    got = _intervals(interval_partition(_files((100, 500), (300, 500), (200, 500), (400, 500)), ORDER))
    assert got == [[[(100, 500)], [(200, 500)], [(300, 500)], [(400, 500)]]]


def test_interval_partition_sections() -> None:
    files = _files((0, 9), (5, 7), (9, 15), (16, 22), (16, 28), (24, 32))
    assert _intervals(interval_partition(files, ORDER)) == [
        [[(0, 9)], [(5, 7), (9, 15)]],
        [[(16, 22), (24, 32)], [(16, 28)]],
    ]


def test_interval_partition_random_never_needs_more_runs_than_given() -> None:
    rng = random.Random(7)
    for _ in range(100):
        files = []
        num_runs = rng.randint(1, 10)
        for _ in range(num_runs):
            points = sorted(rng.sample(range(1000), 2 * rng.randint(1, 10)))
            files += _files(*zip(points[::2], points[1::2], strict=True))
        sections = interval_partition(files, ORDER)
        assert sum(len(r.files) for s in sections for r in s) == len(files)
        for section in sections:
            assert len(section) <= num_runs
            assert all(overlapping_pairs(r, ORDER) == [] for r in section)
        bounds = [
            (
                min(ORDER(f.min_key) for r in s for f in r.files),
                max(ORDER(f.max_key) for r in s for f in r.files),
            )
            for s in sections
        ]
        assert all(bounds[i][1] < bounds[i + 1][0] for i in range(len(bounds) - 1))


# -- upgrade or rewrite (MergeTreeCompactTask) -------------------------------------------------------


def _describe(actions: list[Upgrade | Rewrite]) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for a in actions:
        if isinstance(a, Upgrade):
            out.append(("upgrade", (a.file.file_name, a.level)))
        else:
            out.append(("rewrite", sorted(f.file_name for f in a.files)))
    return out


def test_big_non_overlapping_files_are_upgraded_small_ones_rewritten() -> None:
    o = CompactionOptions(target_file_size=100)  # small files are < 70 bytes
    big1 = meta(80, 0, 0, 9, name="big1")
    small1 = meta(10, 0, 10, 19, name="small1")
    small2 = meta(10, 1, 20, 29, name="small2")
    big2 = meta(90, 1, 30, 39, name="big2")
    over_a = meta(80, 0, 40, 50, name="over_a")
    over_b = meta(80, 1, 45, 55, name="over_b")
    unit = create_unit(
        [LevelSortedRun(0, SortedRun((f,))) for f in (big1, small1, small2, big2, over_a, over_b)], 5, 6
    )
    actions = unit_actions(unit, ORDER, max_level=5, drop_deletes=False, opts=o)
    # Output at the max level, no deletes: big files upgraded, the two small neighbours rewritten together,
    # the overlapping section merged.
    assert unit.output_level == 5
    assert _describe(actions) == [
        ("upgrade", ("big1", 5)),
        ("rewrite", ["small1", "small2"]),
        ("upgrade", ("big2", 5)),
        ("rewrite", ["over_a", "over_b"]),
    ]


def test_upgrade_becomes_rewrite_at_the_max_level_when_the_file_may_hold_deletes() -> None:
    o = CompactionOptions(target_file_size=100)
    with_deletes = meta(80, 0, 0, 9, deletes=2, name="d")
    unknown = meta(80, 0, 10, 19, deletes=None, name="u")
    clean = meta(80, 0, 20, 29, deletes=0, name="c")
    unit = create_unit([LevelSortedRun(0, SortedRun((f,))) for f in (with_deletes, unknown, clean)], 5, 3)
    actions = unit_actions(unit, ORDER, max_level=5, drop_deletes=True, opts=o)
    assert _describe(actions) == [("rewrite", ["d"]), ("rewrite", ["u"]), ("upgrade", ("c", 5))]
    assert all(a.drop_delete for a in actions if isinstance(a, Rewrite))
    # Below the max level deletes do not force a rewrite.
    unit = create_unit(
        [LevelSortedRun(0, SortedRun((with_deletes,))), LevelSortedRun(3, SortedRun((clean,)))], 5, 1
    )
    assert unit.output_level == 2
    assert _describe(unit_actions(unit, ORDER, max_level=5, drop_deletes=False, opts=o)) == [
        ("upgrade", ("d", 2))
    ]


def test_a_file_whose_zero_delete_count_hides_deletes_is_rewritten_below_the_max_level_too() -> None:
    """pypaimon 2.1 counts 0 deletes in files holding -D rows: moved up as it is, that 0 would let a reader read
    the level without merging and return the -D rows as rows; rewritten, the deletes are kept and counted."""
    o = CompactionOptions(target_file_size=100)
    lying = meta(80, 0, 0, 9, deletes=0, name="lying")
    honest = meta(80, 0, 10, 19, deletes=0, name="honest")
    settled = meta(90, 3, 20, 29, name="settled")
    unit = create_unit(
        [LevelSortedRun(0, SortedRun((f,))) for f in (lying, honest)]
        + [LevelSortedRun(3, SortedRun((settled,)))],
        5,
        2,
    )
    assert unit.output_level == 2
    asked: list[str] = []

    def miscounts(f: DataFileMeta) -> bool:
        asked.append(f.file_name)
        return f.file_name == "lying"

    actions = unit_actions(unit, ORDER, max_level=5, drop_deletes=False, opts=o, miscounts_deletes=miscounts)
    assert _describe(actions) == [("rewrite", ["lying"]), ("upgrade", ("honest", 2))]
    assert not any(a.drop_delete for a in actions if isinstance(a, Rewrite)), "below the max level: kept"
    assert sorted(asked) == ["honest", "lying"]
    # without the check (Java's files: counts trusted), both move up as they are
    assert _describe(unit_actions(unit, ORDER, max_level=5, drop_deletes=False, opts=o)) == [
        ("upgrade", ("lying", 2)),
        ("upgrade", ("honest", 2)),
    ]


def test_a_lone_small_file_is_upgraded_and_a_file_at_its_level_left_alone() -> None:
    o = CompactionOptions(target_file_size=100)
    small = meta(10, 0, 0, 9, name="s")
    settled = meta(90, 2, 10, 19, name="settled")
    unit = create_unit(
        [LevelSortedRun(0, SortedRun((small,))), LevelSortedRun(2, SortedRun((settled,)))], 2, 2
    )
    assert unit.output_level == 2
    assert _describe(unit_actions(unit, ORDER, max_level=2, drop_deletes=False, opts=o)) == [
        ("upgrade", ("s", 2))
    ]
    forced = CompactionOptions(target_file_size=100, force_rewrite_all_files=True)
    assert _describe(unit_actions(unit, ORDER, max_level=2, drop_deletes=False, opts=forced)) == [
        ("rewrite", ["s"]),
        ("rewrite", ["settled"]),
    ]


@pytest.mark.parametrize("ratio, expected", [("0.7", "upgrade"), ("0.95", "rewrite")])
def test_small_file_ratio_option(ratio: str, expected: str) -> None:
    o = CompactionOptions.from_options(
        TableOptions({"target-file-size": "100 b", "compaction.small-file-ratio": ratio})
    )
    a = meta(80, 0, 0, 9, name="a")
    b = meta(80, 0, 10, 19, name="b")
    unit = create_unit([LevelSortedRun(0, SortedRun((f,))) for f in (a, b)], 5, 2)
    kinds = {kind for kind, _ in _describe(unit_actions(unit, ORDER, max_level=5, drop_deletes=True, opts=o))}
    assert kinds == {expected}


def test_the_caller_decides_which_files_may_hold_deletes() -> None:
    o = CompactionOptions(target_file_size=100)
    lying = meta(80, 0, 0, 9, deletes=0, name="lying")
    unit = create_unit([LevelSortedRun(0, SortedRun((lying,)))], 5, 1)
    assert _describe(unit_actions(unit, ORDER, max_level=5, drop_deletes=True, opts=o)) == [
        ("upgrade", ("lying", 5))
    ]
    asked: list[str] = []

    def reads_rows(f: DataFileMeta) -> bool:
        asked.append(f.file_name)
        return True

    actions = unit_actions(unit, ORDER, max_level=5, drop_deletes=True, opts=o, may_hold_deletes=reads_rows)
    assert _describe(actions) == [("rewrite", ["lying"])] and asked == ["lying"]
    # Below the max level nobody is asked.
    asked.clear()
    lower = create_unit(
        [LevelSortedRun(0, SortedRun((lying,))), LevelSortedRun(4, SortedRun((meta(90, 4, 20, 29),)))], 5, 1
    )
    unit_actions(lower, ORDER, max_level=5, drop_deletes=False, opts=o, may_hold_deletes=reads_rows)
    assert asked == []
