"""Add Parquet files to an append table: register existing files, or write Arrow data as new ones.

A registered file must look to Paimon exactly as if Paimon had written it, or readers misbehave
silently. So everything here errs on the side of refusing, or of saying less:

* **Location.** The file must sit in the directory Paimon computes for its partition and bucket
  (``[data-file.path-directory/]k1=v1/.../bucket-N``). :func:`locate` parses the directories back to
  a partition row and re-computes the path from it; anything that does not round-trip is refused.
* **Schema.** Every Parquet column must be a table column of a type Paimon's Parquet reader reads
  as that column (by name, as ``ParquetReaderFactory`` matches). Missing columns are allowed when
  nullable (Paimon reads them as null); extra columns, unsigned integers, narrowing and NOT NULL
  columns with nulls are refused.
* **Statistics** (``_VALUE_STATS``). Too narrow a min/max makes readers skip a file that holds
  matching rows, so a column gets statistics only if every row group has min, max and null count
  for it and its Parquet order is Paimon's order: signed integers, DATE, TIME(ms), booleans,
  strings and binaries (unsigned bytes, as ``BinaryString.compareTo``/``CompareUtils`` do),
  DECIMAL of the table's precision and scale, and INT64 timestamps whose unit is not finer than
  the column's precision. FLOAT/DOUBLE (NaN), INT96 and nested types are left out. The included
  columns are stored densely, as ``SimpleStatsConverter.toBinaryDenseMode`` does: one BinaryRow of
  the included columns in schema order, their names in ``_VALUE_STATS_COLS`` (null when every
  column is included, ``[]`` when none is).
* **Sequence numbers.** ``RowDataFileSequenceNumberTracker`` gives a file ``[counter - rows,
  counter - 1]`` of its writer's counter, which ``AppendOnlyWriter`` starts at the restored maximum
  + 1. Unaware-bucket writers never restore (``AppendFileStoreWrite`` forces
  ``ignorePreviousFiles``), so they count from 0; fixed-bucket writers restore the bucket's live
  files and continue after their maximum. We do the same, one counter per partition and bucket.
* **Buckets.** Unaware-bucket tables (``bucket = -1``) keep files in ``bucket-0`` with
  ``_TOTAL_BUCKETS = -1``. Fixed-bucket tables (``bucket > 0``) are supported with the default
  bucket function only: every row's ``bucket-key`` is hashed as ``DefaultBucketFunction`` does
  (Murmur3 by words over the key's BinaryRow, ``abs(hash % buckets)``) and a registered file whose
  rows do not all hash to its directory's bucket is refused. Primary-key tables are refused.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.manifest import (
    EMPTY_STATS_ROW,
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    SimpleStats,
    merge_entries,
)
from airflow_lakeformat.core.paimon.manifest_merge import partition_may_contain
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.paths import BUCKET_PREFIX, DataFilePaths, unescape_path_name
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import (
    BINARY_ROOTS,
    CHARACTER_ROOTS,
    INTEGER_ROOTS,
    TIMESTAMP_ROOTS,
    DataField,
    DataType,
)

UNAWARE_BUCKET = -1
PARQUET_EXTENSION = ".parquet"
_EPOCH_DATE = date(1970, 1, 1)
_MILLIS_PER_DAY = 86_400_000
# Each chunk handed to the Parquet writer (one row group) holds about a quarter of the target size,
# at most this many in-memory bytes, so a rolled file overshoots ``target-file-size`` by at most
# one compressed chunk.
_MAX_CHUNK_BYTES = 64 << 20


@dataclass(frozen=True)
class _Layout:
    """What registration needs to know about a table, checked once."""

    schema: TableSchema
    paths: DataFilePaths
    bucket: int  # -1 (unaware) or the fixed bucket count
    bucket_keys: tuple[str, ...] = ()
    bucket_key_types: tuple[DataType, ...] = field(default=())

    @property
    def total_buckets(self) -> int:
        return self.bucket

    @property
    def fixed(self) -> bool:
        return self.bucket > 0


def _layout(table: Table, schema: TableSchema | None = None) -> _Layout:
    schema = schema or table.schema
    where = table.uri
    if schema.is_primary_key_table:
        raise RegisterError(
            where,
            "cannot add files to a primary-key table: a primary-key table's files need sorted keys and "
            "sequence numbers from a real writer",
        )
    options = schema.table_options
    for flag in ("row-tracking.enabled", "data-evolution.enabled"):
        if parse_bool(options.get(flag) or "false"):
            raise RegisterError(
                where, f"cannot add files to a table with {flag}=true (row ids are not assigned)"
            )
    bucket = options.bucket
    paths = DataFilePaths(schema)
    if bucket == UNAWARE_BUCKET:
        return _Layout(schema, paths, bucket)
    if bucket <= 0:
        raise RegisterError(
            where, f"cannot add files to a table with bucket={bucket} (only -1 or a fixed count)"
        )
    function = (options.get("bucket-function.type") or "default").strip().lower()
    if function != "default":
        raise RegisterError(
            where, f"bucket-function.type={function} is not supported (only the default bucket function)"
        )
    keys = tuple(k.strip() for k in (options.get("bucket-key") or "").split(",") if k.strip())
    if not keys:
        raise RegisterError(where, f"bucket={bucket} but no bucket-key is set; Paimon requires one")
    types = []
    for key in keys:
        try:
            dtype = schema.field(key).type
        except KeyError as exc:
            raise RegisterError(where, f"bucket-key {key!r} is not a column") from exc
        if not _hashable(dtype):
            raise RegisterError(
                where, f"bucket-key {key!r} of type {dtype.sql()} is not supported for bucket hashing"
            )
        types.append(dtype)
    return _Layout(schema, paths, bucket, keys, tuple(types))


def _hashable(dtype: DataType) -> bool:
    # FLOAT/DOUBLE are left out: Java may normalise NaN and -0.0 in ways we have not verified.
    root = dtype.root
    return (
        root in INTEGER_ROOTS
        or root in CHARACTER_ROOTS
        or root in BINARY_ROOTS
        or root in TIMESTAMP_ROOTS
        or root in ("BOOLEAN", "DATE", "TIME", "DECIMAL")
    )


# -- Paimon types as Arrow types ----------------------------------------------------------------


def arrow_type(dtype: DataType) -> pa.DataType:
    """The Arrow type Paimon's Parquet layout corresponds to (``ParquetSchemaConverter``)."""
    root = dtype.root
    simple: dict[str, pa.DataType] = {
        "BOOLEAN": pa.bool_(),
        "TINYINT": pa.int8(),
        "SMALLINT": pa.int16(),
        "INT": pa.int32(),
        "BIGINT": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "DATE": pa.date32(),
        "TIME": pa.time32("ms"),  # Paimon stores TIME as INT32 milliseconds whatever the precision
    }
    if root in simple:
        return simple[root]
    if root in CHARACTER_ROOTS:
        return pa.string()
    if root in BINARY_ROOTS:
        return pa.binary()
    if root == "DECIMAL":
        precision = dtype.precision or 10
        scale = dtype.scale or 0
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if root in TIMESTAMP_ROOTS:
        precision = dtype.precision if dtype.precision is not None else 6
        unit = "ms" if precision <= 3 else "us" if precision <= 6 else "ns"
        return pa.timestamp(unit, tz="UTC" if root == "TIMESTAMP_LTZ" else None)
    if root == "ARRAY":
        assert dtype.element is not None
        return pa.list_(pa.field("element", arrow_type(dtype.element), dtype.element.nullable))
    if root == "MULTISET":
        assert dtype.element is not None
        return pa.map_(arrow_type(dtype.element), pa.int32())
    if root == "MAP":
        assert dtype.key is not None and dtype.value is not None
        return pa.map_(
            pa.field("key", arrow_type(dtype.key), False),
            pa.field("value", arrow_type(dtype.value), dtype.value.nullable),
        )
    if root == "ROW":
        return pa.struct([_arrow_field(f) for f in dtype.fields])
    raise RegisterError(dtype.sql(), "no Parquet mapping for this type")


