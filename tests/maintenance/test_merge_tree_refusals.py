"""What the primary-key compaction refuses: typed, naming the option or file, and before anything is written.

Each refused table gets a level-0 file where our writer can make one, so "writes nothing" is checked on a
table that had something to compact: the directory listing and the latest snapshot are unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from airflow_lakeformat.core.errors import LakeformatError, UnsupportedFormatError, UsageError
from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.table_maintenance import IcebergMaintenance
from airflow_lakeformat.core.tables import open_table
from tests.maintenance.merge_tree_support import (
    FIELDS,
    INSERT,
    append,
    level0_entries,
    listing,
    live,
    pk_table,
    visible_rows,
)


def two_files(table: Table) -> None:
    append(table, "a", 0, [(k, f"x{k}", k, INSERT) for k in range(5)])
    append(table, "a", 0, [(k, f"y{k}", 10 + k, INSERT) for k in range(3)])


def assert_refused_writing_nothing(
    table: Table, match: str, error: type[Exception] = UnsupportedFormatError, *, mode: str
) -> None:
    root = Path(table.root)
    before, latest = listing(root), table.snapshot_manager.latest_snapshot_id()
    with pytest.raises(error, match=match):
        open_table(table.root).maintenance.compact_data(mode=mode)
    assert listing(root) == before and table.snapshot_manager.latest_snapshot_id() == latest


@pytest.mark.parametrize(
    ("options", "match", "with_files"),
    [
        ({"changelog-producer": "lookup"}, "changelog-producer=lookup", True),
        ({"changelog-producer": "full-compaction"}, "changelog-producer=full-compaction", True),
        ({"deletion-vectors.enabled": "true"}, "deletion-vectors.enabled=true", True),
        ({"bucket": "-2"}, "bucket=-2", False),
        ({"sequence.snapshot-ordering": "true"}, "sequence.snapshot-ordering=true", True),
        ({"file.format": "orc"}, "file.format=orc", False),
        ({"data-file.external-paths": "file:///elsewhere"}, "data-file.external-paths set", True),
        (
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "theta_sketch"},
            "theta_sketch",
            True,
        ),
    ],
)
def test_a_refused_table_option_is_named_and_nothing_is_written(
    tmp_path: Path, options: dict[str, str], match: str, with_files: bool
) -> None:
    table = pk_table(tmp_path / "t", **options)
    if with_files:
        two_files(table)
    for mode in ("full", "minor"):
        assert_refused_writing_nothing(table, match, LakeformatError, mode=mode)


def test_cross_partition_upsert_is_refused_but_a_dynamic_bucket_table_is_compacted(tmp_path: Path) -> None:
    schema = schema_from_fields(FIELDS, ["p"], ["p", "k"], {"bucket": "-1"})
    cross = create_table(str(tmp_path / "cross"), dataclasses.replace(schema, primary_keys=("k",)))
    assert_refused_writing_nothing(
        cross, r"bucket=-1 and partition keys \['p'\] outside the primary key", mode="full"
    )
    dynamic = pk_table(tmp_path / "dynamic", bucket="-1")
    two_files(dynamic)
    rows = visible_rows(dynamic)
    result = open_table(dynamic.root).maintenance.compact_data(mode="full")
    assert result.to_json()["groups"] == 1 and visible_rows(dynamic) == rows
    assert {e.file.level for e in live(dynamic)} == {5}


def test_a_partition_with_two_bucket_counts_or_an_external_file_is_refused(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    two_files(table)
    Committer(table, "rescaler").commit(level0_entries(table, "a", 1, [(9, "z", 0, INSERT)], total_buckets=3))
    assert_refused_writing_nothing(table, r"several _TOTAL_BUCKETS values \['2', '3'\]", mode="full")
    other = pk_table(tmp_path / "o")
    two_files(other)
    (entry,) = level0_entries(other, "b", 0, [(1, "e", 0, INSERT)])
    entry.file.record["_EXTERNAL_PATH"] = "file:///somewhere/else.parquet"
    Committer(other, "external").commit([entry])
    assert_refused_writing_nothing(other, "at an external path", mode="full")


def test_first_row_compacts_in_full_mode_only(tmp_path: Path) -> None:
    """first-row readers skip level 0 and read levels >= 1 without merging: a minor unit into level 4 is refused."""
    table = pk_table(tmp_path / "t", **{"merge-engine": "first-row"})
    noise = [hashlib.sha256(str(k).encode()).hexdigest() * 2 for k in range(400)]
    append(table, "a", 0, [(k, noise[k], k, INSERT) for k in range(400)], level=5)
    for i in range(6):
        append(table, "a", 0, [(3, f"later-{i}", 400 + i, INSERT), (1000 + i, f"n{i}", 500 + i, INSERT)])
    assert_refused_writing_nothing(
        table, "merge-engine=first-row: .* level 4, below the max level 5", mode="minor"
    )
    open_table(table.root).maintenance.compact_data(mode="full")
    rows = {r[1]: r[2] for r in visible_rows(table)}
    assert rows[3] == noise[3] and rows[1005] == "n5", "the first version of each key"
    assert {e.file.level for e in live(table)} == {5}


def test_a_file_above_num_levels_makes_its_level_the_max(tmp_path: Path) -> None:
    table = pk_table(tmp_path / "t")
    append(table, "a", 0, [(k, f"x{k}", k, INSERT) for k in range(5)], level=7)
    append(table, "a", 0, [(k, f"y{k}", 10 + k, INSERT) for k in range(3)])
    rows = visible_rows(table)
    doc = open_table(table.root).maintenance.compact_data(mode="full").to_json()
    assert doc["buckets"][0]["outputLevel"] == 7 and {e.file.level for e in live(table)} == {7}
    assert visible_rows(table) == rows


def test_mode_is_refused_by_name_where_it_does_not_apply(tmp_path: Path) -> None:
    plain = create_table(str(tmp_path / "plain"), schema_from_fields([{"name": "x", "type": "INT"}]))
    assert_refused_writing_nothing(plain, "mode='full': only for primary-key tables", UsageError, mode="full")
    iceberg = IcebergMaintenance(
        cast(Any, SimpleNamespace(name="db.events"))
    )  # the refusal reads only the name
    with pytest.raises(UsageError, match="mode: only for Paimon tables"):
        iceberg.compact_data(mode="full")
    with pytest.raises(UsageError, match="mode: only for Paimon tables"):
        iceberg.check_compact_data(mode="minor")
