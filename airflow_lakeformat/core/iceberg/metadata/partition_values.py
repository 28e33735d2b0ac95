"""Partition values as JSON: raw Iceberg partition tuples rendered by their partition field's result type.

Manifests store partition tuples in the Avro form of each field's *result* type (Iceberg spec
"Partition Transforms" and Appendix A): ``day`` results are dates (days since epoch), ``hour``/``month``/
``year`` ints, ``bucket`` ints, ``identity`` the source type, ``truncate`` the source type. Rendering:

* date -> ``"YYYY-MM-DD"``; time -> ``"HH:MM:SS[.ffffff]"``; timestamp(tz) -> ISO 8601 (``+00:00`` for tz);
* decimal -> its string (``"12.30"``); uuid -> canonical string; binary/fixed -> lowercase hex;
* float/double NaN and infinities -> ``"NaN"``/``"Infinity"``/``"-Infinity"`` (JSON has no literal);
* everything else (ints, strings, booleans, null) as is.

Both decoders' raw forms are accepted (ints or ``date`` objects, bytes or ``Decimal``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)


def render_value(value: Any, result_type: IcebergType | None) -> Any:
    """One partition value as a JSON-friendly value (module docstring)."""
    if value is None:
        return None
    if isinstance(result_type, DateType):
        if isinstance(value, int):
            return (_EPOCH_DATE + timedelta(days=value)).isoformat()
        return value.isoformat() if isinstance(value, date) else str(value)
    if isinstance(result_type, (TimestampType, TimestamptzType)):
        stamp = _EPOCH + timedelta(microseconds=value) if isinstance(value, int) else value
        if isinstance(result_type, TimestamptzType) and isinstance(stamp, datetime) and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=timezone.utc)
        return stamp.isoformat() if isinstance(stamp, datetime) else str(stamp)
    if isinstance(result_type, TimeType):
        if isinstance(value, int):
            seconds, micros = divmod(value, 1_000_000)
            minutes, second = divmod(seconds, 60)
            hour, minute = divmod(minutes, 60)
            return time(hour, minute, second, micros).isoformat()
        return value.isoformat() if isinstance(value, time) else str(value)
    if isinstance(result_type, DecimalType):
        if isinstance(value, (bytes, bytearray)):
            unscaled = int.from_bytes(value, "big", signed=True)
            return str(Decimal(unscaled).scaleb(-result_type.scale))
        return str(value)
    if isinstance(result_type, UUIDType):
        if isinstance(value, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value)
    if isinstance(value, (bytes, bytearray)) or isinstance(result_type, (BinaryType, FixedType)):
        return bytes(value).hex() if isinstance(value, (bytes, bytearray)) else str(value)
    if isinstance(value, float) or isinstance(result_type, (FloatType, DoubleType)):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return number
    if isinstance(value, (date, datetime, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


def partition_result_types(spec: PartitionSpec, schemas: Sequence[Schema]) -> list[IcebergType | None]:
    """Each partition field's result type, from the first schema that has all the spec's source columns.

    An old spec may reference a column the current schema dropped, so every schema is tried (current
    first is the caller's business); without a match the types are None and values render by Python type.
    """
    for schema in schemas:
        try:
            partition_type = spec.partition_type(schema)
        except (ValueError, KeyError):
            continue
        return [field.field_type for field in partition_type.fields]
    return [None] * len(spec.fields)


def partition_json(
    spec: PartitionSpec | None, result_types: Sequence[IcebergType | None], values: tuple[object, ...]
) -> dict[str, Any]:
    """A partition tuple as ``{partition field name: JSON value}``.

    Args:
        spec: The manifest's partition spec (None when the metadata no longer has it: fields are then
            named ``_<position>``).
        result_types: ``partition_result_types(spec, ...)``.
        values: The raw values in the spec's field order.

    Returns:
        The rendered object; empty for an unpartitioned spec.

    Example:
        >>> partition_json(spec, partition_result_types(spec, [schema]), (19723, "a"))  # doctest: +SKIP
        {'d_day': '2024-01-01', 's': 'a'}
    """
    if spec is None:
        return {f"_{i}": render_value(v, None) for i, v in enumerate(values)}
    rendered: dict[str, Any] = {}
    for position, field in enumerate(spec.fields):
        value = values[position] if position < len(values) else None
        result_type = result_types[position] if position < len(result_types) else None
        rendered[field.name] = render_value(value, result_type)
    return rendered
