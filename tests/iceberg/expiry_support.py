"""Helpers for the Iceberg expiry tests: small tables with distinct commit times, a crashing FileIO, and the
invariant every finished expiry must leave (everything the remaining snapshots reach exists; nothing else
an expiry could delete is left on the store)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.expiry_commit import JOURNAL_PREFIX
from airflow_lakeformat.core.iceberg.maintenance.expiry_files import to_fs_path
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.reach.reachability import reachable_files
from airflow_lakeformat.core.iceberg.write import write
from airflow_lakeformat.core.io import FileIO
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

DAY = datetime.date(2024, 1, 1)


class SimulatedCrash(BaseException):
    """The process dies here (a BaseException: no ``except Exception`` or retry loop swallows it)."""


class CrashingFileIO(FileIO):
    """The table's FileIO, dying at its ``crash_at``-th mutation (before or after performing it)."""

    def __init__(self, inner: FileIO, crash_at: int, after: bool = False) -> None:
        super().__init__(inner.fs, inner.protocol)
        self.crash_at = crash_at
        self.after = after
        self.calls: list[tuple[str, str]] = []

    def _step(self, op: str, path: str, perform: Any) -> Any:
        self.calls.append((op, path))
        if len(self.calls) == self.crash_at:
            if self.after:
                perform()
            raise SimulatedCrash(f"crash at mutation #{self.crash_at}: {op} {path}")
        return perform()

    def write_atomic(self, path: str, data: bytes) -> None:
        self._step("write_atomic", path, lambda: FileIO.write_atomic(self, path, data))

    def create_exclusive(self, path: str, data: bytes) -> None:
        self._step("create_exclusive", path, lambda: FileIO.create_exclusive(self, path, data))

    def delete_existing(self, path: str) -> bool:
        result: bool = self._step("delete", path, lambda: FileIO.delete_existing(self, path))
        return result

    def delete_objects(self, bucket: str, keys: list[str]) -> dict[str, tuple[str, str]]:
        result: dict[str, tuple[str, str]] = self._step(
            "delete_objects", bucket, lambda: FileIO.delete_objects(self, bucket, keys)
        )
        return result


def create(
    tmp_path: Path | str,
    kind: str = "hadoop",
    *,
    name: str = "t",
    format_version: int = 2,
    properties: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> IcebergTable:
    """An empty table: ``hadoop`` (at ``tmp_path/name``, or ``s3://...`` when ``tmp_path`` is a URI) or ``sql``."""
    props = {"format-version": str(format_version), **(properties or {})}
    if kind == "sql":
        catalog_properties = {
            "type": "sql",
            "uri": f"sqlite:///{tmp_path}/catalog.db",
            "warehouse": f"file://{tmp_path}/warehouse",
        }
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("test", **catalog_properties)
        catalog.create_namespace_if_not_exists("db")
        catalog.create_table(f"db.{name}", schema=SCHEMA, partition_spec=SPEC, properties=props)
        return open_catalog_table(f"db.{name}", catalog_name="test", catalog_properties=catalog_properties)
    root = f"{str(tmp_path).rstrip('/')}/{name}"
    HadoopLayoutCatalog(storage_options=storage_options).create_table(
        root, schema=SCHEMA, partition_spec=SPEC, properties=props
    )
    return open_path_table(root, storage_options)


def append(table: IcebergTable, ids: list[int], cat: str = "a", branch: str = "main") -> int:
    """One append; commits are spaced by a few ms so that every snapshot has its own timestamp."""
    time.sleep(0.005)
    return write.append(table, rows(ids, cat, DAY), branch=branch)


def history(table: IcebergTable) -> list[int]:
    """main: appends a, b, a; a copy-on-write delete rewriting a file; an append c: 5 snapshots, in order.
    The delete makes a data file reachable only from the first snapshots."""
    ids = [append(table, [1, 2], "a"), append(table, [3], "b"), append(table, [4], "a")]
    time.sleep(0.005)
    table.table.delete("id == 1")
    ids.append(table.table.metadata.current_snapshot_id)
    ids.append(append(table, [5], "c"))
    table.refresh()
    return ids


def timestamp(table: IcebergTable, snapshot_id: int) -> int:
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None
    return snapshot.timestamp_ms


def stored_files(table: IcebergTable) -> set[str]:
    """fsspec paths of every file an expiry may delete that is on the store under the table root: data
    files and Avro/Puffin/statistics metadata (not ``*.metadata.json``, ``version-hint.text`` or journals)."""
    io = table.io
    listed = [p.rstrip("/") for p in io.fs.find(table.root)]
    # Object stores may hold directory marker objects (``.../metadata``, written by some S3 clients).
    markers = {p.rsplit("/", 1)[0] for p in listed}
    found = set()
    for path in listed:
        name = path.rsplit("/", 1)[-1]
        if name.endswith(".metadata.json") or name == "version-hint.text" or name.startswith("."):
            continue
        if path not in markers:
            found.add(path)
    return found


def journals(table: IcebergTable) -> list[str]:
    return [
        n for n in table.io.list_names(table.io.join(table.root, "metadata")) if n.startswith(JOURNAL_PREFIX)
    ]


def reachable_paths(table: IcebergTable) -> set[str]:
    """fsspec paths of everything the table's snapshots reach."""
    table.refresh()
    reached = reachable_files(table, table.metadata.snapshots)
    paths = {to_fs_path(table.io, p) for p in reached.all_paths()}
    assert None not in paths
    return {p for p in paths if p is not None}


def assert_converged(table: IcebergTable) -> None:
    """Every file the remaining snapshots reach exists; no other deletable file is left under the table root
    (the tables of these tests have no orphans); no journal is left."""
    reached = reachable_paths(table)
    missing = [p for p in reached if not table.io.exists(p)]
    assert not missing, f"reachable files missing: {sorted(missing)[:5]}"
    leftovers = stored_files(table) - reached
    assert not leftovers, f"unreachable files left: {sorted(leftovers)[:5]}"
    assert journals(table) == []


def table_rows(table: IcebergTable, snapshot_id: int | None = None) -> list[int]:
    table.refresh()
    scan = table.table.scan(snapshot_id=snapshot_id)
    return sorted(scan.to_arrow().column("id").to_pylist())


def arrow_rows(ids: list[int], cat: str = "a") -> pa.Table:
    return rows(ids, cat, DAY)
