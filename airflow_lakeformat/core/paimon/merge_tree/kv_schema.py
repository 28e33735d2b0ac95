"""The physical layout of a primary-key data file: the KV table (Java's ``KeyValue#createKeyValueFields``).

Every data file of a primary-key table holds, in this order:

1. one ``_KEY_<name>`` column per *trimmed* primary key (the primary key minus the partition keys), in
   primary-key order, with Parquet field id ``1073741823 + <field id>`` (``SpecialFields.KEY_FIELD_ID_START``);
2. ``_SEQUENCE_NUMBER`` BIGINT NOT NULL (field id ``2147483646``);
3. ``_VALUE_KIND`` TINYINT NOT NULL (field id ``2147483645``), the RowKind byte;
4. every table field in schema order (partition and key fields included), with its own field id.

In thin mode (``data-file.thin-mode``) the ``_KEY_*`` columns are left out of the file and readers
derive them from the value columns; in memory a KV table always has them.
"""

from __future__ import annotations

import pyarrow as pa

from airflow_lakeformat.core.paimon.arrow_types import arrow_type
from airflow_lakeformat.core.paimon.schema import TableSchema

KEY_PREFIX = "_KEY_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"

# RowKind bytes (``org.apache.paimon.types.RowKind``).
INSERT = 0
UPDATE_BEFORE = 1
UPDATE_AFTER = 2
DELETE = 3
# Kinds that retract a row (``RowKind#isRetract``): counted in ``_DELETE_ROW_COUNT``.
RETRACT_KINDS = (UPDATE_BEFORE, DELETE)

# ``SpecialFields``: key field ids are offset by Integer.MAX_VALUE / 2; the system fields count down from MAX - 1.
KEY_FIELD_ID_START = (2**31 - 1) // 2
SEQUENCE_NUMBER_FIELD_ID = 2**31 - 2
VALUE_KIND_FIELD_ID = 2**31 - 3

_FIELD_ID = b"PARQUET:field_id"


def key_column(name: str) -> str:
    """The KV column of a trimmed primary-key field: ``_KEY_<name>``."""
    return KEY_PREFIX + name


def key_columns(schema: TableSchema) -> list[str]:
    """The ``_KEY_*`` column names of the schema's trimmed primary keys, in primary-key order."""
    return [key_column(name) for name in schema.trimmed_primary_keys]


def _field(name: str, dtype: pa.DataType, nullable: bool, field_id: int) -> pa.Field:
    return pa.field(name, dtype, nullable, metadata={_FIELD_ID: str(field_id).encode()})


def kv_arrow_schema(schema: TableSchema, *, thin: bool = False) -> pa.Schema:
    """The KV table layout of ``schema``, with Java's Parquet field ids; ``thin`` leaves out the ``_KEY_*`` columns.

    Args:
        schema: the table's (current) schema; it must have a primary key.
        thin: the layout of a thin-mode file (no ``_KEY_*`` columns).

    Example::

        >>> kv_arrow_schema(table.schema).names
        ['_KEY_pk', '_SEQUENCE_NUMBER', '_VALUE_KIND', 'dt', 'pk', 'v']
    """
    fields: list[pa.Field] = []
    if not thin:
        for name in schema.trimmed_primary_keys:
            f = schema.field(name)
            fields.append(
                _field(key_column(name), arrow_type(f.type), f.type.nullable, KEY_FIELD_ID_START + f.id)
            )
    fields.append(_field(SEQUENCE_NUMBER, pa.int64(), False, SEQUENCE_NUMBER_FIELD_ID))
    fields.append(_field(VALUE_KIND, pa.int8(), False, VALUE_KIND_FIELD_ID))
    for f in schema.fields:
        fields.append(_field(f.name, arrow_type(f.type), f.type.nullable, f.id))
    return pa.schema(fields)
