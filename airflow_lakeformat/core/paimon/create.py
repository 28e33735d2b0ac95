"""Create a table: write ``schema/schema-0`` exclusively, as Paimon's ``SchemaManager.createTable`` does."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_lakeformat.core.errors import TableAlreadyExistsError
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.core.paimon.schema import SCHEMA_PREFIX, TableSchema
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.types import DataField, parse_type


def schema_from_fields(
    fields: Sequence[Mapping[str, Any]],
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    comment: str | None = None,
    time_millis: int | None = None,
) -> TableSchema:
    """Build schema 0 from Paimon-style fields (``{"name", "type"[, "id", "description"]}``)."""
    data_fields = []
    for index, spec in enumerate(fields):
        data_fields.append(
            DataField(
                int(spec.get("id", index)),
                str(spec["name"]),
                parse_type(spec["type"]),
                spec.get("description"),
            )
        )
    names = [f.name for f in data_fields]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate field names in {names}")
    if len({f.id for f in data_fields}) != len(data_fields):
        raise ValueError("duplicate field ids")
    for key in (*partition_keys, *primary_keys):
        if key not in names:
            raise ValueError(f"key {key!r} is not a field (fields: {', '.join(names)})")
    if primary_keys and not set(partition_keys) <= set(primary_keys):
        raise ValueError(
            "a primary-key table's primary keys must include every partition key (Paimon's rule)"
        )
    data_fields = [
        # Primary-key fields are NOT NULL in Paimon.
        DataField(f.id, f.name, _not_null(f) if f.name in primary_keys else f.type, f.description)
        for f in data_fields
    ]
    return TableSchema(
        id=0,
        fields=tuple(data_fields),
        partition_keys=tuple(partition_keys),
        primary_keys=tuple(primary_keys),
        options=dict(options or {}),
        comment=comment,
        highest_field_id=max((f.id for f in data_fields), default=-1),
        time_millis=int(time.time() * 1000) if time_millis is None else time_millis,
    )


def _not_null(field: DataField) -> Any:
    from dataclasses import replace

    return replace(field.type, nullable=False, raw=None)


def create_table(uri: str, schema: TableSchema, storage_options: Mapping[str, Any] | None = None) -> Table:
    """Write ``schema/schema-0`` only if the table does not exist yet; return the opened table."""
    io, root = FileIO.for_uri(uri, storage_options)
    path = io.join(root, "schema", f"{SCHEMA_PREFIX}0")
    if any(name.startswith(SCHEMA_PREFIX) for name in io.list_names(io.join(root, "schema"))):
        raise TableAlreadyExistsError(io.uri(root))
    try:
        if io.supports_exclusive_create:
            io.create_exclusive(path, schema.to_bytes())
        else:
            io.write_unsafe(path, schema.to_bytes())
    except FileExistsError as exc:
        raise TableAlreadyExistsError(io.uri(root)) from exc
    return Table.open(uri, storage_options)