def _arrow_field(f: DataField) -> pa.Field:
    return pa.field(
        f.name, arrow_type(f.type), f.type.nullable, metadata={b"PARQUET:field_id": str(f.id).encode()}
    )


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The table's columns as an Arrow schema, with Paimon's field ids as Parquet field ids."""
    return pa.schema([_arrow_field(f) for f in schema.fields])


# -- reading Parquet footers ---------------------------------------------------------------------


def _logical(col: Any) -> dict[str, Any]:
    parsed = json.loads(col.logical_type.to_json())
    return parsed if isinstance(parsed, dict) else {"Type": "None"}


_NESTED_ROOTS = frozenset({"ARRAY", "MAP", "MULTISET", "ROW"})
_UNIT_DIGITS = {"milliseconds": 3, "microseconds": 6, "nanoseconds": 9}


def _leaf_problem(dtype: DataType, col: Any) -> str | None:
    """Why Paimon's Parquet reader would not read this primitive column as ``dtype`` (None: it would)."""
    phys = col.physical_type
    logical = _logical(col)
    kind = logical.get("Type")
    root = dtype.root
    signed_int = kind in ("None", None) or (kind == "Int" and logical.get("isSigned", True))
    bits = int(logical.get("bitWidth", 32 if phys == "INT32" else 64)) if kind == "Int" else None
    if kind == "Int" and not logical.get("isSigned", True):
        return "unsigned integers are not supported (cast to a signed type)"
    ok = False
    if root == "BOOLEAN":
        ok = phys == "BOOLEAN"
    elif root == "TINYINT":
        ok = phys == "INT32" and kind == "Int" and bits == 8
    elif root == "SMALLINT":
        ok = phys == "INT32" and kind == "Int" and bits in (8, 16)
    elif root == "INT":
        ok = phys == "INT32" and signed_int
    elif root == "BIGINT":
        ok = phys in ("INT32", "INT64") and signed_int
    elif root == "FLOAT":
        ok = phys == "FLOAT"
    elif root == "DOUBLE":
        ok = phys in ("FLOAT", "DOUBLE")
    elif root == "DECIMAL":
        ok = (
            kind == "Decimal"
            and logical.get("precision") == dtype.precision
            and logical.get("scale") == (dtype.scale or 0)
            and phys in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY")
        )
    elif root in CHARACTER_ROOTS:
        ok = phys == "BYTE_ARRAY" and kind == "String"
    elif root in BINARY_ROOTS:
        ok = phys in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and kind in ("None", None)
    elif root == "DATE":
        ok = phys == "INT32" and kind == "Date"
    elif root == "TIME":
        ok = phys == "INT32" and kind == "Time" and logical.get("timeUnit") == "milliseconds"
    elif root in TIMESTAMP_ROOTS:
        ok = phys == "INT96" or (phys == "INT64" and kind == "Timestamp")
    if ok:
        return None
    return f"Parquet {phys} {col.logical_type} cannot be read as {dtype.sql()}"


def _arrow_compatible(file_type: pa.DataType, dtype: DataType) -> bool:
    """Structural check for nested columns (Paimon matches nested row fields by name)."""
    t = file_type.value_type if pa.types.is_dictionary(file_type) else file_type
    root = dtype.root
    if root == "ARRAY":
        assert dtype.element is not None
        return (pa.types.is_list(t) or pa.types.is_large_list(t)) and _arrow_compatible(
            t.value_type, dtype.element
        )
    if root in ("MAP", "MULTISET"):
        if not pa.types.is_map(t):
            return False
        if root == "MULTISET":
            assert dtype.element is not None
            return _arrow_compatible(t.key_type, dtype.element) and pa.types.is_int32(t.item_type)
        assert dtype.key is not None and dtype.value is not None
        return _arrow_compatible(t.key_type, dtype.key) and _arrow_compatible(t.item_type, dtype.value)
    if root == "ROW":
        if not pa.types.is_struct(t):
            return False
        children = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        if set(children) != {f.name for f in dtype.fields}:
            return False
        return all(_arrow_compatible(children[f.name], f.type) for f in dtype.fields)
    checks: dict[str, Callable[[pa.DataType], bool]] = {
        "BOOLEAN": pa.types.is_boolean,
        "TINYINT": pa.types.is_int8,
        "SMALLINT": lambda x: pa.types.is_int8(x) or pa.types.is_int16(x),
        "INT": lambda x: pa.types.is_int8(x) or pa.types.is_int16(x) or pa.types.is_int32(x),
        "BIGINT": lambda x: pa.types.is_signed_integer(x),
        "FLOAT": pa.types.is_float32,
        "DOUBLE": lambda x: pa.types.is_float32(x) or pa.types.is_float64(x),
        "DATE": pa.types.is_date32,
        "TIME": lambda x: x == pa.time32("ms"),
        "DECIMAL": lambda x: (
            pa.types.is_decimal(x) and x.precision == dtype.precision and x.scale == (dtype.scale or 0)
        ),
    }
    if root in checks:
        return checks[root](t)
    if root in CHARACTER_ROOTS:
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t))
    if root in BINARY_ROOTS:
        return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t))
    if root in TIMESTAMP_ROOTS:
        return bool(pa.types.is_timestamp(t))
    return False


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_dictionary(t):
        return 1
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


