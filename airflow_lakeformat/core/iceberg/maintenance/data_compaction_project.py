"""Reusing pyiceberg's schema conversions across the files and batches of one compaction group.

A group of small files reads, say, 100 files of one Arrow schema. For each file the rewrite converts the file's
Arrow schema to an Iceberg schema and prunes it (``pyarrow_to_schema`` + ``prune_columns``), and for each batch it
projects the batch onto the table's schema twice (``_to_requested_schema``: once when reading, once with field ids
for the Parquet writer): pyiceberg's schema visitors, about 1 ms of Python per small file, as much as reading it.
Those conversions depend on the schemas only, so :class:`GroupProjection` does each once per distinct schema:

1. **File schemas** (:meth:`GroupProjection.file_schemas`): keyed by the file's Arrow schema *with* its metadata
   (the field ids live there), serialized; the table's schema id and format version are fixed for a group.
2. **Batch projections** (:meth:`GroupProjection.project`): the first batch of each distinct Arrow schema goes
   through pyiceberg's ``_to_requested_schema``. When the result is the same columns relabelled (as many columns,
   column ``i`` read from the input's column ``i`` by pyiceberg's name lookup, of exactly the same type, no nested
   type, and the input's arrays under the result's schema equal the result, metadata included), that schema is kept and later batches
   of the same input schema are relabelled (``RecordBatch.from_arrays``) without the visitors. Anything else
   (a cast, a promoted or added column, a timestamp downcast, a nested column, constant partition values) keeps
   pyiceberg's projection for every batch. A batch with a null in a column the result declares required also goes
   through pyiceberg, so whatever pyiceberg does with it (keep or refuse) is unchanged.

The projections depend on no value of a batch except those null counts, so a relabelled batch is exactly what
pyiceberg would return for it.

Example:
    >>> projection = GroupProjection()  # doctest: +SKIP
    >>> out = projection.project(batch, table_schema, file_schema, lambda b: _to_requested_schema(...))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import TableVersion

Convert = Callable[[pa.RecordBatch], pa.RecordBatch]


class GroupProjection:
    """Schema conversions of one group, each done once per distinct Arrow schema (module docstring)."""

    def __init__(self) -> None:
        self._file_schemas: dict[bytes, tuple[Schema, Schema] | None] = {}
        self._relabel: dict[tuple[str, bytes], pa.Schema | None] = {}

    def file_schemas(
        self, arrow_schema: pa.Schema, table_schema: Schema, format_version: TableVersion
    ) -> tuple[Schema, Schema] | None:
        """``(file schema, file schema pruned to the table's field ids)`` of a Parquet file's Arrow schema, or
        None when the file carries no field ids (pyiceberg's ``pyarrow_to_schema`` refuses it).

        Args:
            arrow_schema: the file's ``schema_arrow`` (field ids in its field metadata).
            table_schema: the table's current schema.
            format_version: the table's format version (v1/v2 downcast nanosecond timestamps).
        """
        from pyiceberg.io.pyarrow import pyarrow_to_schema
        from pyiceberg.schema import prune_columns

        key = arrow_schema.serialize().to_pybytes()
        if key not in self._file_schemas:
            try:
                file_schema = pyarrow_to_schema(
                    arrow_schema,
                    downcast_ns_timestamp_to_us=format_version <= 2,
                    format_version=format_version,
                )
            except ValueError:  # no field ids
                self._file_schemas[key] = None
            else:
                projected = prune_columns(file_schema, set(table_schema.field_ids), select_full_types=False)
                self._file_schemas[key] = (file_schema, projected)
        return self._file_schemas[key]

    def project(
        self, kind: str, batch: pa.RecordBatch, requested: Schema, file_schema: Schema, convert: Convert
    ) -> pa.RecordBatch:
        """``convert(batch)`` (pyiceberg's projection of ``batch`` read with ``file_schema`` onto ``requested``),
        relabelled instead when the first batch of this schema showed that is all it does.

        Args:
            kind: which projection (``convert`` is the same function for every call of one kind).
            batch: the batch.
            requested: the schema projected onto.
            file_schema: the schema ``batch`` was read with (pyiceberg finds each column by its name there).
            convert: pyiceberg's projection.
        """
        key = (kind, batch.schema.serialize().to_pybytes())
        if key not in self._relabel:
            converted = convert(batch)
            self._relabel[key] = _relabelled_schema(batch, converted, requested, file_schema)
            return converted
        schema = self._relabel[key]
        if schema is None or any(not f.nullable and batch.column(i).null_count for i, f in enumerate(schema)):
            return convert(batch)
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def _relabelled_schema(
    batch: pa.RecordBatch, converted: pa.RecordBatch, requested: Schema, file_schema: Schema
) -> pa.Schema | None:
    """``converted``'s schema when ``converted`` is ``batch``'s columns in order under it, else None."""
    if batch.num_columns != converted.num_columns or batch.num_columns != len(requested.columns):
        return None
    if any(pa.types.is_nested(f.type) for f in converted.schema):
        return None
    # the same types exactly: ``RecordBatch.from_arrays`` would cast an int column to a long schema on its own
    if any(f.type != g.type for f, g in zip(batch.schema, converted.schema, strict=True)):
        return None
    names = []
    for column in requested.columns:
        try:
            names.append(file_schema.find_field(column.field_id).name)
        except ValueError:  # not in the file: pyiceberg filled it in
            return None
    if names != batch.schema.names:
        return None
    try:
        relabelled = pa.RecordBatch.from_arrays(batch.columns, schema=converted.schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return converted.schema if relabelled.equals(converted, check_metadata=True) else None
