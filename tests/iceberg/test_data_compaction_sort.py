"""Iceberg sort compaction (Java's ``rewrite_data_files(strategy => 'sort')``): the sort order's text and
resolution, the options only a sort takes, the refusals (nothing written), the external merge sort in bounded
memory (several runs spilled, the output in order, the spill directory removed also on error), and a sorted
rewrite through the facade and the CLI. Java reads and compares the result in
tests/interop/test_iceberg_data_compaction_interop.py.
"""

from __future__ import annotations

import datetime
import json
import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table.sorting import NullOrder
from pyiceberg.transforms import IdentityTransform

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import rewrite_group
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_sort import (
    ExternalSort,
    SortBudget,
    SortKey,
    describe_sort_order,
    parse_sort_order,
    sort_table,
)
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.tables import open_table
from tests.iceberg.helpers import local_path
from tests.iceberg.scenarios import create_table, rows

DAY = datetime.date(2024, 1, 1)


# --- the sort order's text ---------------------------------------------------------------------------------


def test_sort_order_text_takes_sparks_defaults_for_direction_and_nulls() -> None:
    keys = parse_sort_order("id, name DESC, `d` ASC NULLS LAST, cat desc nulls first")
    assert [(k.name, k.descending, k.nulls_first) for k in keys] == [
        ("id", False, True),
        ("name", True, False),
        ("d", False, False),
        ("cat", True, True),
    ]
    assert describe_sort_order(keys[:2]) == "id ASC NULLS FIRST, name DESC NULLS LAST"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("zorder(id, name)", "z-order is not supported yet"),
        ("id, zorder(name)", "z-order is not supported yet"),
        ("bucket(4, id)", "transforms (bucket) are not supported yet"),
        ("days(d) DESC", "transforms (days) are not supported yet"),
        ("id UP", "is not of the form"),
        ("", "the sort order is empty"),
    ],
)
def test_sort_orders_we_do_not_sort_by_are_refused_typed(text: str, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        CompactionOptions.from_options({}, sort_order=text)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("strategy", "sort_order", "options", "fragment"),
    [
        ("binpack", "id", {}, "Must use only one rewriter type"),
        ("zorder", None, {}, "unsupported strategy: zorder"),
        (None, None, {"compression-factor": "2"}, "Cannot use options ['compression-factor']"),
        ("binpack", None, {"shuffle-partitions-per-file": "2"}, "Cannot use options ['shuffle-partitions"),
        ("sort", None, {"compression-factor": "0"}, "compression-factor must be > 0"),
        ("sort", None, {"shuffle-partitions-per-file": "0"}, "shuffle-partitions-per-file must be > 0"),
        ("sort", None, {"var-length-contribution": "8"}, "Cannot use options ['var-length-contribution']"),
    ],
)
def test_strategy_and_sort_only_options_are_checked_as_java_checks_them(
    strategy: str | None, sort_order: str | None, options: dict[str, str], fragment: str
) -> None:
    with pytest.raises(UsageError) as caught:
        CompactionOptions.from_options(options, strategy=strategy, sort_order=sort_order)
    assert fragment in str(caught.value)


def test_a_sort_order_alone_means_sort_and_the_sort_options_count_only_there() -> None:
    sort = CompactionOptions.from_options({"compression-factor": "2.5"}, sort_order="id DESC")
    assert (sort.strategy, sort.sort_order, sort.compression_factor) == ("sort", "id DESC", 2.5)
    assert sort.to_json()["compression-factor"] == 2.5
    binpack = CompactionOptions.from_options({})
    assert binpack.strategy == "binpack" and "compression-factor" not in binpack.to_json()


# --- the external merge sort -------------------------------------------------------------------------------

KEYS = (SortKey("x", descending=True, nulls_first=False), SortKey("s"), SortKey("f", nulls_first=False))


def _random_batches(seed: int, batches: int, size: int) -> list[pa.RecordBatch]:
    rng = random.Random(seed)

    def pick(values: list[Any]) -> Any:
        return None if rng.random() < 0.1 else rng.choice(values)

    out = []
    for b in range(batches):
        out.append(
            pa.record_batch(
                {
                    "x": pa.array([pick(list(range(20))) for _ in range(size)], pa.int64()),
                    "s": pa.array([pick(["a", "b", "é", "zz", ""]) for _ in range(size)], pa.string()),
                    "f": pa.array([pick([0.5, -1.0, math.nan, 2.0]) for _ in range(size)], pa.float64()),
                    "n": pa.array([b * size + i for i in range(size)], pa.int64()),
                }
            )
        )
    return out


def _keys_of(data: pa.Table) -> list[tuple[Any, ...]]:
    """Rows' key values, NaN made comparable (NaN != NaN otherwise)."""
    f = ["NaN" if v is not None and math.isnan(v) else v for v in data.column("f").to_pylist()]
    return list(zip(data.column("x").to_pylist(), data.column("s").to_pylist(), f, strict=True))