def _stats_converter(dtype: DataType, col: Any) -> Callable[[Any], Any] | None:
    """How to turn a Parquet statistics value (``min_raw``) into Paimon's internal value.

    None when the column's Parquet order is not Paimon's order, or we are not sure it is.
    """
    phys = col.physical_type
    logical = _logical(col)
    kind = logical.get("Type")
    root = dtype.root
    if root == "BOOLEAN" and phys == "BOOLEAN":
        return bool
    if root in INTEGER_ROOTS and phys in ("INT32", "INT64"):
        if kind in ("None", None) or (kind == "Int" and logical.get("isSigned")):
            return int
        return None
    if root == "DATE" and phys == "INT32" and kind == "Date":
        return int
    if root == "TIME" and phys == "INT32" and kind == "Time" and logical.get("timeUnit") == "milliseconds":
        return int
    if root in CHARACTER_ROOTS and phys == "BYTE_ARRAY" and kind == "String":
        # Strict: a value cut inside a character (truncated statistics) is not a string at all.
        return lambda raw: bytes(raw).decode("utf-8")
    if root in BINARY_ROOTS and phys in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY") and kind in ("None", None):
        return bytes
    if (
        root == "DECIMAL"
        and kind == "Decimal"
        and logical.get("precision") == dtype.precision
        and logical.get("scale") == (dtype.scale or 0)
    ):
        scale = dtype.scale or 0
        if phys in ("INT32", "INT64"):
            return lambda raw: _decimal(int(raw), scale)
        if phys in ("FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
            return lambda raw: _decimal(int.from_bytes(bytes(raw), "big", signed=True), scale)
        return None
    if root in TIMESTAMP_ROOTS and phys == "INT64" and kind == "Timestamp":
        unit = logical.get("timeUnit")
        precision = dtype.precision if dtype.precision is not None else 6
        # A file unit finer than the column's precision: readers may truncate or keep the extra
        # digits depending on the code path, so no statistics can be right for both.
        digits = _UNIT_DIGITS.get(str(unit))
        if digits is None or digits > max(precision, 3):
            return None
        return lambda raw: _timestamp(int(raw), digits)
    return None


def _decimal(unscaled: int, scale: int) -> Decimal:
    return Decimal((1 if unscaled < 0 else 0, tuple(int(d) for d in str(abs(unscaled))), -scale))


def _timestamp(value: int, unit_digits: int) -> Timestamp:
    """An epoch value in 10^-digits seconds as Paimon's (millis, nanos-of-milli); floor like Java."""
    if unit_digits == 3:
        return Timestamp(value, 0)
    per_milli = 10 ** (unit_digits - 3)
    millis, rest = divmod(value, per_milli)
    return Timestamp(millis, rest * (1_000_000 // per_milli))


@dataclass(frozen=True)
class _FileFacts:
    row_count: int
    value_stats: SimpleStats
    value_stats_cols: list[str] | None


def _inspect(pf: Any, schema: TableSchema, where: str) -> _FileFacts:
    """Check a Parquet footer against the schema and compute the file's value statistics."""
    meta = pf.metadata
    pschema = pf.schema
    file_arrow = pschema.to_arrow_schema()
    # Map top-level Arrow fields to their leaf columns by position (names may contain dots).
    leaves: dict[str, tuple[int, int]] = {}
    position = 0
    for name, ftype in zip(file_arrow.names, file_arrow.types, strict=True):
        if name in leaves:
            raise RegisterError(where, f"column {name!r} appears twice")
        count = _leaf_count(ftype)
        leaves[name] = (position, count)
        position += count
    table_names = [f.name for f in schema.fields]
    extra = [n for n in file_arrow.names if n not in set(table_names)]
    if extra:
        raise RegisterError(
            where, f"columns {extra} are not in the table's schema {schema.id} (columns: {table_names})"
        )
    row_groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    rows = int(meta.num_rows)
    if sum(int(rg.num_rows) for rg in row_groups) != rows:
        raise RegisterError(where, "row groups do not add up to the footer's row count")

    included: list[DataField] = []
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[int | None] = []
    for f in schema.fields:
        dtype = f.type
        if f.name not in leaves:
            if not dtype.nullable:
                raise RegisterError(where, f"NOT NULL column {f.name!r} is missing from the file")
            # Paimon's reader fills a missing column with nulls: these statistics are exact.
            included.append(f)
            mins.append(None)
            maxs.append(None)
            nulls.append(rows)
            continue
        first, count = leaves[f.name]
        file_field = file_arrow.field(f.name)
        primitive = count == 1 and not pa.types.is_nested(file_field.type)
        if dtype.root in _NESTED_ROOTS:
            if not _arrow_compatible(file_field.type, dtype):
                raise RegisterError(
                    where, f"column {f.name!r} of type {file_field.type} cannot be read as {dtype.sql()}"
                )
            primitive = False
        elif not primitive:
            raise RegisterError(
                where, f"column {f.name!r} is nested in the file but {dtype.sql()} in the table"
            )
        else:
            problem = _leaf_problem(dtype, pschema.column(first))
            if problem is not None:
                raise RegisterError(where, f"column {f.name!r}: {problem}")
        if not dtype.nullable:
            if primitive:
                maybe_null = pschema.column(first).max_definition_level > 0 and not _zero_nulls(
                    row_groups, first
                )
            else:
                maybe_null = file_field.nullable
            if maybe_null:
                raise RegisterError(where, f"NOT NULL column {f.name!r} may hold nulls in the file")
        stats = _column_stats(row_groups, first, pschema.column(first), dtype) if primitive else None
        if stats is None:
            continue
        included.append(f)
        mins.append(stats[0])
        maxs.append(stats[1])
        nulls.append(stats[2])

    types = [f.type for f in included]
    if not included:
        value_stats = SimpleStats(EMPTY_STATS_ROW, EMPTY_STATS_ROW, [])
    else:
        try:
            min_row, max_row = binary_row.encode(mins, types), binary_row.encode(maxs, types)
        except (ValueError, TypeError, OverflowError, struct.error) as exc:
            raise RegisterError(where, f"column statistics do not fit the table's types ({exc})") from exc
        value_stats = SimpleStats(min_row, max_row, nulls)
    cols = None if len(included) == len(schema.fields) else [f.name for f in included]
    return _FileFacts(rows, value_stats, cols)


def _zero_nulls(row_groups: Sequence[Any], leaf: int) -> bool:
    total = 0
    for rg in row_groups:
        st = rg.column(leaf).statistics
        if st is None or not st.has_null_count:
            return False
        total += int(st.null_count)
    return total == 0


def _column_stats(
    row_groups: Sequence[Any], leaf: int, col: Any, dtype: DataType
) -> tuple[Any, Any, int] | None:
    """(min, max, null count) over all row groups, or None unless every row group is complete."""
    convert = _stats_converter(dtype, col)
    if convert is None:
        return None
    low: Any = None
    high: Any = None
    null_count = 0
    try:
        for rg in row_groups:
            rows = int(rg.num_rows)
            if rows == 0:
                continue
            st = rg.column(leaf).statistics
            if st is None or not st.has_null_count:
                return None
            nulls = int(st.null_count)
            null_count += nulls
            if not st.has_min_max:
                if nulls != rows:
                    return None  # values exist but their range is unknown
                continue
            lo, hi = convert(st.min_raw), convert(st.max_raw)
            if lo > hi:
                return None
            low = lo if low is None or lo < low else low
            high = hi if high is None or hi > high else high
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    return low, high, null_count


# -- where a file belongs ------------------------------------------------------------------------


def _relative_path(table: Table, path: str) -> str:
    """The path relative to the table root; refuses paths outside it."""
    text = str(path)
    if "://" in text:
        text = table.io.fs._strip_protocol(text)
    root = table.root.rstrip("/")
    if text == root or text.startswith(root + "/"):
        text = text[len(root) + 1 :]
    elif text.startswith("/"):
        raise RegisterError(str(path), f"is outside the table {table.uri}")
    rel = posixpath.normpath(text)
    if rel in (".", "") or rel.startswith("../") or rel == ".." or rel.startswith("/"):
        raise RegisterError(str(path), f"is outside the table {table.uri}")
    return rel


_TIMESTAMP_TEXT = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")
_TIME_TEXT = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$")


def _parse_partition_value(text: str, dtype: DataType, legacy: bool) -> Any:
    """The internal value behind a partition directory value (the round trip checks exactness)."""
    root = dtype.root
    if root in CHARACTER_ROOTS:
        return text
    if root in INTEGER_ROOTS:
        return int(text)
    if root == "BOOLEAN":
        if text not in ("true", "false"):
            raise ValueError("not true/false")
        return text == "true"
    if root in ("FLOAT", "DOUBLE"):
        return float(text)
    if root == "DECIMAL":
        return Decimal(text)
    if root == "DATE":
        if legacy:
            return int(text)
        return (date.fromisoformat(text) - _EPOCH_DATE).days
    if root == "TIME":
        if legacy:
            return int(text)
        m = _TIME_TEXT.match(text)
        if not m:
            raise ValueError("not HH:MM:SS[.fff]")
        fraction = (m[4] or "").ljust(3, "0")[:3]
        return ((int(m[1]) * 60 + int(m[2])) * 60 + int(m[3])) * 1000 + int(fraction)
    if root in TIMESTAMP_ROOTS:
        m = _TIMESTAMP_TEXT.match(text)
        if not m:
            raise ValueError("not a date-time")
        days = (date(int(m[1]), int(m[2]), int(m[3])) - _EPOCH_DATE).days
        seconds = (int(m[4]) * 60 + int(m[5])) * 60 + int(m[6] or 0)
        nanos = int((m[7] or "").ljust(9, "0"))
        millis = days * _MILLIS_PER_DAY + seconds * 1000 + nanos // 1_000_000
        return Timestamp(millis, nanos % 1_000_000)
    raise ValueError(f"partition columns of type {dtype.sql()} are not supported")


def _locate(layout: _Layout, rel: str, where: str) -> tuple[bytes, int]:
    schema = layout.schema
    directory = posixpath.dirname(rel)
    parts = directory.split("/") if directory else []
    prefix = (layout.paths.path_directory or "").strip("/")
    if prefix:
        prefix_parts = prefix.split("/")
        if parts[: len(prefix_parts)] != prefix_parts:
            raise RegisterError(where, f"is not under the table's data-file.path-directory {prefix!r}")
        parts = parts[len(prefix_parts) :]
    keys = schema.partition_keys
    if len(parts) != len(keys) + 1:
        expected = "/".join([*(f"{k}=<value>" for k in keys), "bucket-<n>"])
        raise RegisterError(where, f"is not in a directory laid out as {expected!r}")
    codec = layout.paths.partitions
    values: list[Any] = []
    for key, dtype, part in zip(keys, schema.partition_types, parts, strict=False):
        name, sep, raw = part.partition("=")
        if not sep or unescape_path_name(name) != key:
            raise RegisterError(where, f"directory {part!r} is not the partition key {key!r}")
        text = unescape_path_name(raw)
        if text == codec.default_name:
            values.append(None)
            continue
        try:
            values.append(_parse_partition_value(text, dtype, codec.legacy))
        except (ValueError, ArithmeticError) as exc:
            raise RegisterError(
                where, f"directory {part!r} is not a value of {key} {dtype.sql()} as Paimon names it ({exc})"
            ) from exc
    bucket_dir = parts[-1]
    suffix = bucket_dir[len(BUCKET_PREFIX) :] if bucket_dir.startswith(BUCKET_PREFIX) else ""
    if not suffix.isdigit():
        raise RegisterError(where, f"directory {bucket_dir!r} is not a bucket-<n> directory")
    bucket = int(suffix)
    if layout.fixed and bucket >= layout.bucket:
        raise RegisterError(
            where, f"bucket {bucket} is out of range for a table with {layout.bucket} buckets"
        )
    if not layout.fixed and bucket != 0:
        raise RegisterError(where, "a bucket-unaware table (bucket = -1) keeps its files in bucket-0")
    try:
        partition = binary_row.encode(values, list(schema.partition_types))
    except (ValueError, TypeError, struct.error, OverflowError) as exc:
        raise RegisterError(where, f"partition values {values} do not fit their types ({exc})") from exc
    computed = layout.paths.bucket_directory(partition, bucket)
    if computed != directory:
        raise RegisterError(
            where,
            f"is in {directory!r} but Paimon would put this partition and bucket in {computed!r}",
        )
    return partition, bucket


def locate(table: Table, relative_path: str) -> tuple[bytes, int]:
    """The serialized partition row and the bucket of a data file, from its directories.

    Refuses a file unless Paimon would compute exactly its directory for that partition and bucket.
    """
    layout = _layout(table)
    rel = _relative_path(table, relative_path)
    return _locate(layout, rel, table.io.uri(table.io.join(table.root, rel)))


# -- data file metadata --------------------------------------------------------------------------


def _check_file_name(name: str, where: str) -> None:
    if not name.endswith(PARQUET_EXTENSION) or name.startswith((".", "_")):
        raise RegisterError(where, "a data file must be a visible *.parquet file")
    if name.endswith(".vector" + PARQUET_EXTENSION):
        raise RegisterError(where, "*.vector.parquet names are reserved for Paimon's vector files")


def data_file_meta_from_parquet(
    table: Table,
    relative_or_full_path: str,
    *,
    schema_id: int | None = None,
    file_source: FileSource = FileSource.APPEND,
    creation_time: datetime | None = None,
    min_sequence_number: int = 0,
) -> DataFileMeta:
    """The ``DataFileMeta`` Paimon's append writer would record for this Parquet file.

    Reads only the footer. Sequence numbers are ``[min_sequence_number, min + rows - 1]`` (see the
    module docs); the creation time defaults to local wall-clock time, which Paimon stores as if UTC.
    """
    schema = (
        table.schema if schema_id is None or schema_id == table.schema.id else table.schema_by_id(schema_id)
    )
    rel = _relative_path(table, relative_or_full_path)
    full = table.io.join(table.root, rel)
    where = table.io.uri(full)
    name = posixpath.basename(rel)
    _check_file_name(name, where)
    try:
        size = table.io.size(full)
        with table.io.fs.open(full, "rb") as handle:
            facts = _inspect(pq.ParquetFile(handle), schema, where)
    except FileNotFoundError as exc:
        raise RegisterError(where, "file does not exist") from exc
    except (pa.ArrowInvalid, OSError) as exc:
        raise RegisterError(where, f"not a readable Parquet file ({exc})") from exc
    if facts.row_count == 0:
        raise RegisterError(where, "the file has no rows (Paimon never writes empty data files)")
    return DataFileMeta.create(
        name,
        size,
        facts.row_count,
        value_stats=facts.value_stats,
        min_sequence_number=min_sequence_number,
        max_sequence_number=min_sequence_number + facts.row_count - 1,
        schema_id=schema.id,
        level=0,
        extra_files=[],
        creation_time=_wall_clock_as_utc(creation_time or datetime.now()),
        delete_row_count=0,
        file_source=file_source,
        value_stats_cols=facts.value_stats_cols,
    )


def _wall_clock_as_utc(value: datetime) -> datetime:
    """Paimon's ``_CREATION_TIME`` convention: local wall-clock time stored as if it were UTC.

    fastavro converts a *naive* datetime from the local zone, so label the wall-clock reading UTC.
    """
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


# -- fixed-bucket hashing ------------------------------------------------------------------------

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur_hash_by_words(data: bytes) -> int:
    """Paimon's ``MurmurHashUtils.hashBytesByWords`` (seed 42, little-endian words), as a signed int."""
    if len(data) % 4:
        raise ValueError("length must be a multiple of 4")
    h1 = 42
    for (k1,) in struct.iter_unpack("<I", data):
        k1 = _rotl((k1 * 0xCC9E2D51) & _MASK, 15)
        h1 ^= (k1 * 0x1B873593) & _MASK
        h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def default_bucket(key_row: bytes, num_buckets: int) -> int:
    """``DefaultBucketFunction``: ``abs(row.hashCode() % n)`` of a serialized bucket-key row."""
    # BinaryRow.hashCode hashes the row image, i.e. without our 4-byte arity prefix.
    return abs(murmur_hash_by_words(key_row[4:])) % num_buckets


def _internal_values(column: pa.ChunkedArray | pa.Array, dtype: DataType) -> list[Any]:
    """Paimon internal values of an Arrow column (already of a type compatible with ``dtype``)."""
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.cast(t.value_type)
        t = column.type
    root = dtype.root
    if root == "DATE":
        return list(column.cast(pa.int32()).to_pylist())
    if root == "TIME":
        return list(column.cast(pa.time32("ms")).cast(pa.int32()).to_pylist())
    if root in TIMESTAMP_ROOTS:
        digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        raw = column.cast(pa.int64()).to_pylist()
        if digits == 0:
            return [None if v is None else Timestamp(v * 1000, 0) for v in raw]
        return [None if v is None else _timestamp(v, digits) for v in raw]
    return list(column.to_pylist())


def _row_buckets(table: pa.Table, layout: _Layout) -> list[int]:
    columns = [
        _internal_values(table.column(k), t)
        for k, t in zip(layout.bucket_keys, layout.bucket_key_types, strict=True)
    ]
    types = list(layout.bucket_key_types)
    cache: dict[tuple[Any, ...], int] = {}
    out = []
    for row in zip(*columns, strict=True):
        bucket = cache.get(row)
        if bucket is None:
            bucket = default_bucket(binary_row.encode(list(row), types), layout.bucket)
            if len(cache) < 100_000:
                cache[row] = bucket
        out.append(bucket)
    return out


def _check_rows_in_bucket(table: Table, layout: _Layout, full: str, bucket: int, where: str) -> None:
    with table.io.fs.open(full, "rb") as handle:
        pf = pq.ParquetFile(handle)
        present = [k for k in layout.bucket_keys if k in pf.schema_arrow.names]
        data = pf.read(columns=present)
    for key, dtype in zip(layout.bucket_keys, layout.bucket_key_types, strict=True):
        if key not in present:  # a missing (nullable) column reads as nulls
            data = data.append_column(key, pa.nulls(data.num_rows, arrow_type(dtype)))
    wrong = [b for b in _row_buckets(data, layout) if b != bucket]
    if wrong:
        raise RegisterError(
            where,
            f"{len(wrong)} rows hash to other buckets (e.g. bucket {wrong[0]}) than the file's bucket-{bucket} "
            f"(bucket-key {', '.join(layout.bucket_keys)}, {layout.bucket} buckets)",
        )


# -- the table's current state -------------------------------------------------------------------


@dataclass
class _LiveState:
    names: set[tuple[bytes, int, str]] = field(default_factory=set)
    max_sequence: dict[tuple[bytes, int], int] = field(default_factory=dict)
    total_buckets: dict[bytes, int] = field(default_factory=dict)


def _live_state(table: Table, partitions: Iterable[bytes]) -> _LiveState:
    """Live files of the latest snapshot in these partitions (reads only manifests that may hold them)."""
    state = _LiveState()
    wanted = set(partitions)
    latest = table.snapshot_manager.latest_snapshot()
    if latest is None or not wanted:
        return state
    base, delta = table.data_manifests(latest)
    types = table.schema.partition_types
    relevant = [m for m in base + delta if any(partition_may_contain(m, p, types) for p in wanted)]
    merged: dict[tuple[Any, ...], ManifestEntry] = {}
    for entries in table.read_manifests(relevant, f"snapshot {latest.id}"):
        merge_entries((e for e in entries if e.partition in wanted), merged)
    for entry in merged.values():
        if entry.kind is not FileKind.ADD:
            continue
        state.names.add((entry.partition, entry.bucket, entry.file.file_name))
        key = (entry.partition, entry.bucket)
        state.max_sequence[key] = max(state.max_sequence.get(key, -1), entry.file.max_sequence_number)
        if entry.total_buckets is not None:
            state.total_buckets.setdefault(entry.partition, entry.total_buckets)
    return state


def _check_total_buckets(layout: _Layout, state: _LiveState, partition: bytes, where: str) -> None:
    existing = state.total_buckets.get(partition)
    if layout.fixed and existing is not None and existing != layout.bucket:
        raise RegisterError(
            where,
            f"the partition was written with {existing} buckets but the table now says {layout.bucket}; "
            "rescale the partition first",
        )


# -- register ------------------------------------------------------------------------------------


def register_files(table: Table, paths: Sequence[str]) -> list[ManifestEntry]:
    """ADD entries for existing Parquet files in the table's layout, ready for ``Committer.commit``.

    Refuses primary-key tables, files outside the table's directory layout, files whose schema the
    table cannot read, files already live in the latest snapshot and (for fixed-bucket tables) files
    whose rows do not hash to their bucket.
    """
    layout = _layout(table)
    located: list[tuple[str, str, bytes, int]] = []
    seen: set[str] = set()
    for path in paths:
        rel = _relative_path(table, path)
        where = table.io.uri(table.io.join(table.root, rel))
        if rel in seen:
            raise RegisterError(where, "is listed twice")
        seen.add(rel)
        _check_file_name(posixpath.basename(rel), where)
        partition, bucket = _locate(layout, rel, where)
        located.append((rel, where, partition, bucket))
    state = _live_state(table, {p for _, _, p, _ in located})
    next_sequence: dict[tuple[bytes, int], int] = {}
    entries = []
    for rel, where, partition, bucket in located:
        if (partition, bucket, posixpath.basename(rel)) in state.names:
            raise RegisterError(where, "is already a live data file of the table")
        _check_total_buckets(layout, state, partition, where)
        key = (partition, bucket)
        start = next_sequence.get(key)
        if start is None:
            start = state.max_sequence.get(key, -1) + 1 if layout.fixed else 0
        meta = data_file_meta_from_parquet(table, rel, min_sequence_number=start)
        if layout.fixed:
            _check_rows_in_bucket(table, layout, table.io.join(table.root, rel), bucket, where)
        next_sequence[key] = meta.max_sequence_number + 1
        entries.append(ManifestEntry.create(FileKind.ADD, partition, bucket, layout.total_buckets, meta))
    return entries


# -- write ---------------------------------------------------------------------------------------


def _conform(data: pa.Table, schema: TableSchema) -> pa.Table:
    """Select, order and cast the input's columns to the table's Arrow types; refuse what does not fit."""
    target = arrow_schema(schema)
    names = [f.name for f in schema.fields]
    extra = [n for n in data.column_names if n not in set(names)]
    if extra:
        raise RegisterError("input", f"columns {extra} are not in the table (columns: {names})")
    if len(set(data.column_names)) != len(data.column_names):
        raise RegisterError("input", "duplicate column names")
    arrays = []
    for f, af in zip(schema.fields, target, strict=True):
        if f.name not in data.column_names:
            if not f.type.nullable:
                raise RegisterError("input", f"NOT NULL column {f.name!r} is missing")
            arrays.append(pa.nulls(data.num_rows, af.type))
            continue
        column = data.column(f.name)
        try:
            column = column if column.type == af.type else column.cast(af.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise RegisterError(
                "input", f"column {f.name!r} ({column.type}) cannot be cast to {f.type.sql()}: {exc}"
            ) from exc
        if not f.type.nullable and column.null_count:
            raise RegisterError("input", f"NOT NULL column {f.name!r} has {column.null_count} nulls")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=target)


def _group_rows(data: pa.Table, layout: _Layout) -> dict[tuple[bytes, int], list[int] | None]:
    """Row indices per (partition, bucket); None means every row."""
    schema = layout.schema
    keys = schema.partition_keys
    types = list(schema.partition_types)
    if not keys and not layout.fixed:
        return {(binary_row.encode([], []), 0): None}
    if keys:
        columns = [_internal_values(data.column(k), t) for k, t in zip(keys, types, strict=True)]
        encoded: dict[tuple[Any, ...], bytes] = {}
        partitions = []
        for row in zip(*columns, strict=True):
            value = encoded.get(row)
            if value is None:
                value = binary_row.encode(list(row), types)
                encoded[row] = value
            partitions.append(value)
    else:
        partitions = [binary_row.encode([], [])] * data.num_rows
    buckets = _row_buckets(data, layout) if layout.fixed else [0] * data.num_rows
    groups: dict[tuple[bytes, int], list[int]] = {}
    for index, key in enumerate(zip(partitions, buckets, strict=True)):
        groups.setdefault(key, []).append(index)
    if len(groups) == 1:
        return {next(iter(groups)): None}
    return dict(groups)


_COMPRESSIONS = {"zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"}


class _FileNamer:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.uuid = uuid.uuid4()
        self.count = 0

    def next(self) -> str:
        name = f"{self.prefix}{self.uuid}-{self.count}{PARQUET_EXTENSION}"
        self.count += 1
        return name


def _write_rolling(
    table: Table,
    directory: str,
    data: pa.Table,
    namer: _FileNamer,
    target_size: int,
    writer_options: Mapping[str, Any],
    written: list[str],
) -> list[str]:
    """Write ``data`` into ``directory`` as files of about ``target_size`` bytes; return relative paths."""
    io = table.io
    per_row = max(1, data.nbytes // max(1, data.num_rows))
    chunk_bytes = max(1, min(target_size // 4, _MAX_CHUNK_BYTES))
    chunk_rows = max(1, min(data.num_rows, chunk_bytes // per_row))
    if io.is_local:
        io.fs.makedirs(io.join(table.root, directory), exist_ok=True)
    out: list[str] = []
    offset = 0
    while offset < data.num_rows:
        rel = posixpath.join(directory, namer.next())
        full = io.join(table.root, rel)
        written.append(full)
        out.append(rel)
        with io.fs.open(full, "wb") as sink, pq.ParquetWriter(sink, data.schema, **writer_options) as writer:
            while offset < data.num_rows:
                chunk = data.slice(offset, chunk_rows)
                writer.write_table(chunk, row_group_size=chunk.num_rows)
                offset += chunk.num_rows
                if sink.tell() >= target_size:
                    break
    return out


def _writer_options(schema: TableSchema) -> dict[str, Any]:
    options = schema.table_options
    compression = (options.get("file.compression") or "zstd").lower()
    if compression not in _COMPRESSIONS:
        raise RegisterError(schema.options.get("file.compression", ""), "file.compression is not supported")
    out: dict[str, Any] = {
        "compression": "none" if compression == "uncompressed" else compression,
        "write_statistics": True,
        # Paimon stores DECIMAL(p<=9) as INT32 and DECIMAL(p<=18) as INT64 (ParquetSchemaConverter).
        "store_decimal_as_integer": True,
    }
    if compression == "zstd":
        out["compression_level"] = int(options.get("file.compression.zstd-level") or 1)
    return out


def write_data_files(
    table: Table, arrow_table: pa.Table, *, target_file_size: int | None = None
) -> list[ManifestEntry]:
    """Write rows as Parquet data files in the table's layout; return their ADD entries (uncommitted).

    Rows are split by partition (and, for fixed-bucket tables, by the bucket of their bucket key),
    cast to the table's types and written as ``<data-file.prefix><uuid>-<n>.parquet``, rolling at
    ``target-file-size``. On failure the files written so far are deleted; nothing is committed.
    """
    layout = _layout(table)
    schema = layout.schema
    data = _conform(arrow_table, schema)
    if data.num_rows == 0:
        return []
    target = target_file_size or schema.table_options.target_file_size
    options = _writer_options(schema)
    namer = _FileNamer(schema.table_options.get("data-file.prefix") or "data-")
    groups = _group_rows(data, layout)
    state = _live_state(table, {p for p, _ in groups}) if layout.fixed else _LiveState()
    written: list[str] = []
    entries: list[ManifestEntry] = []
    try:
        for (partition, bucket), indices in groups.items():
            where = table.io.uri(table.io.join(table.root, layout.paths.bucket_directory(partition, bucket)))
            _check_total_buckets(layout, state, partition, where)
            part = data if indices is None else data.take(pa.array(indices, pa.int64()))
            directory = layout.paths.bucket_directory(partition, bucket)
            sequence = state.max_sequence.get((partition, bucket), -1) + 1 if layout.fixed else 0
            for rel in _write_rolling(table, directory, part, namer, target, options, written):
                meta = data_file_meta_from_parquet(table, rel, min_sequence_number=sequence)
                sequence = meta.max_sequence_number + 1
                entries.append(
                    ManifestEntry.create(FileKind.ADD, partition, bucket, layout.total_buckets, meta)
                )
    except BaseException:
        from airflow_lakeformat.core.maintenance.deletion import discard_unpublished

        discard_unpublished(table.io, written, "data-file")
        raise
    return entries


# -- streaming writes (Spark tasks, data compaction) ---------------------------------------------


@dataclass
class _OpenFile:
    relative_path: str
    sink: Any
    writer: pq.ParquetWriter


class RollingFileWriter:
    """Streams rows into new data files of a table, per partition and bucket, rolling at the target size.

    The counterpart of :func:`write_data_files` for writers that see their rows in batches (a Spark
    task, a compaction rewrite): one open Parquet file per partition and bucket, rows buffered into
    row groups of about a quarter of the target size as :func:`write_data_files` cuts them, and a file
    closed once it reaches ``target-file-size``. Memory stays bounded by the buffered row groups.

    It reads nothing of the table's state: sequence numbers count from 0 per partition and bucket in
    write order, and the caller renumbers them (:func:`next_sequence_numbers`). It deletes nothing:
    every file is listed in ``written`` the moment it is created, so the files of a failed write can
    be accounted for (they stay orphans until orphan cleanup removes them).

    ``into`` names the one partition (its exact serialized bytes, which are never re-encoded) and
    bucket every row belongs to, for rewrites of existing files; otherwise rows are split as
    :func:`write_data_files` splits them.
    """

    def __init__(
        self,
        table: Table,
        *,
        target_file_size: int | None = None,
        file_source: FileSource = FileSource.APPEND,
        into: tuple[bytes, int] | None = None,
        total_buckets: int | None = None,
        max_buffer_bytes: int = 256 << 20,
    ) -> None:
        self.table = table
        self.layout = _layout(table)
        schema = self.layout.schema
        self.target_file_size = target_file_size or schema.table_options.target_file_size
        self.chunk_bytes = max(1, min(self.target_file_size // 4, _MAX_CHUNK_BYTES))
        self.max_buffer_bytes = max_buffer_bytes
        self.file_source = file_source
        self.into = into
        self.total_buckets = self.layout.total_buckets if total_buckets is None else total_buckets
        self.written: list[str] = []
        self.entries: list[ManifestEntry] = []
        self._options = _writer_options(schema)
        self._schema = arrow_schema(schema)
        self._namer = _FileNamer(schema.table_options.get("data-file.prefix") or "data-")
        self._buffers: dict[tuple[bytes, int], list[pa.Table]] = {}
        self._buffered: dict[tuple[bytes, int], int] = {}
        self._files: dict[tuple[bytes, int], _OpenFile] = {}
        self._next_sequence: dict[tuple[bytes, int], int] = {}

    def write(self, data: pa.Table | pa.RecordBatch) -> None:
        """Cast rows to the table's types (refusing what does not fit) and buffer or write them."""
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        data = _conform(data, self.layout.schema)
        if data.num_rows == 0:
            return
        groups = {self.into: None} if self.into is not None else _split_rows(data, self.layout)
        for key, indices in groups.items():
            part = data if indices is None else data.take(indices)
            self._buffers.setdefault(key, []).append(part)
            self._buffered[key] = self._buffered.get(key, 0) + part.nbytes
            if self._buffered[key] >= self.chunk_bytes:
                self._flush(key)
        if sum(self._buffered.values()) > self.max_buffer_bytes:
            # Many partitions at once: smaller row groups rather than unbounded memory.
            for key in list(self._buffers):
                self._flush(key)

    def close(self) -> list[ManifestEntry]:
        """Write what is buffered, close every file and return the ADD entries of all files written."""
        for key in list(self._buffers):
            self._flush(key)
        for key in list(self._files):
            self._close_file(key)
        return self.entries

    def abort(self) -> None:
        """Close open files without describing them; they stay on storage, listed in ``written``."""
        self._buffers.clear()
        self._buffered.clear()
        for handle in self._files.values():
            for closer in (handle.writer.close, handle.sink.close):
                with contextlib.suppress(Exception):
                    closer()
        self._files.clear()

    def _flush(self, key: tuple[bytes, int]) -> None:
        parts = self._buffers.pop(key, [])
        self._buffered.pop(key, None)
        if not parts:
            return
        chunk = pa.concat_tables(parts)
        handle = self._files.get(key) or self._open_file(key)
        handle.writer.write_table(chunk, row_group_size=chunk.num_rows)
        if handle.sink.tell() >= self.target_file_size:
            self._close_file(key)

    def _open_file(self, key: tuple[bytes, int]) -> _OpenFile:
        io = self.table.io
        directory = self.layout.paths.bucket_directory(*key)
        rel = posixpath.join(directory, self._namer.next())
        full = io.join(self.table.root, rel)
        if io.is_local:
            io.fs.makedirs(io.join(self.table.root, directory), exist_ok=True)
        self.written.append(full)
        sink = io.fs.open(full, "wb")
        try:
            writer = pq.ParquetWriter(sink, self._schema, **self._options)
        except BaseException:
            sink.close()
            raise
        handle = _OpenFile(rel, sink, writer)
        self._files[key] = handle
        return handle

    def _close_file(self, key: tuple[bytes, int]) -> None:
        handle = self._files.pop(key)
        handle.writer.close()
        handle.sink.close()
        start = self._next_sequence.get(key, 0)
        meta = data_file_meta_from_parquet(
            self.table, handle.relative_path, min_sequence_number=start, file_source=self.file_source
        )
        self._next_sequence[key] = meta.max_sequence_number + 1
        partition, bucket = key
        self.entries.append(ManifestEntry.create(FileKind.ADD, partition, bucket, self.total_buckets, meta))


_ROW_NUMBERS: list[pa.Array] = [pa.array([], pa.int64())]


def _row_numbers(count: int) -> pa.Array:
    """``0 .. count - 1`` as an int64 array, sliced from a cached one (building it per batch costs)."""
    cached = _ROW_NUMBERS[0]
    if len(cached) < count:
        cached = _ROW_NUMBERS[0] = pa.array(range(max(count, 2 * len(cached))), pa.int64())
    return cached.slice(0, count)


def _split_rows(data: pa.Table, layout: _Layout) -> Mapping[tuple[bytes, int], Any]:
    """Row indices per (partition, bucket), as :func:`_group_rows` computes them; None means every row.

    Unaware-bucket tables group by the partition columns in Arrow (a hash aggregation), which keeps
    the per-row work out of Python; each distinct partition is encoded once, from the same internal
    values, so its bytes are the ones :func:`_group_rows` would produce.
    """
    keys = layout.schema.partition_keys
    if layout.fixed or not keys:
        return _group_rows(data, layout)
    grouped = (
        data.select(list(keys))
        .append_column("__row", _row_numbers(data.num_rows))
        .group_by(list(keys), use_threads=False)
        .aggregate([("__row", "list")])
    )
    types = list(layout.schema.partition_types)
    columns = [_internal_values(grouped.column(k), t) for k, t in zip(keys, types, strict=True)]
    rows = grouped.column("__row_list")
    if grouped.num_rows == 1:
        return {(binary_row.encode([c[0] for c in columns], types), 0): None}
    return {
        (binary_row.encode([c[i] for c in columns], types), 0): rows[i].values
        for i in range(grouped.num_rows)
    }


def next_sequence_numbers(table: Table, keys: Iterable[tuple[bytes, int]]) -> dict[tuple[bytes, int], int]:
    """The first sequence number of new files per (partition, bucket), as Paimon's append writers pick it.

    Fixed-bucket tables continue after the bucket's live maximum; unaware-bucket writers never
    restore, so they start at 0. Refuses a partition whose live files were written with another
    bucket count.
    """
    layout = _layout(table)
    wanted = set(keys)
    if not layout.fixed:
        return dict.fromkeys(wanted, 0)
    state = _live_state(table, {partition for partition, _ in wanted})
    starts = {}
    for partition, bucket in wanted:
        where = table.io.uri(table.io.join(table.root, layout.paths.bucket_directory(partition, bucket)))
        _check_total_buckets(layout, state, partition, where)
        starts[(partition, bucket)] = state.max_sequence.get((partition, bucket), -1) + 1
    return starts


# -- reading source files ------------------------------------------------------------------------


def read_source(path: str, storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Read a ``.parquet``, ``.csv`` or ``.jsonl``/``.json`` (one object per line) file as an Arrow table."""
    lower = path.lower()
    with fsspec.open(path, "rb", **dict(storage_options or {})) as handle:
        if lower.endswith(PARQUET_EXTENSION):
            return pq.read_table(handle)
        if lower.endswith(".csv"):
            import pyarrow.csv as pcsv

            return pcsv.read_csv(handle)
        if lower.endswith((".jsonl", ".json", ".ndjson")):
            import pyarrow.json as pjson

            return pjson.read_json(handle)
    raise RegisterError(path, "unsupported source format (use .parquet, .csv or .jsonl)")


__all__ = [
    "RegisterError",
    "RollingFileWriter",
    "arrow_schema",
    "arrow_type",
    "data_file_meta_from_parquet",
    "default_bucket",
    "locate",
    "murmur_hash_by_words",
    "next_sequence_numbers",
    "read_source",
    "register_files",
    "write_data_files",
]
