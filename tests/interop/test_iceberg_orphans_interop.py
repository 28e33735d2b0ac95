"""Orphan cleanup against real Java Iceberg 1.10.2: ``remove_orphan_files(dry_run => true)`` and our dry run
find the same orphans, then our real run removes exactly those, and Java still reads every snapshot.

The oracle's Java-built tables (v1, v2 merge-on-read with position deletes, v1 upgraded to v2, three partition
specs, tags and branches with a statistics file, 42 commits whose old metadata files fell out of the
metadata log, v3 with deletion vectors, and a JDBC-catalog table) get planted files: old orphans (data files
at several depths, a manifest, a manifest list, a metadata.json, a statistics file, a stray file at the
root), fresh orphans, hidden files (``_SUCCESS``, ``_temporary/``, ``.crc``) and a sibling table directory
``<name>_v2`` next to the table (PR #12254's case). Every file of the tables is aged ten days, so only the
valid set keeps them. Both sides use the same cutoff (three days before the run).

Not covered here: ``s3a://`` spellings (the oracle's Spark has no S3 filesystem: no ``hadoop-aws``, and
the runtime jar lacks HttpClient 5 for ``S3FileIO``); ``tests/iceberg/test_orphans_s3.py`` covers them on
SeaweedFS.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table, wrap_table
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import DEFAULT_OLDER_THAN
from airflow_lakeformat.core.iceberg.maintenance.orphans import remove_orphan_files
from airflow_lakeformat.core.iceberg.metadata.location import LocationNormaliser
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from tests.support.java_iceberg import JavaIcebergWarehouse, pyiceberg_sql_catalog

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TABLES = ("v1", "v2_mor", "v1_to_v2", "partition_evolution", "tags_branches", "many_commits", "v3_dv")
JDBC = "jdbc_basic"
OLD = 10 * 86400


def identifier(name: str) -> str:
    return f"jc.jdb.{name}" if name == JDBC else f"hc.db.{name}"


def age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def plant(path: Path, seconds: float) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"planted orphan")
    age(path, seconds)
    return str(path)


def plant_table(root: Path) -> set[str]:
    """Age the table, plant files; returns the planted old orphans (local paths)."""
    for directory, _, names in os.walk(root):
        for name in names:
            age(Path(directory) / name, OLD)
    partition_dir = next((p for p in sorted((root / "data").iterdir()) if p.is_dir()), root / "data")
    old = {
        plant(root / "data" / "orphan-0.parquet", OLD),
        plant(partition_dir / "orphan-1.parquet", OLD),
        plant(partition_dir / "deep" / "er" / "orphan-2.parquet", OLD),
        plant(root / "metadata" / "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9-m0.avro", OLD),
        plant(root / "metadata" / "snap-4242-1-0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9.avro", OLD),
        plant(root / "metadata" / "00099-0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9.metadata.json", OLD),
        plant(root / "metadata" / "4242-0f1e2d3c.stats", OLD),
        plant(root / "stray.txt", OLD),
    }
    plant(root / "data" / "fresh.parquet", 60)
    plant(root / "metadata" / "fresh-m0.avro", 60)
    plant(root / "data" / "_SUCCESS", OLD)
    plant(root / "data" / "_temporary" / "0" / "part-0.parquet", OLD)
    plant(root / "data" / ".orphan-0.parquet.crc", OLD)
    plant(root.parent / f"{root.name}_v2" / "data" / "sibling.parquet", OLD)
    plant(root.parent / f"{root.name}_v2" / "metadata" / "v1.metadata.json", OLD)
    plant(root.parent / f"{root.name}_backup.parquet", OLD)
    return old


def open_ours(warehouse: JavaIcebergWarehouse, name: str) -> IcebergTable:
    if name == JDBC:
        return wrap_table(pyiceberg_sql_catalog(warehouse).load_table(f"jdb.{name}"))
    return open_path_table(warehouse.tables[name]["path"])


def normalised(paths: Any) -> set[str]:
    normaliser = LocationNormaliser()
    return {normaliser.parse(p).path for p in paths}


def java_dry_run_and_rows(name: str, older_than_ms: int) -> list[list[str]]:
    """Oracle commands: Java's orphan dry run with an explicit cutoff, then its rows at every snapshot."""
    arguments = json.dumps({"dry_run": True, "older_than": {"timestamp_ms": older_than_ms}})
    return [
        ["call", "--procedure", "remove_orphan_files", "--table", identifier(name), "--args", arguments],
        ["rows", "--table", identifier(name), "--all"],
    ]


def tree(root: Path) -> set[str]:
    return {str(Path(d) / n) for d, _, names in os.walk(root) for n in names}


def test_same_orphans_as_java_then_a_real_run_removes_exactly_them(
    fresh_java_iceberg_warehouse: JavaIcebergWarehouse,
) -> None:
    warehouse = fresh_java_iceberg_warehouse
    names = [*TABLES, JDBC]
    # Java: a statistics file on one table, and old metadata files falling out of the log on another.
    warehouse.batch(
        [
            ["call", "--procedure", "compute_table_stats", "--table", identifier("tags_branches")],
            ["sql", "--statement", "ALTER TABLE hc.db.many_commits SET TBLPROPERTIES "
             "('write.metadata.previous-versions-max' = '3')"],
        ]
    )  # fmt: skip
    roots = {name: Path(warehouse.tables[name]["path"]) for name in names}
    planted = {name: plant_table(roots[name]) for name in names}
    now = time.time()
    cutoff = now - DEFAULT_OLDER_THAN.total_seconds()
    older_than = {"timestamp_ms": int(cutoff * 1000)}

    commands = [c for name in names for c in java_dry_run_and_rows(name, older_than["timestamp_ms"])]
    results = warehouse.batch(commands)
    java = {
        name: normalised(r["orphan_file_location"] for r in results[2 * i]) for i, name in enumerate(names)
    }
    rows_before = {name: results[2 * i + 1] for i, name in enumerate(names)}

    ours: dict[str, set[str]] = {}
    for name in names:
        table = open_ours(warehouse, name)
        statistics = [s.statistics_path for s in table.metadata.statistics]
        if name == "tags_branches":
            assert statistics, "compute_table_stats wrote no statistics file"
        document = remove_orphan_files(table, clock=lambda: now).to_json()
        assert document["prefixMismatches"] == [] and not document["orphanPathsTruncated"]
        ours[name] = normalised(document["orphanPaths"])
        assert ours[name] == java[name], name
        # and both found what was planted (plus, for many_commits, the metadata files out of the log)
        assert planted[name] <= ours[name], name
        extra = ours[name] - planted[name]
        if name == "many_commits":
            assert extra and all(p.endswith(".metadata.json") for p in extra)
        else:
            assert extra == set(), name

    for name in names:
        before = tree(roots[name].parent)
        result = remove_orphan_files(open_ours(warehouse, name), dry_run=False, clock=lambda: now)
        assert result.to_json()["failed"] == []
        assert before - tree(roots[name].parent) == java[name], name

    after = warehouse.batch(
        [c for name in names for c in java_dry_run_and_rows(name, older_than["timestamp_ms"])]
    )
    for i, name in enumerate(names):
        assert after[2 * i] == [], f"Java still finds orphans in {name}: {after[2 * i]}"
        assert after[2 * i + 1] == rows_before[name], f"Java reads other rows from {name} after our cleanup"
