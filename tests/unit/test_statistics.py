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


def test_paimon_deletion_vector_index_files_are_its_delete_files(tmp_path: Path) -> None:
    """The index manifest's DELETION_VECTORS files count as delete files; other index files (hash) do not."""
    import io
    import json

    import fastavro

    root = tmp_path / "t"
    builder = TableBuilder(root, [("k", "INT NOT NULL"), ("v", "INT")], primary_keys=["k"],
                           options={"deletion-vectors.enabled": "true"})  # fmt: skip
    builder.commit([builder.entry(file_size=100)])
    schema = {
        "type": "record",
        "name": "IndexManifestEntry",
        "fields": [
            {"name": "_KIND", "type": "int"},
            {"name": "_PARTITION", "type": "bytes"},
            {"name": "_BUCKET", "type": "int"},
            {"name": "_INDEX_TYPE", "type": "string"},
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_ROW_COUNT", "type": "long"},
            {"name": "_VERSION", "type": "int"},
        ],
    }
    rows = [
        ("DELETION_VECTORS", "index-dv-0", 33),
        ("HASH", "index-hash-0", 44),
        ("DELETION_VECTORS", "index-dv-1", 7),
    ]
    records = [
        {"_KIND": 0, "_PARTITION": b"", "_BUCKET": 0, "_INDEX_TYPE": kind, "_FILE_NAME": name, "_FILE_SIZE": size,
         "_ROW_COUNT": 1, "_VERSION": 1}
        for kind, name, size in rows
    ]  # fmt: skip
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(schema), records)
    (root / "manifest" / "index-manifest-test-0").write_bytes(buffer.getvalue())
    snapshot_file = root / "snapshot" / "snapshot-1"
    document = json.loads(snapshot_file.read_text())
    snapshot_file.write_text(json.dumps({**document, "indexManifest": "index-manifest-test-0"}))

    stats = open_table(str(root)).statistics()
    assert (stats.delete_file_count, stats.delete_file_bytes, stats.data_file_count) == (2, 40, 1)
