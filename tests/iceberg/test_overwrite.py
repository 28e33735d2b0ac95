"""Partition overwrite of Iceberg tables (``core/iceberg/write/overwrite*.py``, ``write.overwrite``): dynamic and
by a filter, matched by value (null and transform partitions), one ``overwrite`` snapshot, validated against
concurrent commits, dry run. Java's agreement: ``tests/interop/test_iceberg_overwrite_interop.py``."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from airflow_lakeformat.core.errors import (
    CommitConflictError,
    RegisterError,
    UnsupportedFormatError,
    UsageError,
)
from airflow_lakeformat.core.iceberg.catalog.catalog import wrap_table
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.write import append, overwrite
from tests.unit.test_cli import run

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "cat", StringType()),
    NestedField(3, "ts", TimestampType()),
)


def _table(tmp_path: Path, spec: PartitionSpec) -> IcebergTable:
    tmp_path.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    return wrap_table(catalog.create_table("db.t", SCHEMA, partition_spec=spec))


def _rows(*rows: tuple[int, str | None, dt.datetime | None]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "cat": c, "ts": t} for i, c, t in rows], schema=SCHEMA.as_arrow())


def _ids(table: IcebergTable) -> list[int]:
    return sorted(table.table.refresh().scan().to_arrow().column("id").to_pylist())


BY_CAT = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
BY_DAY = PartitionSpec(PartitionField(3, 1000, DayTransform(), "ts_day"))
DAY1, DAY2 = dt.datetime(1969, 12, 31, 23, 59), dt.datetime(2024, 5, 1, 1)


def test_dynamic_overwrite_replaces_the_input_partitions_by_value_null_included(tmp_path: Path) -> None:
    table = _table(tmp_path, BY_CAT)
    append(table, _rows((1, "a", None), (2, "b", None), (3, None, None), (4, "a", None)))
    result = overwrite(table, _rows((10, "a", None), (11, None, None)))
    assert _ids(table) == [2, 10, 11]  # a and null replaced, b kept
    snapshot = table.metadata.snapshot_by_id(result.snapshot_id or 0)
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.operation.value == "overwrite" and len(table.metadata.snapshots) == 2
    assert snapshot.summary["deleted-records"] == "3" and snapshot.summary["added-records"] == "2"
    document = result.to_json()
    assert document["mode"] == "dynamic" and document["replacedRows"] == 3
    assert sorted(p["partition"]["cat"] or "" for p in document["replacedPartitions"]) == ["", "a"]


def test_dynamic_overwrite_of_a_day_partition_and_its_dry_run(tmp_path: Path) -> None:
    table = _table(tmp_path, BY_DAY)
    append(table, _rows((1, "x", DAY1), (2, "x", DAY2), (3, "x", DAY2.replace(hour=23)), (4, "x", None)))
    before = table.metadata.current_snapshot_id
    plan = overwrite(table, _rows((10, "y", DAY2.replace(hour=5))), dry_run=True)
    assert plan.snapshot_id is None and table.refresh().metadata.current_snapshot_id == before
    assert plan.to_json()["replacedPartitions"] == [{"specId": 0, "partition": {"ts_day": "2024-05-01"}}]
    assert plan.to_json()["replacedRows"] == 2 and plan.to_json()["inputPartitions"] == [
        {"ts_day": "2024-05-01"}
    ]
    overwrite(table, _rows((10, "y", DAY2.replace(hour=5))))
    assert _ids(table) == [1, 4, 10]  # 1969-12-31 (day -1) and the null day kept


def test_filter_overwrite_refuses_rows_outside_and_partial_files(tmp_path: Path) -> None:
    table = _table(tmp_path, BY_CAT)
    append(table, _rows((1, "a", None), (2, "b", None)))
    with pytest.raises(RegisterError, match=r"row 2: outside the overwrite filter"):
        overwrite(table, _rows((10, "a", None), (11, "b", None)), row_filter="cat = 'a'")
    with pytest.raises(UsageError, match="overwrite filter"):
        overwrite(table, _rows((10, "a", None)), row_filter="nope = 1")
    append(table, _rows((5, "c", None), (6, "c", None)))
    with pytest.raises(UnsupportedFormatError, match="some but not all rows"):
        overwrite(table, _rows((0, "x", None)), row_filter="id < 6")  # c's file holds ids 5 and 6
    overwrite(table, _rows((0, "x", None)), row_filter="id < 3")  # all of a's and b's files, none of c's
    assert _ids(table) == [0, 5, 6]
    table = _table(tmp_path / "2", BY_CAT)
    append(table, _rows((1, "a", None), (2, "b", None)))
    assert _ids(table) == [1, 2] and len(table.refresh().metadata.snapshots) == 1
    overwrite(table, _rows((10, "a", None)), row_filter="cat = 'a'")
    assert _ids(table) == [2, 10]
    overwrite(table, _rows((20, "c", None)), row_filter="*")
    assert _ids(table) == [20]


def test_concurrent_append_to_an_overwritten_partition_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that lands between our planning and our commit: in another partition the overwrite is
    re-planned on the new head and commits; in a partition being overwritten it is a conflict, nothing of ours
    is committed and the files we wrote are deleted."""
    from airflow_lakeformat.core.iceberg.write import write as module

    table = _table(tmp_path, BY_CAT)
    append(table, _rows((1, "a", None), (2, "b", None)))
    other = wrap_table(table.table.catalog.load_table("db.t"))
    real = module.stage_overwrite
    raced: list[pa.Table] = []

    def racing(tx: Any, *args: Any, **kwargs: Any) -> Any:
        if raced:
            append(other, raced.pop())
        return real(tx, *args, **kwargs)

    monkeypatch.setattr(module, "stage_overwrite", racing)
    raced.append(_rows((3, "b", None)))
    overwrite(table, _rows((10, "a", None)))
    assert _ids(table) == [2, 3, 10]
    written_before = _parquet_files(tmp_path)
    raced.append(_rows((4, "a", None)))
    with pytest.raises(CommitConflictError, match="committed since the write started"):
        overwrite(table, _rows((11, "a", None)))
    assert _ids(table) == [2, 3, 4, 10]  # the concurrent append survived; our row was not committed
    assert len(_parquet_files(tmp_path) - written_before) == 1  # only the racing append's file is left


