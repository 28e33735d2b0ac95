"""Writing Arrow rows as data files of an Iceberg table's current partition spec, identity or transform.

pyiceberg 0.12's Arrow append partitions the rows itself, but it refuses a spec with two fields on one
source column (``identity(d)`` + ``bucket(4, d)``: "Cannot have redundant partitions", which Java allows),
and it writes and commits in one step, while a partition overwrite must know the written files' partitions
before it plans what they replace. So the rows are partitioned here and the commit is the caller's:

1. **Transforms**, column-wise: each partition field's values are its transform of the source column
   (``Transform.pyarrow_transform``; for ``bucket[N]``, ``truncate[W]``, ``year``, ``month``, ``day`` and
   ``hour`` that is ``pyiceberg-core``, the Rust implementation of the spec that Java's ``Transforms`` also
   implement: bucket = ``(murmur3_x86_32(single-value serialisation) & Integer.MAX_VALUE) % N`` (longs, ints,
   dates, times and timestamps hashed as 8-byte little-endian longs, strings as UTF-8, decimals as the unscaled
   value's minimal big-endian two's complement); truncate = ``v - (((v % W) + W) % W)`` for numbers, the
   first W code points of a string, W bytes of binary; year/month/day/hour = whole units since
   1970-01-01T00:00, rounded towards minus infinity (1969-12-31T23:59:59.999999 is day -1)). ``identity`` is
   the column itself; a null value transforms to null.
2. **Grouping**: rows are grouped by the tuple of partition values (Arrow's hash group-by; null is a value of
   its own, so a null partition is one group), the rows of each group taken in input order.
3. **Files**: each group is cut into files of about ``write.target-file-size-bytes`` (pyiceberg's
   ``bin_pack_arrow_table``) and written by pyiceberg's ``write_file`` (Parquet with field ids, metrics from
   the footer) under the partition's path (``ts_day=2024-05-01/``, Java's form; never read back: partitions
   are matched by value). Each file's partition record holds the values in the manifest's form (a date as
   days, a timestamp as microseconds, a UUID as 16 bytes, a decimal as ``Decimal``).

Nothing here commits: the files are new and unreferenced until a snapshot names them.

Example:
    >>> files = write_partitioned(table, rows)  # doctest: +SKIP
    >>> {f.partition[0] for f in files}  # days since 1970-01-01 of a days(ts) spec  # doctest: +SKIP
    {19844, -1, None}
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.iceberg.errors import MissingWriteDependencyError

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile
    from pyiceberg.partitioning import PartitionKey, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadata

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable

_ROW = "__lakeformat_row__"


@dataclass(frozen=True)
class PartitionRows:
    """The rows of one partition: its values in the manifest's form (spec order) and the rows."""

    partition: tuple[Any, ...]
    rows: pa.Table


class _PartitionKey:
    """What pyiceberg's ``write_file`` asks of a partition key: the record and ``to_path()``."""

    def __init__(self, spec: PartitionSpec, schema: Schema, values: tuple[Any, ...]) -> None:
        from pyiceberg.typedef import Record

        self.partition = Record(*values)
        self._path = spec.partition_to_path(self.partition, schema)

    def to_path(self) -> str:
        return self._path


def _source_column(data: pa.Table, schema: Schema, source_id: int) -> pa.Array | pa.ChunkedArray:
    """The source column of a partition field, by field id (a nested field through its structs)."""
    import pyarrow.compute as pc

    name = schema.find_column_name(source_id)
    if name is None:
        raise UnsupportedFormatError(
            "partition spec", f"a partition field's source column (field id {source_id}) is not in the schema"
        )
    parts = name.split(".")
    column: Any = data.column(parts[0])
    for part in parts[1:]:
        column = pc.struct_field(column, part)
    return cast("pa.Array | pa.ChunkedArray", column)


def partition_arrays(spec: PartitionSpec, schema: Schema, data: pa.Table) -> list[pa.ChunkedArray]:
    """Each partition field's values for every row of ``data`` (step 1), in spec order.

    Raises:
        MissingWriteDependencyError: ``pyiceberg-core`` is not installed and a field needs it.
    """
    from pyiceberg.exceptions import NotInstalledError
    from pyiceberg.transforms import IdentityTransform

    arrays: list[pa.ChunkedArray] = []
    for field in spec.fields:
        column = _source_column(data, schema, field.source_id)
        if isinstance(field.transform, IdentityTransform):
            values: Any = column
        else:
            source_type = schema.find_field(field.source_id).field_type
            try:
                values = field.transform.pyarrow_transform(source_type)(column)
            except NotInstalledError as exc:
                raise MissingWriteDependencyError(f"partition field {field.name}", str(exc)) from exc
        arrays.append(values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values]))
    return arrays


