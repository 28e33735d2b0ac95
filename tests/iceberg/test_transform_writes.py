"""Partitioning Arrow rows by transforms (``core/iceberg/write/partitioned.py``), checked value by value against
pyiceberg's pure-Python transforms (``Transform.transform``: mmh3 and integer arithmetic, an implementation
independent of ``pyiceberg-core``'s Rust one). Java's agreement is ``tests/interop/test_iceberg_transform_writes_interop.py``.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
)
from pyiceberg.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
)
from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

from airflow_lakeformat.core.iceberg.catalog.catalog import wrap_table
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.write.partitioned import split_by_partition
from airflow_lakeformat.core.iceberg.write.write import append

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "tstz", TimestamptzType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "s", StringType()),
    NestedField(6, "dec", DecimalType(10, 2)),
    NestedField(7, "i", IntegerType()),
)
# two and three fields on one source column, as Java allows (pyiceberg's own append refuses them)
SPEC = PartitionSpec(
    PartitionField(2, 1000, DayTransform(), "ts_day"),
    PartitionField(3, 1001, HourTransform(), "tstz_hour"),
    PartitionField(4, 1002, MonthTransform(), "d_month"),
    PartitionField(4, 1003, BucketTransform(4), "d_bucket"),
    PartitionField(4, 1004, IdentityTransform(), "d"),
    PartitionField(5, 1005, BucketTransform(7), "s_bucket"),
    PartitionField(5, 1006, TruncateTransform(2), "s_trunc"),
    PartitionField(1, 1007, BucketTransform(5), "id_bucket"),
    PartitionField(6, 1008, BucketTransform(3), "dec_bucket"),
    PartitionField(6, 1009, TruncateTransform(50), "dec_trunc"),
    PartitionField(7, 1010, TruncateTransform(10), "i_trunc"),
    PartitionField(7, 1011, IdentityTransform(), "i"),
)  # fmt: skip
UTC = dt.timezone.utc
ROWS = [
    {"id": 1, "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999), "tstz": dt.datetime(1969, 12, 31, 23, 0, 0, 1, tzinfo=UTC),
     "d": dt.date(1969, 1, 15), "s": "héllo", "dec": decimal.Decimal("-1.05"), "i": -1},
    {"id": -7, "ts": dt.datetime(2024, 5, 1, 10), "tstz": dt.datetime(2024, 5, 1, 10, tzinfo=UTC),
     "d": dt.date(2024, 2, 29), "s": "ab", "dec": decimal.Decimal("12.34"), "i": 25},
    {"id": -7, "ts": dt.datetime(2024, 5, 1, 23), "tstz": dt.datetime(2024, 5, 1, 10, 30, tzinfo=UTC),
     "d": dt.date(2024, 2, 29), "s": "abc", "dec": decimal.Decimal("12.49"), "i": 29},
    {"id": None, "ts": None, "tstz": None, "d": None, "s": None, "dec": None, "i": None},
]  # fmt: skip


def _python_value(field: PartitionField, row: dict[str, object]) -> object:
    """pyiceberg's pure-Python transform of the row's source value, in the manifest's form."""
    value = row[str(SCHEMA.find_column_name(field.source_id))]
    if value is None:
        return None
    source = SCHEMA.find_field(field.source_id).field_type
    if isinstance(value, dt.datetime):
        value = datetime_to_micros(value)
    elif isinstance(value, dt.date):
        value = date_to_days(value)
    return field.transform.transform(source)(value)


def test_split_by_partition_equals_the_python_transforms() -> None:
    data = pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow())
    groups = split_by_partition(SPEC, SCHEMA, data)
    assert sum(g.rows.num_rows for g in groups) == len(ROWS)
    for group in groups:
        for row in group.rows.to_pylist():
            expected = tuple(_python_value(field, row) for field in SPEC.fields)
            assert group.partition == expected, (row, group.partition, expected)
    # rows 2 and 3 share day, month, date and truncates but not the hour: four partitions of one row each
    assert sorted(g.rows.num_rows for g in groups) == [1, 1, 1, 1]
    nulls = [g for g in groups if g.partition[0] is None]
    assert len(nulls) == 1 and set(nulls[0].partition) == {None}
    assert [g.partition[0] for g in groups if g.rows.column("id").to_pylist() == [1]] == [-1]  # 1969-12-31


def test_append_writes_one_file_per_partition_with_its_values(tmp_path: Path) -> None:
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    spec = PartitionSpec(
        PartitionField(2, 1000, DayTransform(), "ts_day"),
        PartitionField(7, 1001, TruncateTransform(10), "i_trunc"),
    )
    table = wrap_table(catalog.create_table("db.t", SCHEMA, partition_spec=spec))
    data = pa.Table.from_pylist(ROWS + ROWS[1:2], schema=SCHEMA.as_arrow())
    snapshot_id = append(table, data)
    head = table.metadata.snapshot_by_id(snapshot_id)
    assert head is not None
    files = sorted(live_files(table, head), key=lambda f: repr(f.partition))
    assert sorted(((f.partition, f.record_count) for f in files), key=repr) == sorted(
        [((-1, -10), 1), ((19844, 20), 3), ((None, None), 1)], key=repr
    )  # "2024-05-01" is day 19844; rows 2, 3 and the copy of 2 share (day, truncate[10] = 20)
    assert table.table.scan().to_arrow().num_rows == len(ROWS) + 1
