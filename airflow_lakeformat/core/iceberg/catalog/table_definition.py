"""What a new Iceberg table is, checked in full before anything is created.

:func:`define_table` turns a user's description of a table (columns in SQL type terms, partition keys in
Iceberg's transform notation, key columns, table properties) into the pyiceberg ``Schema``,
``PartitionSpec`` and properties that :func:`~airflow_lakeformat.core.iceberg.catalog.create.create_table`
publishes. It reads no file and loads no catalog, so every mistake is found while nothing exists yet:

* a type is mapped only where Iceberg keeps the same values (below); any other type is refused naming
  the column (:class:`~airflow_lakeformat.core.errors.UnsupportedFormatError`, exit 5);
* a malformed partition key, a transform the column's type cannot take, an unknown or nullable key
  column, a bad ``format-version`` are :class:`~airflow_lakeformat.core.errors.UsageError` (exit 2);
* ``format-version`` 3 is :class:`~airflow_lakeformat.core.iceberg.errors.UnsupportedWriteVersionError`
  (pyiceberg 0.12 cannot write v3 metadata).

==========================================  =====================  ==============================
SQL type (:class:`SqlColumn` ``root``)       Iceberg type           note
==========================================  =====================  ==============================
BOOLEAN                                     boolean
TINYINT, SMALLINT, INT                      int                    widened, every value kept
BIGINT                                      long
FLOAT, DOUBLE                               float, double
DECIMAL(p, s)                               decimal(p, s)          p <= 38
CHAR(n), VARCHAR(n), STRING                 string                 the length limit is not kept
BINARY(n)                                   fixed(n)
VARBINARY(n), BYTES                         binary
DATE                                        date
TIME(p)                                     time                   p <= 6 (microseconds)
TIMESTAMP(p)                                timestamp              p <= 6 (microseconds)
TIMESTAMP(p) WITH LOCAL TIME ZONE           timestamptz            p <= 6; root ``TIMESTAMP_LTZ``
==========================================  =====================  ==============================

Partition keys are column names (identity) or Iceberg's transform notation as Spark's DDL writes it:
``years(ts)``, ``months(ts)``, ``days(ts)``, ``hours(ts)``, ``bucket(16, id)``, ``truncate(4, name)``
(the singular ``year``/``month``/``day``/``hour`` too). Partition fields are named as Java's
``PartitionSpec.Builder`` names them: ``ts_day``, ``id_bucket``, ``name_trunc``, the column for identity.
Key columns become the schema's identifier fields (Iceberg's primary key: required, not float/double).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from airflow_lakeformat.core.errors import UnsupportedFormatError, UsageError
from airflow_lakeformat.core.iceberg.errors import MAX_WRITE_FORMAT_VERSION, UnsupportedWriteVersionError

DEFAULT_FORMAT_VERSION = 2
MAX_DECIMAL_PRECISION = 38
MAX_MICROS_PRECISION = 6
FIRST_PARTITION_FIELD_ID = 1000  # as Java's PartitionSpec.Builder numbers new partition fields

_SAME_VALUES: dict[str, PrimitiveType] = {
    "BOOLEAN": BooleanType(),
    "TINYINT": IntegerType(),
    "SMALLINT": IntegerType(),
    "INT": IntegerType(),
    "BIGINT": LongType(),
    "FLOAT": FloatType(),
    "DOUBLE": DoubleType(),
    "DATE": DateType(),
    "CHAR": StringType(),
    "VARCHAR": StringType(),
    "STRING": StringType(),
    "VARBINARY": BinaryType(),
    "BYTES": BinaryType(),
}
_TIME_TYPES: dict[str, PrimitiveType] = {
    "TIME": TimeType(),
    "TIMESTAMP": TimestampType(),
    "TIMESTAMP_LTZ": TimestamptzType(),
}
_BY_TRANSFORM_NAME: dict[str, tuple[Callable[..., Transform[Any, Any]], str]] = {
    "identity": (IdentityTransform, ""),
    "years": (YearTransform, "year"),
    "year": (YearTransform, "year"),
    "months": (MonthTransform, "month"),
    "month": (MonthTransform, "month"),
    "days": (DayTransform, "day"),
    "day": (DayTransform, "day"),
    "hours": (HourTransform, "hour"),
    "hour": (HourTransform, "hour"),
    "bucket": (BucketTransform, "bucket"),
    "truncate": (TruncateTransform, "trunc"),
}
_WITH_ARGUMENT = {"bucket", "truncate"}
_TRANSFORM = re.compile(
    r"^(?P<transform>[A-Za-z_]+)\s*\(\s*(?:(?P<argument>[^,()]+?)\s*,\s*)?(?P<column>[^,()]+?)\s*\)$"
)


@dataclass(frozen=True)
class SqlColumn:
    """One column in SQL type terms, as Flink, Paimon and Spark SQL spell types.

    Attributes:
        name: The column name.
        root: The type's root: ``BOOLEAN``, ``TINYINT``, ``SMALLINT``, ``INT``, ``BIGINT``, ``FLOAT``,
            ``DOUBLE``, ``DECIMAL``, ``CHAR``, ``VARCHAR``, ``STRING``, ``BINARY``, ``VARBINARY``, ``BYTES``,
            ``DATE``, ``TIME``, ``TIMESTAMP``, ``TIMESTAMP_LTZ``; anything else is refused.
        nullable: False for ``NOT NULL`` (an Iceberg *required* field).
        length: ``BINARY(n)``'s byte count (other lengths are not kept).
        precision: ``DECIMAL``'s digits (default 10), ``TIME``/``TIMESTAMP``'s fractional digits.
        scale: ``DECIMAL``'s scale (default 0).
        doc: The column comment.

    Example:
        >>> SqlColumn("amount", "DECIMAL", precision=12, scale=2, nullable=False)
        SqlColumn(name='amount', root='DECIMAL', nullable=False, length=None, precision=12, scale=2, doc=None)
    """

    name: str
    root: str
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    doc: str | None = None


@dataclass(frozen=True)
class TableDefinition:
    """A checked definition: what :func:`~airflow_lakeformat.core.iceberg.catalog.create.create_table` publishes.

    Attributes:
        schema: The schema (field ids 1..N in column order, identifier fields from the key columns).
        spec: The partition spec (field ids from 1000).
        properties: The table properties, ``format-version`` included.
    """

    schema: Schema
    spec: PartitionSpec
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def format_version(self) -> int:
        return int(self.properties[TableProperties.FORMAT_VERSION])


def iceberg_type(column: SqlColumn, table: str) -> PrimitiveType:
    """The Iceberg type that keeps every value of ``column``'s SQL type (module docstring's table).

    Args:
        column: The column.
        table: The table's name, for the error message.

    Returns:
        The Iceberg type.

    Raises:
        UnsupportedFormatError: No Iceberg type keeps the same values; the message names the column.

    Example:
        >>> iceberg_type(SqlColumn("n", "SMALLINT"), "db.t")
        IntegerType()
    """
    root = column.root.upper()
    if root in _SAME_VALUES:
        return _SAME_VALUES[root]
    if root == "DECIMAL":
        precision = 10 if column.precision is None else column.precision
        scale = column.scale or 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
            _refuse_type(column, table, f"Iceberg decimals have 1 to {MAX_DECIMAL_PRECISION} digits")
        return DecimalType(precision, scale)
    if root == "BINARY":
        if not column.length or column.length < 1:
            _refuse_type(column, table, "a fixed-length binary needs a length of at least 1")
        return FixedType(column.length)
    if root in _TIME_TYPES:
        if column.precision is not None and column.precision > MAX_MICROS_PRECISION:
            _refuse_type(
                column,
                table,
                "Iceberg keeps microseconds (nanoseconds need format v3, which pyiceberg 0.12 cannot write)",
            )
        return _TIME_TYPES[root]
    _refuse_type(column, table, "no Iceberg type keeps the same values here")


def _refuse_type(column: SqlColumn, table: str, why: str) -> NoReturn:
    spelled = column.root + (f"({column.precision})" if column.precision is not None else "")
    raise UnsupportedFormatError(table, f"column {column.name!r}: {spelled} has no Iceberg type: {why}")


def iceberg_schema(columns: Sequence[SqlColumn], table: str, identifier_fields: Sequence[str] = ()) -> Schema:
    """The Iceberg schema of ``columns`` (ids 1..N), with ``identifier_fields`` as its identifier fields.

    Args:
        columns: The columns in order.
        table: The table's name, for error messages.
        identifier_fields: Key columns: each must exist, be NOT NULL and not be a float or double.

    Returns:
        The schema.

    Raises:
        UsageError: No columns, duplicate or empty names, a bad key column.
        UnsupportedFormatError: A column type without a faithful Iceberg type.

    Example:
        >>> iceberg_schema([SqlColumn("id", "BIGINT", nullable=False)], "db.t", ["id"]).identifier_field_names()
        {'id'}
    """
    if not columns:
        raise UsageError(f"{table}: the schema has no columns")
    names = [c.name for c in columns]
    for name in names:
        if not name or names.count(name) > 1:
            raise UsageError(f"{table}: column names must be unique and non-empty, got {names}")
    fields = [
        NestedField(i, c.name, iceberg_type(c, table), required=not c.nullable, doc=c.doc)
        for i, c in enumerate(columns, start=1)
    ]
    by_name = {f.name: f for f in fields}
    for key in identifier_fields:
        _check_identifier_field(by_name.get(key), key, table, names)
    if len(set(identifier_fields)) != len(identifier_fields):
        raise UsageError(f"{table}: a primary key column is named twice in {list(identifier_fields)}")
    return Schema(*fields, identifier_field_ids=[by_name[k].field_id for k in identifier_fields])


def _check_identifier_field(found: NestedField | None, key: str, table: str, names: list[str]) -> None:
    if found is None:
        raise UsageError(f"{table}: primary key {key!r} is not a column (columns: {', '.join(names)})")
    if not found.required:
        raise UsageError(
            f"{table}: primary key {key!r} is nullable; Iceberg identifier fields must be NOT NULL "
            "(declare the column NOT NULL in the schema)"
        )
    if isinstance(found.field_type, (FloatType, DoubleType)):
        raise UsageError(f"{table}: primary key {key!r} is a {found.field_type}; Iceberg refuses float keys")


def parse_partition_key(text: str, table: str) -> tuple[str, Transform[Any, Any], str]:
    """(column, transform, partition field name) of one partition key.

    Args:
        text: A column name (identity) or a transform: ``days(ts)``, ``bucket(16, id)``, ``truncate(4, s)``...
        table: The table's name, for error messages.

    Returns:
        The source column, the pyiceberg transform and the partition field's name (Java's default).

    Raises:
        UsageError: An unknown transform, a missing, extra or non-positive argument.

    Example:
        >>> parse_partition_key("bucket(16, id)", "db.t")
        ('id', BucketTransform(num_buckets=16), 'id_bucket')
    """
    key = text.strip()
    if "(" not in key and ")" not in key:
        if not key or "," in key:
            raise UsageError(f"{table}: partition key {text!r} is not a column name or a transform")
        return key, IdentityTransform(), key
    match = _TRANSFORM.match(key)
    if match is None:
        raise UsageError(
            f"{table}: partition key {text!r} is not a transform such as days(ts), bucket(16, id) or "
            "truncate(4, name)"
        )
    name, argument, column = match["transform"].lower(), match["argument"], match["column"]
    if name not in _BY_TRANSFORM_NAME:
        known = "identity, years, months, days, hours, bucket, truncate"
        raise UsageError(f"{table}: partition key {text!r}: unknown transform {name!r} (known: {known})")
    kind, suffix = _BY_TRANSFORM_NAME[name]
    if (argument is not None) != (name in _WITH_ARGUMENT):
        wanted = f"{name}(N, column)" if name in _WITH_ARGUMENT else f"{name}(column)"
        raise UsageError(f"{table}: partition key {text!r}: write it as {wanted}")
    if argument is None:
        return column, kind(), column if not suffix else f"{column}_{suffix}"
    if not argument.isdigit() or int(argument) < 1:
        raise UsageError(f"{table}: partition key {text!r}: {argument!r} is not a positive whole number")
    return column, kind(int(argument)), f"{column}_{suffix}"


def partition_spec(schema: Schema, partition_keys: Sequence[str], table: str) -> PartitionSpec:
    """The partition spec of ``partition_keys`` over ``schema`` (field ids from 1000, Java's names).

    Args:
        schema: The table's schema.
        partition_keys: Keys as :func:`parse_partition_key` reads them, in order.
        table: The table's name, for error messages.

    Returns:
        The partition spec (unpartitioned for no keys).

    Raises:
        UsageError: An unknown column, a transform its type cannot take, the same partition twice, a
            partition name that is another column's name.

    Example:
        >>> spec = partition_spec(schema, ["region", "days(ts)"], "db.t")  # doctest: +SKIP
    """
    fields: list[PartitionField] = []
    columns = {f.name: f for f in schema.fields}
    for field_id, key in enumerate(partition_keys, start=FIRST_PARTITION_FIELD_ID):
        column, transform, name = parse_partition_key(key, table)
        source = columns.get(column)
        if source is None:
            raise UsageError(
                f"{table}: partition key {key!r}: {column!r} is not a column (columns: {', '.join(columns)})"
            )
        if not transform.can_transform(source.field_type):
            raise UsageError(f"{table}: partition key {key!r}: {transform} cannot take a {source.field_type}")
        _check_new_partition_field(fields, source, transform, name, columns, key, table)
        fields.append(PartitionField(source.field_id, field_id, transform, name))
    return PartitionSpec(*fields)


def _check_new_partition_field(
    fields: list[PartitionField],
    source: NestedField,
    transform: Transform[Any, Any],
    name: str,
    columns: Mapping[str, NestedField],
    key: str,
    table: str,
) -> None:
    for existing in fields:
        if existing.name == name or (existing.source_id, existing.transform) == (source.field_id, transform):
            raise UsageError(f"{table}: partition key {key!r} repeats partition field {existing.name!r}")
    other = columns.get(name)
    if other is not None and other.field_id != source.field_id:
        raise UsageError(f"{table}: partition key {key!r}: its field name {name!r} is another column's name")


def table_properties(options: Mapping[str, str], table: str) -> dict[str, str]:
    """The table properties: ``options`` with ``format-version`` checked (default 2).

    Args:
        options: ``KEY=VALUE`` table properties (``format-version`` 1 or 2).
        table: The table's name, for error messages.

    Returns:
        The properties with ``format-version`` set.

    Raises:
        UsageError: ``format-version`` is not a version number.
        UnsupportedWriteVersionError: ``format-version`` 3 or later (pyiceberg 0.12 cannot write it).

    Example:
        >>> table_properties({"write.format.default": "parquet"}, "db.t")["format-version"]
        '2'
    """
    properties = {str(k): str(v) for k, v in options.items()}
    text = properties.get(TableProperties.FORMAT_VERSION, str(DEFAULT_FORMAT_VERSION)).strip()
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{table}: format-version {text!r} is not 1 or {MAX_WRITE_FORMAT_VERSION}")
    if int(text) > MAX_WRITE_FORMAT_VERSION:
        raise UnsupportedWriteVersionError(table, int(text))
    properties[TableProperties.FORMAT_VERSION] = str(int(text))
    return properties


def define_table(
    table: str,
    columns: Sequence[SqlColumn],
    partition_keys: Sequence[str] = (),
    identifier_fields: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
) -> TableDefinition:
    """Check a table's description in full and return what creating it publishes.

    Args:
        table: The table's name or location, for error messages.
        columns: The columns in order.
        partition_keys: Column names or transforms (``days(ts)``, ``bucket(16, id)``...).
        identifier_fields: Key columns (NOT NULL), the schema's identifier fields.
        options: Table properties (``format-version`` 1 or 2; default 2).

    Returns:
        The definition.

    Raises:
        UsageError: A mistake in the description (exit 2).
        UnsupportedFormatError: A type without a faithful Iceberg type, or ``format-version`` 3 (exit 5).

    Example:
        >>> definition = define_table("db.t", [SqlColumn("ts", "TIMESTAMP")], ["days(ts)"])
        >>> str(definition.spec.fields[0].transform), definition.format_version
        ('day', 2)
    """
    properties = table_properties(options or {}, table)
    schema = iceberg_schema(columns, table, identifier_fields)
    return TableDefinition(schema, partition_spec(schema, partition_keys, table), properties)
