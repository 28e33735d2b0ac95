"""Paimon data types as they appear in ``schema/schema-N``.

Atomic types are SQL strings (``"DECIMAL(10, 2) NOT NULL"``), compound types JSON objects. A parsed
type keeps the JSON it came from, so a schema we rewrite carries spellings and fields we do not
model exactly as Paimon wrote them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_LENGTH = 2147483647

# Canonical roots. STRING is VARCHAR(MAX) and BYTES is VARBINARY(MAX), as in Paimon.
INTEGER_ROOTS = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
CHARACTER_ROOTS = frozenset({"CHAR", "VARCHAR"})
BINARY_ROOTS = frozenset({"BINARY", "VARBINARY"})
TIMESTAMP_ROOTS = frozenset({"TIMESTAMP", "TIMESTAMP_LTZ"})
ATOMIC_ROOTS = frozenset(
    {"BOOLEAN", "FLOAT", "DOUBLE", "DECIMAL", "DATE", "TIME", "VARIANT", "BLOB"}
    | INTEGER_ROOTS
    | CHARACTER_ROOTS
    | BINARY_ROOTS
    | TIMESTAMP_ROOTS
)

_ALIASES = {
    "INTEGER": "INT",
    "DEC": "DECIMAL",
    "NUMERIC": "DECIMAL",
    "DOUBLE PRECISION": "DOUBLE",
    "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP",
    "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
    "TIME WITHOUT TIME ZONE": "TIME",
}

_ATOMIC = re.compile(
    r"^\s*(?P<name>[A-Z_]+(?:\s+PRECISION)?)\s*"
    r"(?:\(\s*(?P<a>\d+)\s*(?:,\s*(?P<b>\d+)\s*)?\))?\s*"
    r"(?P<zone>WITH(?:OUT)?\s+(?:LOCAL\s+)?TIME\s+ZONE)?\s*"
    r"(?P<notnull>NOT\s+NULL)?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DataType:
    """One Paimon data type. ``length`` is for CHAR/VARCHAR/BINARY/VARBINARY, ``precision`` for
    DECIMAL/TIME/TIMESTAMP."""

    root: str
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    element: DataType | None = None
    key: DataType | None = None
    value: DataType | None = None
    fields: tuple[DataField, ...] = ()
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def is_compact_decimal(self) -> bool:
        return self.root == "DECIMAL" and (self.precision or 10) <= 18

    @property
    def is_compact_timestamp(self) -> bool:
        return self.root in TIMESTAMP_ROOTS and (self.precision if self.precision is not None else 6) <= 3

    def sql(self) -> str:
        """The type as Paimon's ``asSQLString`` spells it."""
        suffix = "" if self.nullable else " NOT NULL"
        root = self.root
        if root == "VARCHAR" and self.length == MAX_LENGTH:
            return "STRING" + suffix
        if root == "VARBINARY" and self.length == MAX_LENGTH:
            return "BYTES" + suffix
        if root in CHARACTER_ROOTS | BINARY_ROOTS:
            return f"{root}({self.length}){suffix}"
        if root == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale}){suffix}"
        if root == "TIME":
            return f"TIME({self.precision}){suffix}"
        if root == "TIMESTAMP":
            return f"TIMESTAMP({self.precision}){suffix}"
        if root == "TIMESTAMP_LTZ":
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE{suffix}"
        return root + suffix

    def to_json(self) -> Any:
        """The JSON form to write into a schema file (the original JSON when we read one)."""
        if self.raw is not None:
            return self.raw
        if self.root in ATOMIC_ROOTS:
            return self.sql()
        name = self.root + ("" if self.nullable else " NOT NULL")
        if self.root in ("ARRAY", "MULTISET"):
            assert self.element is not None
            return {"type": name, "element": self.element.to_json()}
        if self.root == "MAP":
            assert self.key is not None and self.value is not None
            return {"type": name, "key": self.key.to_json(), "value": self.value.to_json()}
        return {"type": name, "fields": [f.to_json() for f in self.fields]}


@dataclass(frozen=True)
class DataField:
    """A named, id-carrying field of a row type or table schema."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> DataField:
        known = {"id", "name", "type", "description"}
        return cls(
            id=int(obj["id"]),
            name=str(obj["name"]),
            type=parse_type(obj["type"]),
            description=obj.get("description"),
            extra={k: v for k, v in obj.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        out.update(self.extra)
        return out


def parse_type(spec: Any) -> DataType:
    """Parse a type from schema JSON: an SQL string for atomic types, an object for compound ones."""
    if isinstance(spec, str):
        return _parse_atomic(spec)
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValueError(f"not a Paimon data type: {spec!r}")
    head = str(spec["type"]).strip()
    nullable = True
    if re.search(r"\s+NOT\s+NULL$", head, re.IGNORECASE):
        nullable = False
        head = re.sub(r"\s+NOT\s+NULL$", "", head, flags=re.IGNORECASE)
    root = head.upper()
    if root in ("ARRAY", "MULTISET"):
        return DataType(root, nullable, element=parse_type(spec["element"]), raw=spec)
    if root == "MAP":
        return DataType(
            root, nullable, key=parse_type(spec["key"]), value=parse_type(spec["value"]), raw=spec
        )
    if root == "ROW":
        fields = tuple(DataField.from_json(f) for f in spec.get("fields", []))
        return DataType(root, nullable, fields=fields, raw=spec)
    # Atomic types are sometimes written as {"type": "INT"} by other tools.
    parsed = _parse_atomic(str(spec["type"]))
    return DataType(**{**parsed.__dict__, "raw": spec})


def _parse_atomic(text: str) -> DataType:
    match = _ATOMIC.match(text)
    if not match:
        raise ValueError(f"not a Paimon data type: {text!r}")
    name = re.sub(r"\s+", " ", match["name"].upper())
    zone = re.sub(r"\s+", " ", (match["zone"] or "").upper())
    if zone:
        name = f"{name} {zone}"
    name = _ALIASES.get(name, name)
    nullable = match["notnull"] is None
    a = int(match["a"]) if match["a"] is not None else None
    b = int(match["b"]) if match["b"] is not None else None
    if name == "STRING":
        return DataType("VARCHAR", nullable, length=MAX_LENGTH, raw=text)
    if name == "BYTES":
        return DataType("VARBINARY", nullable, length=MAX_LENGTH, raw=text)
    if name in CHARACTER_ROOTS | BINARY_ROOTS:
        return DataType(name, nullable, length=a if a is not None else 1, raw=text)
    if name == "DECIMAL":
        return DataType(name, nullable, precision=a if a is not None else 10, scale=b or 0, raw=text)
    if name == "TIME":
        return DataType(name, nullable, precision=a if a is not None else 0, raw=text)
    if name in TIMESTAMP_ROOTS:
        return DataType(name, nullable, precision=a if a is not None else 6, raw=text)
    if name in ATOMIC_ROOTS:
        return DataType(name, nullable, raw=text)
    raise ValueError(f"unknown Paimon data type: {text!r}")
