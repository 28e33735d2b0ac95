"""One evolving table, built by pyiceberg, in a SQL catalog or in the Hadoop layout, format v1 or v2.

History: appends (identity partition), a tag and a branch (with its own append), a delete (copy-on-write
rewrite), an overwrite, a renamed column, a day-partition spec, a bucket-partition spec, and (v2) a delete
manifest with position and equality delete files.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "s", StringType(), required=False),
    NestedField(4, "d", DateType(), required=False),
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))


def rows(ids: list[int], cat: str, day: datetime.date, *, name_column: str = "s") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "cat": pa.array([cat] * len(ids), pa.string()),
            name_column: pa.array([f"v{i}" for i in ids], pa.string()),
            "d": pa.array([day] * len(ids), pa.date32()),
        }
    )


@dataclass
class Scenario:
    table: IcebergTable
    kind: str
    format_version: int
    snapshots: list[int] = field(default_factory=list)
    tmp: Path = Path()


def create_table(kind: str, format_version: int, tmp_path: Path, name: str = "t") -> IcebergTable:
    properties = {"format-version": str(format_version)}
    if kind == "sql":
        catalog_properties = {
            "type": "sql",
            "uri": f"sqlite:///{tmp_path}/catalog.db",
            "warehouse": f"file://{tmp_path}/warehouse",
        }
        catalog = SqlCatalog("test", **catalog_properties)
        catalog.create_namespace_if_not_exists("db")
        catalog.create_table(f"db.{name}", schema=SCHEMA, partition_spec=SPEC, properties=properties)
        return open_catalog_table(f"db.{name}", catalog_name="test", catalog_properties=catalog_properties)
    root = str(tmp_path / name)
    HadoopLayoutCatalog().create_table(root, schema=SCHEMA, partition_spec=SPEC, properties=properties)
    return open_path_table(root)


def build(kind: str, format_version: int, tmp_path: Path) -> Scenario:
    table = create_table(kind, format_version, tmp_path)
    sc = Scenario(table, kind, format_version, tmp=tmp_path)
    pyt = table.table
    day1, day2 = datetime.date(2024, 1, 1), datetime.date(2024, 3, 5)

    sc.snapshots.append(
        write.append(table, pa.concat_tables([rows([1, 2], "a", day1), rows([3], "b", day1)]))
    )
    pyt.manage_snapshots().create_tag(sc.snapshots[0], "t1").commit()
    pyt.manage_snapshots().create_branch(sc.snapshots[0], "b1").commit()
    write.append(table, rows([10, 11], "c", day1), branch="b1")
    sc.snapshots.append(write.append(table, rows([4, 5], "a", day2)))
    pyt.delete("id == 1")  # copy-on-write: rewrites a's first file
    sc.snapshots.append(pyt.metadata.current_snapshot_id)
    pyt.overwrite(rows([20, 21], "z", day2))  # replaces everything
    sc.snapshots.append(pyt.metadata.current_snapshot_id)
    sc.snapshots.append(write.append(table, rows([6], "b", day2)))

    with pyt.update_schema() as update:
        update.rename_column("s", "name")
    sc.snapshots.append(write.append(table, rows([7, 8], "a", day2, name_column="name")))

    with pyt.update_spec() as update:
        update.add_field("d", DayTransform(), "d_day")
    day_file = write_parquet(
        tmp_path / "landing" / "day.parquet", rows([30, 31], "d", day1, name_column="name")
    )
    sc.snapshots.append(write.add_files(table, [day_file]))

    with pyt.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
    bucket_path = write_parquet(
        tmp_path / "landing" / "bucket.parquet", rows([40], "e", day2, name_column="name")
    )
    bucket = BucketTransform(4).transform(LongType())(40)
    days = (day2 - datetime.date(1970, 1, 1)).days
    sc.snapshots.append(write.append_data_files(table, [data_file(pyt, bucket_path, ("e", days, bucket))]))

    if format_version >= 2:
        pos_path = write_parquet(
            tmp_path / "landing" / "pos-deletes.parquet",
            pa.table({"file_path": [bucket_path], "pos": pa.array([0], pa.int64())}),
        )
        eq_path = write_parquet(
            tmp_path / "landing" / "eq-deletes.parquet", pa.table({"id": pa.array([7], pa.int64())})
        )
        position = data_file(pyt, pos_path, ("e", days, bucket), content=DataFileContent.POSITION_DELETES)
        sc.snapshots.append(commit_delete_files(table, [position]))
        equality = data_file(
            pyt, eq_path, ("a", days, bucket), content=DataFileContent.EQUALITY_DELETES, equality_ids=[1]
        )
        sc.snapshots.append(commit_delete_files(table, [equality]))
    return sc
