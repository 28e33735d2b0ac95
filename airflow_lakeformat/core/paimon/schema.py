"""Table schema (``schema/schema-N``): fields, partition and primary keys, options."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow_lakeformat.core.paimon.options import TableOptions
from airflow_lakeformat.core.paimon.types import DataField, DataType

SCHEMA_PREFIX = "schema-"
CURRENT_SCHEMA_VERSION = 3

_KNOWN_KEYS = (
    "version",
    "id",
    "fields",
    "highestFieldId",
    "partitionKeys",
    "primaryKeys",
    "options",
    "comment",
    "timeMillis",
)


@dataclass(frozen=True)
class TableSchema:
    """One version of a table's schema. Fields we do not model are kept in ``extra``."""

    id: int
    fields: tuple[DataField, ...]
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    highest_field_id: int = -1
    time_millis: int = 0
    version: int = CURRENT_SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> TableSchema:
        fields = tuple(DataField.from_json(f) for f in obj["fields"])
        return cls(
            id=int(obj["id"]),
            fields=fields,
            partition_keys=tuple(obj.get("partitionKeys") or ()),
            primary_keys=tuple(obj.get("primaryKeys") or ()),
            options={str(k): str(v) for k, v in (obj.get("options") or {}).items()},
            comment=obj.get("comment"),
            highest_field_id=int(obj.get("highestFieldId", max((f.id for f in fields), default=-1))),
            time_millis=int(obj.get("timeMillis") or 0),
            # Schemas written before the version field existed are version 1 (Paimon <= 0.7).
            version=int(obj.get("version", 1)),
            extra={k: v for k, v in obj.items() if k not in _KNOWN_KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            out["comment"] = self.comment
        out["timeMillis"] = self.time_millis
        out.update(self.extra)
        return out

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False).encode("utf-8")

    @cached_property
    def table_options(self) -> TableOptions:
        return TableOptions(self.options, self.version)

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"schema {self.id} has no field {name!r}")

    @cached_property
    def partition_types(self) -> tuple[DataType, ...]:
        return tuple(self.field(name).type for name in self.partition_keys)

    @cached_property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """Primary keys without the partition keys: the fields of ``_MIN_KEY``/``_MAX_KEY``."""
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.primary_keys)
