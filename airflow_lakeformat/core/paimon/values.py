"""Conversions of Paimon internal values: to partition-directory strings, to JSON, from Python.

Partition directory names must match what Paimon Java writes, character for character, or paths we
compute point at files that do not exist. With ``partition.legacy-name=true`` (the default) Java
uses the internal value's ``toString()``; otherwise it casts the value to STRING. Both are
reproduced here, including Java's floating-point and ``LocalDateTime`` spellings.
"""

from __future__ import annotations

import math
import struct
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from airflow_lakeformat.core.paimon.binary_row import Timestamp
from airflow_lakeformat.core.paimon.types import BINARY_ROOTS, CHARACTER_ROOTS, TIMESTAMP_ROOTS, DataType

_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_MILLIS_PER_DAY = 86_400_000


def timestamp_to_datetime(ts: Timestamp) -> datetime:
    """A naive datetime (microsecond precision: nanoseconds below a microsecond are dropped)."""
    return _EPOCH + timedelta(milliseconds=ts.millisecond, microseconds=ts.nano_of_millisecond // 1000)


def timestamp_from_epoch(value: int, unit_digits: int) -> Timestamp:
    """An epoch value in 10^-digits seconds as Paimon's (millis, nanos-of-milli); floor like Java."""
    if unit_digits == 3:
        return Timestamp(value, 0)
    per_milli = 10 ** (unit_digits - 3)
    millis, rest = divmod(value, per_milli)
    return Timestamp(millis, rest * (1_000_000 // per_milli))


def _local_date_time_parts(ts: Timestamp) -> tuple[date, int]:
    days, millis_of_day = divmod(ts.millisecond, _MILLIS_PER_DAY)
    nano_of_day = millis_of_day * 1_000_000 + ts.nano_of_millisecond
    return _EPOCH_DATE + timedelta(days=days), nano_of_day


def _java_local_time(nano_of_day: int) -> str:
    """``java.time.LocalTime.toString()``: seconds and fraction only when non-zero, fraction in 3-digit groups."""
    hours, rest = divmod(nano_of_day, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds, nanos = divmod(rest, 1_000_000_000)
    out = f"{hours:02d}:{minutes:02d}"
    if seconds or nanos:
        out += f":{seconds:02d}"
        if nanos:
            if nanos % 1_000_000 == 0:
                out += f".{nanos // 1_000_000:03d}"
            elif nanos % 1000 == 0:
                out += f".{nanos // 1000:06d}"
            else:
                out += f".{nanos:09d}"
    return out


def java_float_to_string(value: float, single_precision: bool = False) -> str:
    """``Double.toString`` / ``Float.toString`` (shortest digits that round-trip, Java's layout)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    digits = _shortest_float32(value) if single_precision else repr(value)
    dec = Decimal(digits)
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = format(dec, "f")
        if "." not in text:
            text += ".0"
        return text
    sign, digit_tuple, _ = dec.normalize().as_tuple()
    digit_chars = "".join(map(str, digit_tuple))
    mantissa = digit_chars[0] + "." + (digit_chars[1:] or "0")
    return ("-" if sign else "") + mantissa + "E" + str(dec.adjusted())


def _shortest_float32(value: float) -> str:
    target = struct.unpack("<f", struct.pack("<f", value))[0]
    for precision in range(1, 10):
        candidate = f"{target:.{precision}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(candidate)))[0] == target:
                return candidate
        except OverflowError:  # rounding near FLT_MAX can leave the float32 range
            continue
    return repr(target)


def legacy_partition_string(value: Any, dtype: DataType) -> str:
    """The internal value's Java ``toString()``, as ``partition.legacy-name=true`` uses it."""
    root = dtype.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("FLOAT", "DOUBLE"):
        return java_float_to_string(float(value), single_precision=root == "FLOAT")
    if root == "DECIMAL":
        return format(value, "f")
    if root in TIMESTAMP_ROOTS:
        day, nano_of_day = _local_date_time_parts(value)
        return f"{day.isoformat()}T{_java_local_time(nano_of_day)}"
    if root in BINARY_ROOTS:
        # Java prints the array's identity hash ("[B@1b6d3586"), which nobody can reproduce; pypaimon
        # prints Python's repr ("b'\\x01'"). We follow pypaimon, the only reproducible convention, so
        # paths of Java-written tables with binary partition keys cannot be computed.
        return repr(bytes(value))
    return str(value)


def cast_partition_string(value: Any, dtype: DataType) -> str:
    """The value cast to STRING, as ``partition.legacy-name=false`` uses it.

    TIMESTAMP WITH LOCAL TIME ZONE is formatted in UTC; Java uses the JVM default time zone.
    """
    root = dtype.root
    if root == "DATE":
        return (_EPOCH_DATE + timedelta(days=value)).isoformat()
    if root == "TIME":
        millis = value % _MILLIS_PER_DAY
        text = _format_hms(millis // 1000)
        precision = dtype.precision or 0
        if precision > 0:
            text += "." + f"{millis % 1000:03d}".ljust(precision, "0")[:precision]
        return text
    if root in TIMESTAMP_ROOTS:
        day, nano_of_day = _local_date_time_parts(value)
        fraction = f"{nano_of_day % 1_000_000_000:09d}"
        precision = dtype.precision if dtype.precision is not None else 6
        while len(fraction) > precision and fraction.endswith("0"):
            fraction = fraction[:-1]
        text = f"{day.isoformat()} {_format_hms(nano_of_day // 1_000_000_000)}"
        return f"{text}.{fraction}" if fraction else text
    if root in BINARY_ROOTS:
        return bytes(value).decode("utf-8", errors="replace")
    return legacy_partition_string(value, dtype)


def _format_hms(seconds_of_day: int) -> str:
    hours, rest = divmod(seconds_of_day, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def to_json_value(value: Any, dtype: DataType) -> Any:
    """A JSON-friendly rendering of an internal value (the CLI's ``partition`` objects use it)."""
    if value is None:
        return None
    root = dtype.root
    if root == "DATE":
        return (_EPOCH_DATE + timedelta(days=value)).isoformat()
    if root == "TIME":
        return (datetime.min + timedelta(milliseconds=value)).time().isoformat()
    if root in TIMESTAMP_ROOTS:
        return timestamp_to_datetime(value).isoformat()
    if root == "DECIMAL":
        return format(value, "f")
    if root in BINARY_ROOTS or root in ("VARIANT", "BLOB"):
        return bytes(value).hex()
    if root in CHARACTER_ROOTS or root in (
        "BOOLEAN",
        "FLOAT",
        "DOUBLE",
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
    ):
        return value
    raise ValueError(f"no JSON rendering for {dtype.sql()}")


def from_python(value: Any, dtype: DataType) -> Any:
    """Convert a Python value (``date``, ``datetime``, ``Decimal``...) to Paimon's internal form."""
    if value is None:
        return None
    root = dtype.root
    if root == "DATE" and isinstance(value, date) and not isinstance(value, datetime):
        return (value - _EPOCH_DATE).days
    if root == "TIME" and isinstance(value, time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if root in TIMESTAMP_ROOTS and isinstance(value, datetime):
        offset = value.utcoffset()
        naive = (value - offset if offset is not None else value).replace(tzinfo=None)
        delta = naive - _EPOCH
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        millis, micro_rest = divmod(micros, 1000)
        return Timestamp(millis, micro_rest * 1000)
    if root == "DECIMAL" and not isinstance(value, Decimal):
        return Decimal(str(value))
    return value
