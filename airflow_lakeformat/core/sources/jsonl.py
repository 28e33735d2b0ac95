"""JSON lines (one object per line) read as the table's columns: each value's JSON kind is checked first.

Python's ``json`` parser reads every line, with numbers kept as their text (``parse_int``/``parse_float``),
so ``0.10`` reaches a ``DECIMAL(4, 2)`` column as ``0.10`` and ``1e400`` is not silently a float first.
Then each value must be of a kind its column accepts, and is handed to ``text.py`` as text:

==========================  ===========================================
column                      JSON values accepted
==========================  ===========================================
character (STRING, ...)     strings only (``7`` is refused: quote it)
numbers, DECIMAL            numbers, or strings holding one
BOOLEAN                     ``true``/``false``, or strings holding one
dates, times, timestamps    strings
binary                      base64 strings
==========================  ===========================================

``null`` and a missing key are NULL. A line that is not a JSON object, an object or array where a
column holds one value, and a key the table lacks are refused with the line number. Blank lines are
skipped (and still counted, so line numbers match an editor's).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.sources.schema import SourceValueError, WriteSchema, check_columns
from airflow_lakeformat.core.sources.text import parse_text_column

BATCH_ROWS = 65_536


class _Number(str):
    """A JSON number token, kept as the text it was written as."""

    __slots__ = ()


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, _Number):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string"


def _accepts(target: pa.DataType) -> tuple[type, ...]:
    """Which decoded JSON kinds a column of ``target`` takes (``str`` covers numbers' text too)."""
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return (str,)
    if pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_decimal(target):
        return (_Number, str)
    if pa.types.is_boolean(target):
        return (bool, str)
    return (str,)


def _column_texts(
    rows: list[tuple[int, dict[str, Any]]], target: pa.Field, schema: WriteSchema, source: str
) -> list[str | None]:
    """The column's values as text, after checking each one's JSON kind (and NOT NULL)."""
    accepted = _accepts(target.type)
    strings_only = accepted == (str,)
    texts: list[str | None] = []
    for line, row in rows:
        value = row.get(target.name)
        if value is None:
            if not target.nullable:
                raise SourceValueError(source, line, target.name, "NULL in a NOT NULL column", unit="line")
            texts.append(None)
            continue
        if isinstance(value, bool) and bool in accepted:
            texts.append("true" if value else "false")
            continue
        if (
            not isinstance(value, accepted)
            or isinstance(value, bool)
            or (strings_only and isinstance(value, _Number))
        ):
            hint = " (write it as a JSON string)" if strings_only and isinstance(value, _Number) else ""
            shown = value if isinstance(value, _Number) else json.dumps(value, ensure_ascii=False)
            raise SourceValueError(
                source,
                line,
                target.name,
                f"{_kind(value)} ({shown[:60]}) cannot be stored in {schema.type_name(target.name)}{hint}",
                unit="line",
            )
        texts.append(str(value))
    return texts


def _batch(rows: list[tuple[int, dict[str, Any]]], schema: WriteSchema, source: str) -> pa.Table:
    check_columns(list(dict.fromkeys(key for _, row in rows for key in row)), schema, source)
    lines = [line for line, _ in rows]
    arrays = []
    for target in schema.arrow:
        texts = pa.array(_column_texts(rows, target, schema, source), pa.string())
        if texts.null_count == len(texts):
            arrays.append(pa.nulls(len(texts), target.type))
        else:
            arrays.append(parse_text_column(texts, target, schema, source, lines.__getitem__, unit="line"))
    return pa.Table.from_arrays(arrays, schema=schema.arrow)


def _objects(lines: Iterable[bytes], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw, parse_int=_Number, parse_float=_Number, parse_constant=_Number)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceValueError(source, number, "-", f"not valid JSON: {exc}", unit="line") from None
        if not isinstance(row, dict):
            raise SourceValueError(
                source, number, "-", f"a JSON-lines row must be an object, not {_kind(row)}", unit="line"
            )
        yield number, row


def read_jsonl_batches(
    lines: Iterable[bytes], schema: WriteSchema, source: str, batch_rows: int = BATCH_ROWS
) -> Iterator[pa.Table]:
    """The rows of a JSON-lines stream as tables of ``schema.arrow``, ``batch_rows`` rows at a time.

    Args:
        lines: the file's lines (an open binary file iterates them).
        schema: the table's columns.
        source: the file's path, for errors.
        batch_rows: rows per yielded table.

    Raises:
        SourceValueError: a line that is not an object, or a value its column does not take.
    """
    rows: list[tuple[int, dict[str, Any]]] = []
    for item in _objects(lines, source):
        rows.append(item)
        if len(rows) >= batch_rows:
            yield _batch(rows, schema, source)
            rows = []
    if rows:
        yield _batch(rows, schema, source)
