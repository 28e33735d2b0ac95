"""Text values (a CSV field, a JSON string or number token) parsed as their column's type, never guessed.

A text format says nothing about types, so each value is read as the *table's* column type, and a value
that does not fit is refused rather than bent:

* character columns receive the text exactly as written (``007`` stays ``007``, ``2026-11-29`` stays a
  string, blanks and non-ASCII are kept);
* integers: an optional ``-`` and digits (leading zeros allowed); no blanks, ``+``, fractions, exponents,
  and no value out of the type's range;
* ``FLOAT``/``DOUBLE``: decimal or exponent notation, ``NaN`` and ``inf``/``Infinity``; a finite number
  too large for the type is refused (it would become infinite);
* ``DECIMAL(p, s)``: at most ``s`` fraction digits that are not zero, at most ``p - s`` integer digits;
* ``BOOLEAN``: ``true``/``false``/``1``/``0`` in any case;
* ``DATE``: ``YYYY-MM-DD``; ``TIME``: ``HH:MM[:SS[.fraction]]``; ``TIMESTAMP``: ISO 8601 date and time
  (``T`` or a blank between), at most as many fraction digits as the column keeps (trailing zeros aside). A naive timestamp
  column refuses a value with a zone offset (which wall-clock time it means is a guess); an instant
  column (``TIMESTAMP WITH LOCAL TIME ZONE``, Iceberg ``timestamptz``) converts a value with an offset
  to UTC and takes one without as UTC;
* binary columns: base64 (as Spark's and Flink's JSON formats write bytes); ``uuid``: its canonical text.

Parsing is vectorised with Arrow's casts; when a cast fails, the first offending row is found by halving
(a handful of casts on slices), so the error names the file, the row, the column and the value.
Nested columns (arrays, maps, rows) have no text form here: write them from Parquet.
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable, Collection

import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.sources.conform import conform_table
from airflow_lakeformat.core.sources.schema import SourceValueError, WriteSchema, check_columns

Parser = Callable[[pa.Array], pa.Array]

_INFINITY = r"(?i)^[+-]?inf(inity)?$"
_OFFSET = r"(Z|z|[+-]\d\d(:?\d\d)?)$"
_TIME = re.compile(r"^(\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?$")
_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_FAILURES = (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, OverflowError, binascii.Error)


def _cast(texts: pa.Array, target: pa.DataType) -> pa.Array:
    return texts.cast(target, safe=True)


def _float(target: pa.DataType) -> Parser:
    def parse(texts: pa.Array) -> pa.Array:
        values = _cast(texts, target)
        overflow = pc.and_(pc.is_inf(values), pc.invert(pc.match_substring_regex(texts, _INFINITY)))
        if pc.any(overflow).as_py():
            raise ValueError(f"out of the range of {target}")
        return values

    return parse


def _without_trailing_zeros(texts: pa.Array) -> pa.Array:
    """``10:00:00.123000`` -> ``10:00:00.123``, ``10:00:00.000`` -> ``10:00:00`` (Arrow refuses more fraction
    digits than the unit keeps, even zeros; Python's ``isoformat`` writes six)."""
    texts = pc.replace_substring_regex(texts, r"(\.\d*?)0+($|[^0-9])", r"\1\2")
    return pc.replace_substring_regex(texts, r"\.($|[^0-9])", r"\1")


def _timestamp(target: pa.DataType) -> Parser:
    if target.tz is None:
        return lambda texts: _cast(_without_trailing_zeros(texts), target)
    naive = pa.timestamp(target.unit)

    def parse(texts: pa.Array) -> pa.Array:
        texts = _without_trailing_zeros(texts)
        with_offset = pc.fill_null(pc.match_substring_regex(texts, _OFFSET), False)
        if pc.all(with_offset).as_py():
            return _cast(texts, target)
        zoned = _cast(pc.if_else(with_offset, texts, pa.scalar(None, texts.type)), target)
        local = _cast(pc.if_else(with_offset, pa.scalar(None, texts.type), texts), naive)
        return pc.if_else(with_offset, zoned, local.cast(target))

    return parse


def _python(convert: Callable[[str], object], target: pa.DataType) -> Parser:
    def parse(texts: pa.Array) -> pa.Array:
        return pa.array([None if t is None else convert(t) for t in texts.to_pylist()], target)

    return parse


def _time_value(unit: str) -> Callable[[str], int]:
    digits = _UNIT_DIGITS[unit]

    def convert(text: str) -> int:
        match = _TIME.match(text)
        if match is None:
            raise ValueError("not a time of day (HH:MM[:SS[.fraction]])")
        hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
        fraction = match[4] or ""
        if hours > 23 or minutes > 59 or seconds > 59:
            raise ValueError("not a time of day")
        if fraction[digits:].strip("0"):
            raise ValueError(f"more than {digits} fraction digits")
        whole = ((hours * 60 + minutes) * 60 + seconds) * 10**digits
        return int(whole + int((fraction + "0" * 9)[:digits] or 0))

    return convert


def _bytes_value(width: int | None) -> Callable[[str], bytes]:
    def convert(text: str) -> bytes:
        value = base64.b64decode(text.encode("ascii"), validate=True)
        if width is not None and len(value) != width:
            raise ValueError(f"{len(value)} bytes, the column holds exactly {width}")
        return value

    return convert


def _uuid_storage(texts: pa.Array) -> pa.Array:
    storage = pa.array([None if t is None else uuid.UUID(t).bytes for t in texts.to_pylist()], pa.binary(16))
    return storage


def parser_for(target: pa.DataType) -> Parser | None:
    """How text becomes a value of ``target``; None for types without a text form (nested ones)."""
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return lambda texts: _cast(texts, target)
    if pa.types.is_floating(target):
        return _float(target)
    if pa.types.is_integer(target) or pa.types.is_decimal(target) or pa.types.is_boolean(target):
        return lambda texts: _cast(texts, target)
    if pa.types.is_date32(target):
        return lambda texts: _cast(texts, target)
    if pa.types.is_timestamp(target):
        return _timestamp(target)
    if pa.types.is_time(target):
        return _python(_time_value(target.unit), target)
    if pa.types.is_fixed_size_binary(target):
        return _python(_bytes_value(target.byte_width), target)
    if pa.types.is_binary(target) or pa.types.is_large_binary(target):
        return _python(_bytes_value(None), target)
    if isinstance(target, pa.ExtensionType) and target.extension_name == "arrow.uuid":
        return lambda texts: pa.ExtensionArray.from_storage(target, _uuid_storage(texts))
    return None


def _first_failure(texts: pa.Array, parse: Parser) -> tuple[int, str]:
    """The index of the first value ``parse`` refuses (``parse`` failed on ``texts``) and why."""
    low, high = 0, len(texts)
    reason = ""
    while high - low > 1:
        middle = (low + high) // 2
        try:
            parse(texts.slice(low, middle - low))
        except _FAILURES as exc:
            high, reason = middle, str(exc)
        else:
            low = middle
    if not reason:
        try:
            parse(texts.slice(low, 1))
        except _FAILURES as exc:
            reason = str(exc)
    return low, reason


def _reason(text: str, reason: str, type_name: str) -> str:
    if "expected no zone offset" in reason:
        return f"{text!r} has a zone offset, but {type_name} has no time zone (write the local time)"
    reason = reason.split(". If these timestamps", 1)[0]
    reason = re.sub(r"^Failed to parse string: '.*' as a scalar of type \S+:?\s*", "", reason)
    detail = f" ({reason})" if reason else ""
    return f"{text!r} is not a valid {type_name}{detail}"


def parse_text_column(
    texts: pa.Array,
    target: pa.Field,
    schema: WriteSchema,
    source: str,
    row_of: Callable[[int], int | None],
    *,
    unit: str = "row",
) -> pa.Array:
    """A column of text (nulls kept) as a column of ``target``'s type.

    Args:
        texts: the values as written (``string``), null where the input holds no value.
        target: the table's column.
        schema: the table's columns (for the type's name in errors).
        source: the input's path, for errors.
        row_of: the row (or line) number in the file of ``texts[i]``, for errors.
        unit: what ``row_of`` counts, ``"row"`` or ``"line"``.

    Raises:
        SourceValueError: a value that does not fit the column: file, row, column, value and why.
    """
    name = target.name
    parse = parser_for(target.type)
    if parse is None:
        raise SourceValueError(
            source,
            None,
            name,
            f"{schema.type_name(name)} columns cannot be read from text: write Parquet",
            unit=unit,
        )
    try:
        return parse(texts)
    except _FAILURES:
        index, reason = _first_failure(texts, parse)
        value = texts[index].as_py()
        raise SourceValueError(
            source, row_of(index), name, _reason(value, reason, schema.type_name(name)), unit=unit
        ) from None


def _rows_from(first_row: int | None) -> Callable[[int], int | None]:
    return lambda index: None if first_row is None else first_row + index


def parse_text_table(
    data: pa.Table | pa.RecordBatch,
    schema: WriteSchema,
    source: str,
    *,
    text_columns: Collection[str] | None = None,
    first_row: int | None = 1,
) -> pa.Table:
    """Parse the text columns of ``data`` as the table's types, then conform the whole (``conform_table``).

    Args:
        data: rows whose ``text_columns`` hold values as written (any other column is typed input).
        schema: the table's columns.
        source: the input's name, for errors.
        text_columns: the columns holding text (default: every column).
        first_row: the number of ``data``'s first row in its file; None when unknown (a Spark partition).

    Raises:
        SourceValueError, RegisterError: as ``parse_text_column`` and ``conform_table``.
    """
    names = list(data.schema.names)
    check_columns(names, schema, source)
    wanted = set(names if text_columns is None else text_columns)
    arrays = []
    for name in names:
        column = data.column(name)
        if name in wanted:
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            if not pa.types.is_string(column.type):
                column = column.cast(pa.string())
            column = parse_text_column(
                column, schema.arrow.field(name), schema, source, _rows_from(first_row)
            )
        arrays.append(column)
    return conform_table(pa.Table.from_arrays(arrays, names=names), schema, source, first_row or 1)