def _spark_order(keys: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """KEYS' order written out independently: x DESC NULLS LAST, s ASC NULLS FIRST (by code point, as UTF-8
    bytes compare), f ASC NULLS LAST with NaN above every number."""

    def key(row: tuple[Any, ...]) -> tuple[Any, ...]:
        x, s, f = row
        return (
            x is None,
            -(x or 0),
            s is not None,
            s or "",
            f is None,
            f == "NaN",
            0 if f in (None, "NaN") else f,
        )

    return sorted(keys, key=key)


def test_a_group_larger_than_a_run_is_spilled_in_runs_and_merged_in_order(tmp_path: Path) -> None:
    batches = _random_batches(7, 40, 50)  # 2,000 rows, about 64 KiB of Arrow data
    expected = sort_table(pa.Table.from_batches(batches), KEYS)
    assert _keys_of(expected) == _spark_order(_keys_of(pa.Table.from_batches(batches)))
    with ExternalSort(KEYS, SortBudget(run_bytes=4096, batch_bytes=512), spill_dir=str(tmp_path)) as sorter:
        for batch in batches:
            sorter.add(batch)
        chunks = list(sorter.sorted_tables())
        assert sorter.runs_spilled >= 10 and sorter.rows == 2000
        assert list(tmp_path.iterdir())  # the runs are on disk during the merge
    merged = pa.concat_tables(chunks)
    assert _keys_of(merged) == _keys_of(expected)
    assert sorted(merged.column("n").to_pylist()) == list(range(2000))  # every row exactly once
    # bounded: no chunk the merge emits holds more than about one batch per run
    assert max(c.num_rows for c in chunks) < 2000 / 2
    assert list(tmp_path.iterdir()) == []  # spill directory removed


def test_the_spill_directory_goes_also_when_the_sort_fails(tmp_path: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="reading failed"),
        ExternalSort(KEYS, SortBudget(run_bytes=1024, batch_bytes=256), spill_dir=str(tmp_path)) as sorter,
    ):
        for batch in _random_batches(3, 10, 50):
            sorter.add(batch)
        assert sorter.runs_spilled > 1 and list(tmp_path.iterdir())
        raise RuntimeError("reading failed")
    assert list(tmp_path.iterdir()) == []


def test_a_group_within_one_run_is_sorted_in_memory_without_spilling(tmp_path: Path) -> None:
    batches = _random_batches(5, 3, 20)
    with ExternalSort(KEYS, SortBudget(), spill_dir=str(tmp_path)) as sorter:
        for batch in batches:
            sorter.add(batch)
        merged = pa.concat_tables(list(sorter.sorted_tables()))
        assert sorter.runs_spilled == 0 and list(tmp_path.iterdir()) == []
    assert _keys_of(merged) == _spark_order(_keys_of(pa.Table.from_batches(batches)))


# --- a sorted rewrite of a table ---------------------------------------------------------------------------


def _sorted_table(tmp_path: Path, *, sort: bool = True):
    """Six unsorted one-commit files in partition a (ids with nulls), table sorted by id ASC NULLS FIRST."""
    table = create_table("hadoop", 2, tmp_path)
    if sort:
        with table.table.update_sort_order() as update:
            update.asc("id", IdentityTransform(), NullOrder.NULLS_FIRST)
        table.refresh()
    rng = random.Random(11)
    for _ in range(6):
        ids = [None if rng.random() < 0.15 else rng.randrange(1000) for _ in range(40)]
        data = rows([0] * len(ids), "a", DAY)
        write.append(table, data.set_column(0, "id", pa.array(ids, pa.int64())))
    return table


