"""The one table-statistics model: the small-file rule (under 75% of the target size), counts, JSON, summary."""

from __future__ import annotations

from pathlib import Path

from airflow_lakeformat import open_table
from airflow_lakeformat.core.statistics import SMALL_FILE_RATIO, TableStatistics, small_file_threshold
from tests.support.tables import TableBuilder

MIB = 1024 * 1024


def test_a_small_file_is_under_three_quarters_of_the_target() -> None:
    assert SMALL_FILE_RATIO == 0.75 and small_file_threshold(128 * MIB) == 96 * MIB
    stats = TableStatistics.build(
        format="iceberg",
        table="db.t",
        snapshot_id=7,
        snapshot_count=2,
        target_file_size=100,
        data_files=[(74, 1, "a"), (75, 2, "a"), (100, 3, "b"), (10, 4, None)],
        delete_files=[5, 6],
        manifests=[40, 60, 80],
    )
    assert (stats.small_file_threshold, stats.small_file_count, stats.small_file_share) == (75, 2, 0.5)
    assert (stats.data_file_count, stats.data_file_bytes, stats.record_count) == (4, 259, 10)
    assert (stats.partition_count, stats.delete_file_count, stats.delete_file_bytes) == (3, 2, 11)
    assert (stats.manifest_count, stats.manifest_bytes) == (3, 180)
    document = stats.to_json()
    assert document["smallFileShare"] == 0.5 and document["targetFileSize"] == 100
    assert all("_" not in key for key in document)
    line = stats.summary()
    assert "\n" not in line and "2 small (50%" in line and "4 data files" in line and "2 snapshots" in line


def test_an_empty_table_has_no_snapshot_and_no_share() -> None:
    stats = TableStatistics.build(
        format="paimon", table="/wh/t", snapshot_id=None, snapshot_count=0, target_file_size=128 * MIB,
        data_files=[], delete_files=[], manifests=[],
    )  # fmt: skip
    assert stats.small_file_share == 0.0 and stats.summary() == "/wh/t (paimon): no snapshot"


def test_paimon_target_size_is_the_tables_else_by_primary_keys(tmp_path: Path) -> None:
    """CoreOptions.targetFileSize(hasPrimaryKey): 128 MiB with primary keys, 256 MiB without, unless set."""
    cases = (
        ("pk", ["k"], {}, 128 * MIB),
        ("append", [], {}, 256 * MIB),
        ("set", [], {"target-file-size": "1 kb"}, 1024),
    )
    for name, keys, options, target in cases:
        builder = TableBuilder(tmp_path / name, [("k", "INT NOT NULL"), ("v", "INT")], primary_keys=keys,
                               options=options)  # fmt: skip
        builder.commit(
            [builder.entry(file_size=700), builder.entry(file_size=800), builder.entry(file_size=2000)]
        )
        stats = open_table(str(tmp_path / name)).statistics()
        assert stats.target_file_size == target, name
        # 75% of 1 kb is 768 bytes: one of the three files (700 B) is small; every file is under 96 MiB.
        assert stats.small_file_count == (1 if name == "set" else 3), name
        assert stats.data_file_count == 3 and stats.record_count == 3 and stats.partition_count == 1


def test_paimon_inspect_reports_the_primary_key_default(tmp_path: Path) -> None:
    builder = TableBuilder(tmp_path / "t", [("k", "INT NOT NULL"), ("v", "INT")], primary_keys=["k"])
    builder.commit([builder.entry()])
    inspection = open_table(str(tmp_path / "t")).inspect()
    assert inspection.properties["target-file-size"] == {"value": "256 mb", "default": "128 mb", "set": False}
