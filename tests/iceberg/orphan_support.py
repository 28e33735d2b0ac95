"""Tables with planted orphans for the Iceberg orphan-cleanup tests (local disk; S3 in test_orphans_s3)."""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)
OLD_DAYS = 10


def set_age(path: Path, days: float) -> None:
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))


def age_tree(root: Path, days: float) -> None:
    for directory, _, names in os.walk(root):
        for name in names:
            set_age(Path(directory) / name, days)


def plant(path: Path, days: float, data: bytes = b"orphan") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    set_age(path, days)
    return path


def files_under(root: Path) -> set[str]:
    """Every file below ``root`` except the tests' own ``*.jsonl`` audit reports."""
    return {str(Path(d) / n) for d, _, names in os.walk(root) for n in names if not n.endswith(".jsonl")}


@dataclass
class PlantedTable:
    """A Hadoop-layout table ``<tmp>/events`` with old and fresh orphans and a sibling ``events_v2``."""

    table: IcebergTable
    root: Path
    old_orphans: set[str] = field(default_factory=set)  # at build time: planted + out of the log
    planted_old: set[str] = field(default_factory=set)
    fresh_orphans: set[str] = field(default_factory=set)
    never: set[str] = field(default_factory=set)  # hidden or outside: never candidates
    sibling: Path = Path()

    def out_of_log(self, min_age_days: float = 3) -> set[str]:
        """Old ``v<N>.metadata.json`` files that are neither current nor in the metadata log now."""
        table = open_path_table(str(self.root))
        keep = {e.metadata_file.removeprefix("file:") for e in table.metadata.metadata_log}
        keep.add(table.metadata_location.removeprefix("file:"))
        cutoff = time.time() - min_age_days * 86400
        return {
            str(p)
            for p in (self.root / "metadata").glob("v*.metadata.json")
            if str(p) not in keep and p.stat().st_mtime < cutoff
        }

    def expected(self, min_age_days: float = 3) -> set[str]:
        """The orphans a run with ``older_than=min_age_days`` must find now."""
        return self.planted_old | self.out_of_log(min_age_days)


def build_planted(tmp_path: Path, commits: int = 4, previous_versions_max: int = 2) -> PlantedTable:
    """Commits enough metadata versions that some fall out of ``metadata-log`` (orphans Java finds too)."""
    root = tmp_path / "events"
    HadoopLayoutCatalog().create_table(
        str(root),
        schema=SCHEMA,
        partition_spec=SPEC,
        properties={
            "format-version": "2",
            "write.metadata.previous-versions-max": str(previous_versions_max),
        },
    )
    table = open_path_table(str(root))
    for i in range(commits):
        write.append(table, rows([i * 10, i * 10 + 1], "a" if i % 2 else "b", DAY))
    age_tree(root, OLD_DAYS)  # every table file is old: only the valid set keeps them
    planted = PlantedTable(table.refresh(), root)
    old = [
        "data/orphan-0.parquet",
        "data/cat=a/orphan-1.parquet",
        "data/cat=zz/deep/er/orphan-2.parquet",
        "metadata/0f1e2d3c-m0.avro",
        "metadata/snap-4242-0-0f1e2d3c.avro",
        "metadata/00007-0f1e2d3c.metadata.json",
        "stray.txt",
    ]
    for rel in old:
        planted.planted_old.add(str(plant(root / rel, OLD_DAYS)))
    planted.old_orphans |= planted.planted_old
    metadata = planted.table.metadata
    in_log = {e.metadata_file.removeprefix("file:") for e in metadata.metadata_log}
    current = planted.table.metadata_location.removeprefix("file:")
    for path in (root / "metadata").glob("v*.metadata.json"):
        if str(path) not in in_log and str(path) != current:
            planted.old_orphans.add(str(path))  # fell out of the metadata log
    for rel in ("data/fresh.parquet", "metadata/fresh-m0.avro"):
        planted.fresh_orphans.add(str(plant(root / rel, 0.01)))
    for rel in ("data/_SUCCESS", "data/.orphan-0.parquet.crc", "data/_temporary/0/part-0.parquet"):
        planted.never.add(str(plant(root / rel, OLD_DAYS)))
    planted.sibling = tmp_path / "events_v2"
    for rel in ("data/sibling.parquet", "metadata/v1.metadata.json"):
        planted.never.add(str(plant(planted.sibling / rel, OLD_DAYS)))
    return planted
