"""Helpers for the Airflow tests on Iceberg tables: a SQLite catalog connection, tables, batches, old files."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write.write import append
from tests.airflow.helpers import set_connection

SCHEMA = pa.schema([pa.field("dt", pa.string()), pa.field("v", pa.int64())])


def sql_catalog_properties(warehouse: Path) -> dict[str, str]:
    """An embedded SQL catalog on SQLite whose tables live under ``warehouse``."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{warehouse / 'iceberg_catalog.db'}",
        "warehouse": f"file://{warehouse}",
    }


def catalog_connection(
    monkeypatch: pytest.MonkeyPatch, warehouse: Path, conn_id: str = "lakeformat_default", **extra: Any
) -> dict[str, str]:
    """``conn_id`` pointing at ``warehouse`` with its SQLite catalog; returns the catalog properties."""
    properties = sql_catalog_properties(warehouse)
    set_connection(
        monkeypatch, conn_id, host=str(warehouse), extra={"iceberg_catalog_properties": properties, **extra}
    )
    return properties


def catalog_table(warehouse: Path, identifier: str = "db.events") -> IcebergTable:
    """A new unpartitioned v2 table ``identifier`` in the warehouse's SQLite catalog."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import load_catalog_from_properties

    catalog = load_catalog_from_properties(None, sql_catalog_properties(warehouse))
    namespace = identifier.rpartition(".")[0]
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
    catalog.create_table(identifier, schema=SCHEMA)
    return reopen_catalog_table(warehouse, identifier)


def reopen_catalog_table(warehouse: Path, identifier: str = "db.events") -> IcebergTable:
    return open_catalog_table(identifier, catalog_properties=sql_catalog_properties(warehouse))


def path_table(root: str, storage_options: dict[str, Any] | None = None) -> IcebergTable:
    """A new unpartitioned v2 table in the Hadoop layout at ``root`` (local path or ``s3://``)."""
    HadoopLayoutCatalog(storage_options=storage_options).create_table(root, schema=SCHEMA)
    return open_path_table(root, storage_options)


def batch(rows: int, dt: str = "2024-01-01") -> pa.Table:
    return pa.table({"dt": [dt] * rows, "v": pa.array(range(rows), pa.int64())}, schema=SCHEMA)


def append_batch(table: IcebergTable, rows: int, dt: str = "2024-01-01", branch: str = "main") -> int:
    """Append ``rows`` rows as one snapshot (pyiceberg's append through the core); the new head's id."""
    table.refresh()
    return append(table, batch(rows, dt), branch=branch)


def plant_old_file(table: IcebergTable, days: float = 4) -> str:
    """A data file no snapshot references under the table's ``data/``, ``days`` old; its fs path."""
    path = table.io.join(table.root, "data", f"orphan-{uuid.uuid4()}.parquet")
    table.io.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    table.io.fs.pipe_file(path, b"never committed")
    if table.io.is_local:
        old = time.time() - days * 86400
        os.utime(path, (old, old))
    return path


def snapshot_ids(table: IcebergTable) -> list[int]:
    table.refresh()
    return [s.snapshot_id for s in table.metadata.snapshots]


def head(table: IcebergTable, branch: str = "main") -> int:
    table.refresh()
    return table.metadata.refs[branch].snapshot_id


def live_rows(table: IcebergTable) -> int:
    table.refresh()
    return table.table.scan().to_arrow().num_rows
