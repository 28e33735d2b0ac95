"""Which append tables we add files to, and where Paimon looks for the files of a partition and bucket.

* **Tables.** Primary-key tables are refused (their files need sorted keys and sequence numbers from a
  real writer; their rows are written by ``pk_writes``, which has its own layout check), and so are tables with ``row-tracking.enabled`` or ``data-evolution.enabled`` (row ids
  are not assigned). Unaware-bucket tables (``bucket = -1``) keep their files in ``bucket-0``;
  fixed-bucket tables (``bucket > 0``) need a ``bucket-key`` and the default bucket function
  (:mod:`.bucketing`).
* **Location.** The file must sit in the directory Paimon computes for its partition and bucket
  (``[data-file.path-directory/]k1=v1/.../bucket-N``). :func:`locate` parses the directories back to
  a partition row and re-computes the path from it; anything that does not round-trip is refused.
* **Names.** A data file is a visible ``*.parquet`` file; ``*.vector.parquet`` names are Paimon's own.
"""

from __future__ import annotations

import posixpath
import re
import struct
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from airflow_lakeformat.core.errors import RegisterError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.paths import BUCKET_PREFIX, DataFilePaths, unescape_path_name
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import CHARACTER_ROOTS, INTEGER_ROOTS, TIMESTAMP_ROOTS, DataType
from airflow_lakeformat.core.paimon.write.bucketing import bucket_key_type_supported

UNAWARE_BUCKET = -1
PARQUET_EXTENSION = ".parquet"
_EPOCH_DATE = date(1970, 1, 1)
_MILLIS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class Layout:
    """What adding files needs to know about a table, checked once."""

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


def table_layout(table: Table, schema: TableSchema | None = None) -> Layout:
    """The table's layout for adding files; refuses the tables files cannot be added to."""
    schema = schema or table.schema
    where = table.uri
    if schema.is_primary_key_table:
        raise RegisterError(
            where,
            "cannot add files to a primary-key table: a primary-key table's files need sorted keys and "
            "sequence numbers from a real writer (write the rows instead: lakeformat write, "
            "table.writes().write_rows)",
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
        return Layout(schema, paths, bucket)
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
        if not bucket_key_type_supported(dtype):
            raise RegisterError(
                where, f"bucket-key {key!r} of type {dtype.sql()} is not supported for bucket hashing"
            )
        types.append(dtype)
    return Layout(schema, paths, bucket, keys, tuple(types))


def check_data_file_name(name: str, where: str) -> None:
    """Refuses a name Paimon would not read as a data file of ours."""
    if not name.endswith(PARQUET_EXTENSION) or name.startswith((".", "_")):
        raise RegisterError(where, "a data file must be a visible *.parquet file")
    if name.endswith(".vector" + PARQUET_EXTENSION):
        raise RegisterError(where, "*.vector.parquet names are reserved for Paimon's vector files")


def table_relative_path(table: Table, path: str) -> str:
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


def locate_in_layout(layout: Layout, rel: str, where: str) -> tuple[bytes, int]:
    """:func:`locate` for a path already relative to the table root (``where`` names it in errors)."""
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
    layout = table_layout(table)
    rel = table_relative_path(table, relative_path)
    return locate_in_layout(layout, rel, table.io.uri(table.io.join(table.root, rel)))
