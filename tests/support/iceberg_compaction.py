"""One Iceberg table to compact on every surface (in-process, CLI, Spark job, operator), and what to compare after.

The table (:func:`build`): format v2, partitioned by ``cat`` (identity), five two-row appends in ``a`` and three in
``b`` (eight small files), then a position delete of one row of an ``a`` file and an equality delete of ``id = 103``
in ``b``; in the Hadoop layout (``<dir>/t``) or in an SQL catalog (``test:db.t``, SQLite in ``<dir>``). Every
surface runs on an identical copy restored at the same path (:func:`restore`), so file paths are comparable.

:func:`outcome` is what must be equal across surfaces: the rows read back, and per compaction snapshot its
summary (without the commit user), the data files it removed and the record counts and data sequence numbers of
the files it added.
"""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet
from tests.iceberg.scenarios import create_table, rows

# Two groups (a: 5 files, b: 3 files), each its own commit.
OPTIONS = {"min-input-files": "2", "partial-progress.enabled": "true", "partial-progress.max-commits": "2"}
COMMIT_USER = "lakeformat.commit-user"
# Result fields that differ between two runs of the same compaction.
VOLATILE = frozenset({"durationSeconds", "sessionSeconds", "job", "mode", "snapshotId", "snapshotIds"})


def catalog_properties(directory: Path) -> dict[str, str]:
    """The SQL catalog ``tests.iceberg.scenarios.create_table("sql", ...)`` made in ``directory``."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{directory}/catalog.db",
        "warehouse": f"file://{directory}/warehouse",
    }


def open_built(directory: Path, kind: str) -> IcebergTable:
    if kind == "sql":
        return open_catalog_table(
            "db.t", catalog_name="test", catalog_properties=catalog_properties(directory)
        )
    return open_path_table(str(directory / "t"))


def build(directory: Path, kind: str) -> IcebergTable:
    """The table described above, in ``directory`` (``kind``: ``"hadoop"`` or ``"sql"``)."""
    directory.mkdir(parents=True, exist_ok=True)
    table = create_table(kind, 2, directory)
    day = datetime.date(2024, 1, 1)
    for first in range(0, 10, 2):
        write.append(table, rows([first, first + 1], "a", day))
    for first in range(100, 106, 2):
        write.append(table, rows([first, first + 1], "b", day))
    table.refresh()
    head = table.snapshot(ref="main")
    assert head is not None
    a_file = min(f.path for f in live_files(table, head) if f.partition == ("a",))
    landing = directory / "landing"
    position = pa.table({"file_path": [a_file], "pos": pa.array([0], pa.int64())})
    equality = pa.table({"id": pa.array([103], pa.int64())})
    pyt = table.table
    pos_path = write_parquet(landing / "pos.parquet", position)
    eq_path = write_parquet(landing / "eq.parquet", equality)
    commit_delete_files(table, [data_file(pyt, pos_path, ("a",), content=DataFileContent.POSITION_DELETES)])
    commit_delete_files(
        table, [data_file(pyt, eq_path, ("b",), content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])]
    )
    return open_built(directory, kind)


def restore(pristine: Path, directory: Path) -> None:
    """Put the pristine copy back at ``directory`` (the same paths the table's metadata names)."""
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(pristine, directory)


def table_rows(table: IcebergTable) -> list[dict[str, Any]]:
    """The rows of main's head, read with pyarrow and the deletes applied here (pyiceberg 0.12 refuses to scan
    a table with equality deletes): position deletes by path and position, equality deletes on ``id`` to data
    files of the same partition with a smaller data sequence number."""
    table.refresh()
    head = table.snapshot(ref="main")
    assert head is not None
    files = live_files(table, head)
    positions: set[tuple[str, int]] = set()
    equality: list[tuple[tuple[object, ...], int, set[Any]]] = []
    for f in files:
        deleted = pq.read_table(f.path.removeprefix("file://")).to_pylist() if f.content else []
        if f.content == 1:
            positions |= {(row["file_path"], row["pos"]) for row in deleted}
        elif f.content == 2:
            equality.append((f.partition, f.data_sequence_number or 0, {row["id"] for row in deleted}))
    found = []
    for f in (f for f in files if f.content == 0):
        for pos, row in enumerate(pq.read_table(f.path.removeprefix("file://")).to_pylist()):
            dropped = (f.path, pos) in positions or any(
                partition == f.partition and (f.data_sequence_number or 0) < sequence and row["id"] in ids
                for partition, sequence, ids in equality
            )
            if not dropped:
                found.append(row)
    return sorted(found, key=lambda row: row["id"])


def parquet_files(directory: Path) -> set[str]:
    """Every Parquet file below ``directory``, relative to it."""
    return {p.relative_to(directory).as_posix() for p in directory.rglob("*.parquet")}


def outcome(table: IcebergTable, result: dict[str, Any]) -> dict[str, Any]:
    """Rows, and per compaction snapshot: summary, removed data files, added files' record counts and sequence."""
    table.refresh()
    commits = []
    for snapshot_id in result["snapshotIds"]:
        snapshot = table.snapshot(snapshot_id)
        assert snapshot is not None and snapshot.parent_snapshot_id is not None
        parent = table.snapshot(snapshot.parent_snapshot_id)
        assert parent is not None and snapshot.summary is not None
        before = {f.path: f for f in live_files(table, parent) if f.content == 0}
        after = {f.path: f for f in live_files(table, snapshot) if f.content == 0}
        summary = dict(snapshot.summary.additional_properties)
        summary.pop(COMMIT_USER, None)
        commits.append(
            {
                "operation": snapshot.summary.operation.value,
                "summary": summary,
                "removed": sorted(set(before) - set(after)),
                "added": sorted(
                    (f.record_count, f.data_sequence_number) for p, f in after.items() if p not in before
                ),
            }
        )
    return {"rows": table_rows(table), "commits": commits}


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in VOLATILE}
