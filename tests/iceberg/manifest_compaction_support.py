"""Tables with many manifests for the manifest-compaction tests, and readers of what compaction wrote.

``many_manifests`` builds, with pyiceberg, a table of ``appends`` fast-appended commits (one manifest each)
under an identity spec on ``cat``, then evolves the spec (adds identity on ``d``) and appends ``appends_after``
more, with a tag and a branch (with its own append) along the way, then a delete of whole files (a manifest of
DELETED entries only: pyiceberg writes tombstones into a manifest of their own) and, on v2, position and equality delete manifests.
"""

from __future__ import annotations

import datetime
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestFile
from pyiceberg.transforms import IdentityTransform

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, local_path, write_parquet
from tests.iceberg.scenarios import SCHEMA, SPEC, rows

CATS = "abcdefg"
DAYS = [datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in range(5)]


@dataclass
class Built:
    table: IcebergTable
    kind: str
    format_version: int
    root: Path
    reopen: Any = None  # () -> a second, independent IcebergTable on the same table
    snapshots: list[int] = field(default_factory=list)


def new_table(kind: str, format_version: int, tmp_path: Path, **properties: str) -> Built:
    props = {"format-version": str(format_version), **properties}
    if kind == "sql":
        catalog_properties = {
            "type": "sql",
            "uri": f"sqlite:///{tmp_path}/catalog.db",
            "warehouse": f"file://{tmp_path}/warehouse",
        }
        catalog = SqlCatalog("test", **catalog_properties)
        catalog.create_namespace_if_not_exists("db")
        catalog.create_table("db.t", schema=SCHEMA, partition_spec=SPEC, properties=props)

        def reopen() -> IcebergTable:
            return open_catalog_table("db.t", catalog_name="test", catalog_properties=catalog_properties)

        table = reopen()
        return Built(table, kind, format_version, Path(local_path(table.table.location())), reopen)
    root = tmp_path / "t"
    HadoopLayoutCatalog().create_table(str(root), schema=SCHEMA, partition_spec=SPEC, properties=props)
    return Built(open_path_table(str(root)), kind, format_version, root, lambda: open_path_table(str(root)))


def many_manifests(
    kind: str,
    format_version: int,
    tmp_path: Path,
    *,
    appends: int = 30,
    appends_after: int = 10,
    deletes: bool = True,
    equality_deletes: bool = True,
    **properties: str,
) -> Built:
    built = new_table(kind, format_version, tmp_path, **properties)
    table = built.table
    pyt = table.table
    for i in range(appends):
        built.snapshots.append(write.append(table, rows([i, 1000 + i], CATS[i % len(CATS)], DAYS[i % 5])))
        if i == appends // 2:
            pyt.manage_snapshots().create_tag(built.snapshots[-1], "t1").commit()
            pyt.manage_snapshots().create_branch(built.snapshots[-1], "b1").commit()
            write.append(table, rows([5000], "z", DAYS[0]), branch="b1")
    with pyt.update_spec() as update:
        update.add_field("d", IdentityTransform(), "d_identity")
    for i in range(appends_after):
        built.snapshots.append(write.append(table, rows([2000 + i], CATS[i % 3], DAYS[i % 5])))
    # Whole files: a manifest holding only DELETED entries. (pyiceberg's next fast append would drop it, so
    # it comes last; the delete-file commits below keep every parent manifest.)
    pyt.delete("cat == 'b'")
    built.snapshots.append(pyt.metadata.current_snapshot_id)
    if deletes and format_version >= 2:
        target = next(
            entry.data_file
            for manifest in data_manifests(table)
            if manifest.partition_spec_id == 1
            for entry in manifest.fetch_manifest_entry(pyt.io)
        )
        partition = tuple(target.partition[i] for i in range(len(target.partition)))
        pos_path = write_parquet(
            tmp_path / "landing" / "pos-deletes.parquet",
            pa.table({"file_path": [target.file_path], "pos": pa.array([0], pa.int64())}),
        )
        position = data_file(pyt, pos_path, partition, content=DataFileContent.POSITION_DELETES)
        built.snapshots.append(commit_delete_files(table, [position]))
    if deletes and equality_deletes and format_version >= 2:
        eq_path = write_parquet(
            tmp_path / "landing" / "eq-deletes.parquet", pa.table({"id": pa.array([3], pa.int64())})
        )
        equality = data_file(
            pyt, eq_path, partition, content=DataFileContent.EQUALITY_DELETES, equality_ids=[1]
        )
        built.snapshots.append(commit_delete_files(table, [equality]))
    return built


# -- reading what was written ----------------------------------------------------------------------


def manifest_list(table: IcebergTable, snapshot_id: int | None = None) -> list[ManifestFile]:
    snapshot = table.snapshot(snapshot_id)
    assert snapshot is not None
    from airflow_lakeformat.core.iceberg.metadata.manifests import read_manifests

    return read_manifests(table, snapshot)


def data_manifests(table: IcebergTable, snapshot_id: int | None = None) -> list[ManifestFile]:
    return [m for m in manifest_list(table, snapshot_id) if m.content == ManifestContent.DATA]


def delete_manifests(table: IcebergTable, snapshot_id: int | None = None) -> list[ManifestFile]:
    return [m for m in manifest_list(table, snapshot_id) if m.content == ManifestContent.DELETES]


def resolved_entries(table: IcebergTable, snapshot_id: int | None = None) -> dict[str, tuple[Any, ...]]:
    """path -> (content, snapshot id, data seq, file seq) of the live entries, inheritance applied (pyiceberg)."""
    result = {}
    for manifest in manifest_list(table, snapshot_id):
        for entry in manifest.fetch_manifest_entry(table.table.io, discard_deleted=True):
            df = entry.data_file
            result[df.file_path] = (
                int(df.content),
                entry.snapshot_id,
                entry.sequence_number,
                entry.file_sequence_number,
            )
    return result


def raw_entries(manifest_path: str) -> list[dict[str, Any]]:
    """The manifest's records exactly as stored (no inheritance), decoded with fastavro."""
    with open(local_path(manifest_path), "rb") as f:
        return list(fastavro.reader(io.BytesIO(f.read())))


def table_files(root: Path) -> set[str]:
    """Every file under the table root (relative paths)."""
    found = set()
    for directory, _dirs, names in os.walk(root):
        for name in names:
            found.add(os.path.relpath(os.path.join(directory, name), root))
    return found


def scan_rows(table: IcebergTable, snapshot_id: int | None = None) -> list[tuple[Any, ...]]:
    arrow = table.table.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(zip(*(arrow.column(n).to_pylist() for n in ("id", "cat", "d")), strict=True))