def _listing(root: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _ids_in_files(paths: list[str]) -> list[list[Any]]:
    return [pq.read_table(local_path(p)).column("id").to_pylist() for p in paths]


def test_a_sorted_rewrite_spills_runs_and_orders_rows_across_the_groups_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = _sorted_table(tmp_path)
    size = sum(
        c.file_size for g in plan_data_compaction(table, {"rewrite-all": "true"}).groups for c in g.files
    )
    options = {"min-input-files": "2", "target-file-size-bytes": str(size // 3)}
    plan = plan_data_compaction(table, options, strategy="sort")
    assert plan.to_json()["strategy"] == "sort" and plan.to_json()["sortOrder"] == "id ASC NULLS FIRST"
    group = plan.groups[0]
    assert group.expected_output_files >= 2 and group.sort_keys == (SortKey("id", False, True, 1),)
    monkeypatch.setenv("LAKEFORMAT_SORT_RUN_BYTES", "2048")  # a few dozen rows per run
    head = table.snapshot(ref="main")
    result = rewrite_group(table, group, data_files_by_path(table, head, [c.path for c in group.files]))
    assert result.runs_spilled >= 3
    assert len(result.outputs) == group.expected_output_files
    per_file = _ids_in_files([f.file_path for f in result.outputs])
    flat = [i for ids in per_file for i in ids]
    nulls = sum(1 for i in flat if i is None)
    assert nulls and flat == [None] * nulls + sorted(i for i in flat if i is not None)
    assert len(flat) == 240 and all(f.sort_order_id == 0 for f in result.outputs)  # as Java's rewrite writes


def test_compact_data_sorts_by_a_given_order_and_commits_like_bin_pack(tmp_path: Path) -> None:
    table = _sorted_table(tmp_path, sort=False)
    facade = open_table(str(tmp_path / "t"))
    start = table.snapshot(ref="main")
    result = facade.maintenance.compact_data(
        options={"min-input-files": "2"}, sort_order="id DESC NULLS LAST"
    )
    assert result.snapshot_id is not None and result.files_rewritten == 6 and result.files_added == 1
    document = result.to_json()
    assert (document["strategy"], document["sortOrder"]) == ("sort", "id DESC NULLS LAST")
    table.refresh()
    head = table.snapshot(ref="main")
    assert head.summary.operation.value == "replace"
    from airflow_lakeformat.core.iceberg.metadata.live_files import live_files

    new = [f for f in live_files(table, head) if f.snapshot_id == head.snapshot_id]
    assert [f.data_sequence_number for f in new] == [start.sequence_number]
    (ids,) = _ids_in_files([f.path for f in new])
    nulls = ids.count(None)
    assert nulls and ids == sorted((i for i in ids if i is not None), reverse=True) + [None] * nulls
    # the merge's many small chunks are gathered into one row group, not written one row group each
    assert pq.ParquetFile(local_path(new[0].path)).metadata.num_row_groups == 1


def test_bin_pack_output_of_many_small_files_is_one_row_group_not_one_per_input(tmp_path: Path) -> None:
    table = _sorted_table(tmp_path, sort=False)
    result = open_table(str(tmp_path / "t")).maintenance.compact_data(options={"min-input-files": "2"})
    assert (result.files_rewritten, result.files_added, result.to_json()["strategy"]) == (6, 1, "binpack")
    table.refresh()
    head = table.snapshot(ref="main")
    from airflow_lakeformat.core.iceberg.metadata.live_files import live_files

    (new,) = [f for f in live_files(table, head) if f.snapshot_id == head.snapshot_id]
    assert pq.ParquetFile(local_path(new.path)).metadata.num_row_groups == 1 and new.record_count == 240


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"strategy": "sort"}, UsageError, "Cannot sort data without a valid sort order"),
        ({"sort_order": "zorder(id, s)"}, UsageError, "z-order is not supported yet"),
        ({"strategy": "binpack", "sort_order": "id"}, UsageError, "Must use only one rewriter type"),
        ({"options": {"compression-factor": "2"}}, UsageError, "Cannot use options ['compression-factor']"),
        ({"sort_order": "nosuch DESC"}, UsageError, "not a column"),
    ],
)
def test_refusals_write_nothing(tmp_path: Path, kwargs: dict[str, Any], error: type, fragment: str) -> None:
    _sorted_table(tmp_path, sort=False)
    before = _listing(tmp_path)
    facade = open_table(str(tmp_path / "t"))
    for call in (facade.maintenance.compact_data, facade.maintenance.plan_compact_data):
        with pytest.raises(error) as caught:
            call(**{"options": {"min-input-files": "2"}, **kwargs})
        assert fragment in str(caught.value)
    assert _listing(tmp_path) == before


def test_the_cli_sorts_and_a_paimon_table_refuses_the_sort_flags_by_name(tmp_path: Path) -> None:
    from tests.unit.test_cli_compaction import run
    from tests.unit.test_data_compaction import append_batches, new_table

    _sorted_table(tmp_path / "ice")
    root = str(tmp_path / "ice" / "t")
    code, out, err = run(
        "compact-data", root, "--strategy", "sort", "--min-input-files", "2", "--dry-run", "--json"
    )
    assert code == 0 and err == "", err
    planned = json.loads(out)
    assert (planned["strategy"], planned["sortOrder"], planned["filesToRewrite"]) == (
        "sort",
        "id ASC NULLS FIRST",
        6,
    )
    code, out, err = run("compact-data", root, "--sort-order", "zorder(id)", "--dry-run")
    assert code == 2 and "z-order is not supported yet" in err and out == ""
    paimon = new_table(tmp_path / "p")
    append_batches(paimon, 2, rows=5)
    for flags, name in ((["--strategy", "sort"], "strategy"), (["--sort-order", "id"], "sort_order")):
        code, out, err = run("compact-data", str(tmp_path / "p"), *flags)
        assert code == 2 and f"{name}: only for Iceberg tables" in err and out == ""
