"""Key and value statistics of a key-value file we write (Java: ``KeyValueDataFileWriter#result``,
``StatsCollectorFactories``, ``SimpleStatsConverter``, ``TruncateSimpleColStatsCollector``).

* Key statistics: one field per trimmed primary key, in all mode (``toBinaryAllMode``: no field left out),
  from bounds the writer computed over the rows (``kv_write``).
* Value statistics: from the Parquet footer as the append writer reads them (``write/value_stats``), shaped
  per column by the stats mode Java would give it (see ``kv_write``'s docstring for the rules).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from airflow_lakeformat.core.errors import UnsupportedFormatError
from airflow_lakeformat.core.paimon import binary_row
from airflow_lakeformat.core.paimon.manifest import EMPTY_STATS_ROW, SimpleStats
from airflow_lakeformat.core.paimon.options import parse_bool
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, CHARACTER_ROOTS, DataField, DataType
from airflow_lakeformat.core.paimon.write.parquet_columns import NESTED_ROOTS, leaf_count
from airflow_lakeformat.core.paimon.write.value_stats import column_stats, dense_value_stats

DEFAULT_STATS_MODE = "truncate(16)"
_TRUNCATE = re.compile(r"^truncate\((\d+)\)$")
_MAX_CODE_POINT = 0x10FFFF


def _check_mode(mode: str, key: str) -> str:
    mode = mode.strip().lower()
    if mode in ("none", "counts", "full") or _TRUNCATE.match(mode):
        return mode
    raise UnsupportedFormatError(key, f"unknown stats mode {mode!r}")


def value_stats_modes(schema: TableSchema, level: int) -> list[str]:
    """The stats mode of every table field in a file written at ``level`` (``StatsCollectorFactories``)."""
    options = schema.table_options
    mode = options.get("metadata.stats-mode") or DEFAULT_STATS_MODE
    for item in (options.get("metadata.stats-mode.per.level") or "").split(","):
        at, sep, value = item.partition(":")
        if sep and at.strip().isdigit() and int(at) == level:
            mode = value
    mode = _check_mode(mode, "metadata.stats-mode")
    keep_first = int(options.get("metadata.stats-keep-first-n-columns") or -1)
    modes: list[str] = []
    for counted, f in enumerate(schema.fields):
        key = f"fields.{f.name}.stats-mode"
        own = options.get(key)
        if own is not None:
            modes.append(_check_mode(own, key))
        elif 0 <= keep_first <= counted:
            modes.append("none")
        else:
            modes.append(mode)
    return modes


def truncate_min(value: Any, length: int) -> Any:
    """``TruncateSimpleColStatsCollector#truncateMin``: the first ``length`` characters (or bytes)."""
    if isinstance(value, str):
        return value[:length]
    if isinstance(value, bytes):
        return value[:length]
    return value


def truncate_max(value: Any, length: int) -> Any | None:
    """``truncateMax``: a bound >= ``value`` of at most ``length`` characters (bytes); None if there is none."""
    if isinstance(value, str):
        if len(value) <= length:
            return value
        for i in range(length - 1, -1, -1):
            following = ord(value[i]) + 1
            if 0xD800 <= following <= 0xDFFF:
                following = 0xE000  # not a character in UTF-8; the next one is still a true bound
            if following <= _MAX_CODE_POINT:
                return value[:i] + chr(following)
        return None
    if isinstance(value, bytes):
        if len(value) <= length:
            return value
        for i in range(length - 1, -1, -1):
            if value[i] != 0xFF:
                return value[:i] + bytes([value[i] + 1])
        return None
    return value


def _shape(
    mode: str, dtype: DataType, found: tuple[Any, Any, int] | None
) -> tuple[Any, Any, int | None] | None:
    """A column's (min, max, nulls) under its mode; None when the mode (or the footer) gives none."""
    if mode == "none" or found is None:
        return None
    low, high, nulls = found
    if mode == "counts":
        return None, None, nulls
    match = _TRUNCATE.match(mode)
    if match and (dtype.root in CHARACTER_ROOTS or dtype.root in BINARY_ROOTS):
        length = int(match[1])
        high = truncate_max(high, length) if high is not None else None
        low = truncate_min(low, length) if high is not None else None
        if high is None:
            return None, None, nulls
    return low, high, nulls


def file_value_stats(
    schema: TableSchema, level: int, footer: Any, leading_columns: int, null_counts: Sequence[int]
) -> tuple[SimpleStats, list[str] | None]:
    """The ``_VALUE_STATS`` and ``_VALUE_STATS_COLS`` of a file from its footer (``pyarrow.FileMetaData``).

    Args:
        schema: the schema the file was written with.
        level: the file's level (``metadata.stats-mode.per.level``).
        footer: the written file's Parquet metadata.
        leading_columns: how many primitive columns precede the value columns (keys, sequence, kind).
        null_counts: each value column's null count, counted while writing (used in ``counts`` mode).
    """
    modes = value_stats_modes(schema, level)
    dense = parse_bool(schema.table_options.get("metadata.stats-dense-store") or "true")
    row_groups = [footer.row_group(i) for i in range(footer.num_row_groups)]
    pschema = footer.schema
    arrow = pschema.to_arrow_schema()
    included: list[DataField] = []
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[int | None] = []
    leaf = leading_columns
    for index, (f, mode) in enumerate(zip(schema.fields, modes, strict=True)):
        width = leaf_count(arrow.field(leading_columns + index).type)
        found: tuple[Any, Any, int] | None = None
        if mode == "counts":
            found = (None, None, null_counts[index])
        elif mode != "none" and width == 1 and f.type.root not in NESTED_ROOTS:
            found = column_stats(row_groups, leaf, pschema.column(leaf), f.type)
        leaf += width
        shaped = _shape(mode, f.type, found)
        if shaped is None and dense:
            continue
        included.append(f)
        low, high, count = shaped if shaped is not None else (None, None, None)
        mins.append(low)
        maxs.append(high)
        nulls.append(count)
    return dense_value_stats(schema, included, mins, maxs, nulls, "value statistics")


def key_stats_row(bounds: Sequence[tuple[Any, Any, int]], key_types: Sequence[DataType]) -> SimpleStats:
    """``_KEY_STATS`` in all mode from per-field (min, max, null count)."""
    if not key_types:
        return SimpleStats(EMPTY_STATS_ROW, EMPTY_STATS_ROW, [])
    types = list(key_types)
    return SimpleStats(
        binary_row.encode([b[0] for b in bounds], types),
        binary_row.encode([b[1] for b in bounds], types),
        [b[2] for b in bounds],
    )