def _parquet_files(root: Path) -> set[Path]:
    return set(root.rglob("*.parquet"))


def test_cli_write_overwrite_dynamic_filter_and_dry_run(tmp_path: Path) -> None:
    table = _table(tmp_path, BY_CAT)
    append(table, _rows((1, "a", None), (2, "b", None)))
    root = table.table.metadata.location
    source = tmp_path / "rows.parquet"
    pq.write_table(_rows((10, "a", None)), source)
    catalog = ["--catalog", "default", "--catalog-property", "type=sql",
               "--catalog-property", f"uri=sqlite:///{tmp_path}/c.db",
               "--catalog-property", f"warehouse=file://{tmp_path}"]  # fmt: skip
    code, out, err = run(
        "write", "db.t", *catalog, "--from", str(source), "--overwrite", "--dry-run", "--json"
    )
    assert code == 0, err
    document = json.loads(out)
    assert (
        document["dryRun"] and document["overwrite"]["replacedRows"] == 1 and document["snapshotId"] is None
    )
    code, out, err = run("write", "db.t", *catalog, "--from", str(source), "--overwrite-filter", "cat = 'b'")
    assert code == 11 and "outside the overwrite filter" in err, (code, err)
    code, out, err = run("write", "db.t", *catalog, "--from", str(source), "--overwrite", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert (
        document["commitKind"] == "OVERWRITE" and document["filesDeleted"] == 1 and document["rowsAdded"] == 1
    )
    assert _ids(table) == [2, 10] and root
