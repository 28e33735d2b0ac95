"""Arrow -> Paimon type mapping, for schemas given as Arrow (the reverse lives in ``register``)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from airflow_lakeformat.core.paimon.types import parse_type

_PRECISION_OF_UNIT = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_SIMPLE = {
    "bool": "BOOLEAN", "boolean": "BOOLEAN",
    "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT",
    "float": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE", "double": "DOUBLE",
    "string": "STRING", "utf8": "STRING", "large_string": "STRING", "large_utf8": "STRING",
    "binary": "BYTES", "large_binary": "BYTES", "date32": "DATE", "date32[day]": "DATE",
}  # fmt: skip


def paimon_type_from_arrow(arrow_type: pa.DataType, nullable: bool = True) -> str:
    """The Paimon SQL type string for an Arrow type."""
    suffix = "" if nullable else " NOT NULL"
    if pa.types.is_timestamp(arrow_type):
        precision = _PRECISION_OF_UNIT[arrow_type.unit]
        zone = " WITH LOCAL TIME ZONE" if arrow_type.tz else ""
        return f"TIMESTAMP({precision}){zone}{suffix}"
    if pa.types.is_time(arrow_type):
        return f"TIME({min(_PRECISION_OF_UNIT[arrow_type.unit], 3)}){suffix}"
    if pa.types.is_decimal(arrow_type):
        return f"DECIMAL({arrow_type.precision}, {arrow_type.scale}){suffix}"
    if pa.types.is_fixed_size_binary(arrow_type):
        return f"BINARY({arrow_type.byte_width}){suffix}"
    name = str(arrow_type)
    if name in _SIMPLE:
        return _SIMPLE[name] + suffix
    raise ValueError(f"Arrow type {arrow_type} has no Paimon equivalent here")


def fields_from_arrow(schema: pa.Schema) -> list[dict[str, Any]]:
    return [{"name": f.name, "type": paimon_type_from_arrow(f.type, f.nullable)} for f in schema]


_ARROW_NAME = re.compile(r"^(timestamp\[(s|ms|us|ns)(, tz=.+)?\]|decimal128\((\d+), ?(\d+)\))$")


def fields_from_arrow_json(field: dict[str, Any]) -> dict[str, Any]:
    """A field whose ``type`` is a Paimon type, or an Arrow type name (``int64``, ``timestamp[us]``...)."""
    type_spec = field["type"]
    if not isinstance(type_spec, str):
        return dict(field)
    try:
        parse_type(type_spec)
        return dict(field)
    except ValueError:
        pass
    nullable = bool(field.get("nullable", True))
    name = type_spec.strip()
    match = _ARROW_NAME.match(name)
    if name in _SIMPLE:
        paimon = _SIMPLE[name] + ("" if nullable else " NOT NULL")
    elif match and match[2]:
        paimon = paimon_type_from_arrow(pa.timestamp(match[2], tz="UTC" if match[3] else None), nullable)
    elif match:
        paimon = paimon_type_from_arrow(pa.decimal128(int(match[4]), int(match[5])), nullable)
    else:
        raise ValueError(f"field {field['name']!r}: {type_spec!r} is neither a Paimon nor an Arrow type")
    out = {k: v for k, v in field.items() if k != "nullable"}
    out["type"] = paimon
    return out