def manifest_value(value: Any) -> Any:
    """A partition value in the manifest's form (module docstring)."""
    import datetime as dt

    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros, time_to_micros

    if isinstance(value, dt.datetime):
        return datetime_to_micros(value)
    if isinstance(value, dt.date):
        return date_to_days(value)
    if isinstance(value, dt.time):
        return time_to_micros(value)
    if isinstance(value, uuid.UUID):
        return value.bytes
    return value


def _python_values(column: pa.ChunkedArray) -> list[Any]:
    """A partition column as Python values; timestamps as integers (no time zone conversion, no rounding)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    elif pa.types.is_date32(column.type):
        column = column.cast(pa.int32())
    elif pa.types.is_time64(column.type):
        column = column.cast(pa.int64())
    return [manifest_value(v) for v in column.to_pylist()]


def split_by_partition(spec: PartitionSpec, schema: Schema, data: pa.Table) -> list[PartitionRows]:
    """The rows of ``data`` per partition of ``spec`` (steps 1 and 2); one group for an unpartitioned spec.

    Args:
        spec: the partition spec the rows are written in (the table's current one).
        schema: the schema the spec's source ids refer to.
        data: the rows, in the table's columns.
    """
    if not spec.fields:
        return [PartitionRows((), data)] if data.num_rows else []
    names = [f"p{i}" for i in range(len(spec.fields))]
    keys = pa.table([*partition_arrays(spec, schema, data), pa.array(range(data.num_rows), pa.int64())],
                    names=[*names, _ROW])  # fmt: skip
    grouped = keys.group_by(names, use_threads=False).aggregate([(_ROW, "list")])
    columns = [_python_values(grouped.column(name)) for name in names]
    rows = grouped.column(f"{_ROW}_list").to_pylist()
    groups = []
    for number, indices in enumerate(rows):
        partition = tuple(column[number] for column in columns)
        groups.append(PartitionRows(partition, data.take(pa.array(sorted(indices), pa.int64()))))
    return groups


def write_groups(
    table: IcebergTable,
    metadata: TableMetadata,
    groups: Sequence[PartitionRows],
    write_uuid: uuid.UUID | None = None,
) -> list[DataFile]:
    """Write each group as files of ``metadata``'s current spec (step 3); returns their ``DataFile`` records."""
    from pyiceberg.io.pyarrow import bin_pack_arrow_table, pyarrow_to_schema, write_file
    from pyiceberg.table import TableProperties, WriteTask
    from pyiceberg.utils.properties import property_as_int

    if not groups:
        return []
    spec, schema = metadata.spec(), metadata.schema()
    target = property_as_int(
        metadata.properties,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
        TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT,
    )
    task_schema = pyarrow_to_schema(
        groups[0].rows.schema, name_mapping=schema.name_mapping, format_version=metadata.format_version
    )
    write_uuid = write_uuid or uuid.uuid4()
    counter = itertools.count(0)

    def tasks() -> Iterator[WriteTask]:
        for group in groups:
            key = cast("PartitionKey", _PartitionKey(spec, schema, group.partition)) if spec.fields else None
            for batches in bin_pack_arrow_table(group.rows, target or 0):
                yield WriteTask(write_uuid, next(counter), task_schema, batches, partition_key=key)

    written = list(write_file(table.table.io, metadata, tasks()))
    for data_file in written:
        data_file.spec_id = spec.spec_id  # from_args may drop it (pyiceberg 0.12)
    return written


def write_partitioned(
    table: IcebergTable, data: pa.Table, metadata: TableMetadata | None = None
) -> list[DataFile]:
    """Partition ``data`` by the current spec and write it as new, uncommitted data files.

    Args:
        table: the table (FileIO, location provider, properties).
        data: the rows, already in the table's columns (``core/sources.conform_table``).
        metadata: the metadata to write against (default: the table's current metadata).

    Returns:
        One ``DataFile`` per file written (none for no rows), ``spec_id`` and ``partition`` set.

    Raises:
        MissingWriteDependencyError: a transform needs ``pyiceberg-core``, which is not installed; raised
            before any file is written.

    Example:
        >>> write_partitioned(table, pa.table({"id": [1], "ts": [datetime(2024, 5, 1)]}))  # doctest: +SKIP
    """
    metadata = metadata or table.metadata
    groups = split_by_partition(metadata.spec(), metadata.schema(), data)
    return write_groups(table, metadata, groups)
