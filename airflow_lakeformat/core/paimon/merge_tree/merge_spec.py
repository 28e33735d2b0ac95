"""What one primary key's records merge into: the table's merge engine and its options, read once.

:meth:`MergeSpec.from_schema` reads the options Java's merge functions read (``PrimaryKeyTableUtils
#createMergeFunctionFactory`` and the factories of ``DeduplicateMergeFunction``, ``FirstRowMergeFunction``,
``PartialUpdateMergeFunction``, ``AggregateMergeFunction``, ``FieldAggregatorFactory``; option keys and
defaults of ``CoreOptions``) and refuses, with a :class:`MaintenanceRefusedError` naming the option and its
value, everything :func:`~airflow_lakeformat.core.paimon.merge_tree.merge_engines.merge_kv` does not
implement, and the combinations Java itself rejects. Refused: ``sequence.snapshot-ordering``, partial-update
sequence groups (``fields.<f>.sequence-group``) and ``partial-update.remove-record-on-sequence-group``,
partial-update aggregate functions (Java requires sequence groups for them), the aggregate functions
``collect``, ``merge_map``, ``merge_map_with_keytime``, ``nested_update``, ``nested_partial_update``,
``theta_sketch``, ``hll_sketch``, ``rbm32``, ``rbm64`` (and any unknown name), ``product`` of DECIMAL, and
sort keys of nested types, ``force-lookup`` (Java then compacts through ``LookupMergeTreeCompactRewriter``,
which merges the values of higher levels into lower-level output; first-row tables always compact so, and
``merge_kv`` applies the first-row function to every key as that rewriter does).

The aggregate function of a field (``AggregateMergeFunction#getAggFuncName``), first match wins: a
sequence field uses ``last_value``, a primary-key field ``primary_key``, then ``fields.<f>.aggregate-function``,
``fields.default-aggregate-function``, ``last_non_null_value``.

Example:
    >>> spec = MergeSpec.from_schema(table.schema, table.uri)  # doctest: +SKIP
    >>> spec.engine, spec.sequence_fields  # doctest: +SKIP
    ('deduplicate', ())
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import key_columns
from airflow_lakeformat.core.paimon.schema import TableSchema
from airflow_lakeformat.core.paimon.types import ATOMIC_ROOTS, INTEGER_ROOTS, DataType

ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
IMPLEMENTED_FUNCTIONS = frozenset(
    {
        "sum",
        "product",
        "max",
        "min",
        "last_value",
        "last_non_null_value",
        "first_value",
        "first_non_null_value",
        "bool_and",
        "bool_or",
        "listagg",
        "primary_key",
    }
)
KNOWN_UNIMPLEMENTED_FUNCTIONS = frozenset(
    {
        "collect",
        "merge_map",
        "merge_map_with_keytime",
        "nested_update",
        "nested_partial_update",
        "theta_sketch",
        "hll_sketch",
        "rbm32",
        "rbm64",
    }
)
_ALIASES = {"first_not_null_value": "first_non_null_value"}  # FieldFirstNonNullValueAggLegacyFactory
# Functions whose FieldAggregator overrides retract(); the others throw unless fields.<f>.ignore-retract.
RETRACTABLE_FUNCTIONS = frozenset({"sum", "product", "last_value", "last_non_null_value", "primary_key"})
_NUMERIC_ROOTS = INTEGER_ROOTS | {"FLOAT", "DOUBLE", "DECIMAL"}
_UNORDERED_ROOTS = frozenset({"VARIANT", "BLOB"})
_IGNORE_DELETE_KEYS = (
    "ignore-delete",
    "first-row.ignore-delete",
    "deduplicate.ignore-delete",
    "partial-update.ignore-delete",
)


@dataclass(frozen=True)
class FieldAggregate:
    """The aggregate function of one value field (aggregation engine).

    ``delimiter`` and ``distinct`` are ``listagg``'s ``fields.<f>.list-agg-delimiter`` (default ``,``) and
    ``fields.<f>.distinct``; ``ignore_retract`` is ``fields.<f>.ignore-retract``.
    """

    field: str
    function: str
    dtype: DataType
    ignore_retract: bool = False
    delimiter: str = ","
    distinct: bool = False

    @property
    def retractable(self) -> bool:
        return self.ignore_retract or self.function in RETRACTABLE_FUNCTIONS


@dataclass(frozen=True)
class MergeSpec:
    """The merge of one key's records, as the table's options ask for it.

    ``sequence_fields`` order a key's records before ``_SEQUENCE_NUMBER`` (``sequence.field``), all of them
    descending when ``sequence_descending`` (``sequence.field.sort-order``). ``remove_record_on_delete`` is
    ``partial-update.remove-record-on-delete`` or ``aggregation.remove-record-on-delete`` (per engine).
    ``aggregates`` has one entry per table field, in schema order (aggregation engine only).
    ``ignore_update_before`` is read for completeness: Java applies it when writing (``RowKindFilter``), no merge
    function reads it, so neither does ``merge_kv``.
    """

    engine: str
    where: str
    key_columns: tuple[str, ...]
    fields: tuple[str, ...]
    not_null_fields: frozenset[str]
    sequence_fields: tuple[str, ...] = ()
    sequence_descending: bool = False
    ignore_delete: bool = False
    ignore_update_before: bool = False
    remove_record_on_delete: bool = False
    aggregates: tuple[FieldAggregate, ...] = ()

    @classmethod
    def from_schema(cls, schema: TableSchema, where: str) -> MergeSpec:
        """The merge spec of a primary-key table's current schema; refuses what merge_kv does not implement.

        Args:
            schema: the table's current schema (its ``options`` are read).
            where: the table (or bucket) named in error messages.

        Raises:
            MaintenanceRefusedError: an option (named, with its value) that is not implemented here, or a
                combination Java rejects.

        Example:
            >>> MergeSpec.from_schema(schema, "s3://b/t").engine  # doctest: +SKIP
            'deduplicate'
        """
        options = schema.options
        refuse = _Refuser(where)
        engine = options.get("merge-engine", "deduplicate").strip().lower()
        if engine not in ENGINES:
            refuse("merge-engine", engine, "is not a merge engine Paimon knows")
        if _bool(options, "sequence.snapshot-ordering", refuse):
            refuse("sequence.snapshot-ordering", "true", "(commit snapshot ids as sequence) is not supported")
        if engine != "first-row" and _bool(options, "force-lookup", refuse):
            refuse(
                "force-lookup", "true", "(compaction through lookup, which merges keys of higher levels in)"
            )
        sequence_fields = _sequence_fields(schema, engine, refuse)
        order = options.get("sequence.field.sort-order", "ascending").strip().lower()
        if order not in ("ascending", "descending"):
            refuse("sequence.field.sort-order", order, "must be ascending or descending")
        ignore_delete = _ignore_delete(options, refuse)
        remove_record_on_delete = False
        aggregates: tuple[FieldAggregate, ...] = ()
        if engine == "partial-update":
            remove_record_on_delete = _partial_update_options(schema, ignore_delete, refuse)
        elif engine == "aggregation":
            remove_record_on_delete = _bool(options, "aggregation.remove-record-on-delete", refuse)
            aggregates = _aggregates(schema, sequence_fields, remove_record_on_delete, refuse)
        return cls(
            engine=engine,
            where=where,
            key_columns=tuple(key_columns(schema)),
            fields=tuple(f.name for f in schema.fields),
            not_null_fields=frozenset(f.name for f in schema.fields if not f.type.nullable),
            sequence_fields=sequence_fields,
            sequence_descending=order == "descending",
            ignore_delete=ignore_delete,
            ignore_update_before=_bool(options, "ignore-update-before", refuse),
            remove_record_on_delete=remove_record_on_delete,
            aggregates=aggregates,
        )


class _Refuser:
    def __init__(self, where: str) -> None:
        self.where = where

    def __call__(self, option: str, value: str, problem: str) -> None:
        raise MaintenanceRefusedError(self.where, f"table option {option!r}={value!r} {problem}")


def _bool(options: Mapping[str, str], key: str, refuse: _Refuser, default: bool = False) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        refuse(key, raw, "is not a boolean")
    return value == "true"


def _ignore_delete(options: Mapping[str, str], refuse: _Refuser) -> bool:
    """``ignore-delete``, else its first fallback key that is set (``CoreOptions.IGNORE_DELETE``)."""
    for key in _IGNORE_DELETE_KEYS:
        if key in options:
            return _bool(options, key, refuse)
    return False


def _sequence_fields(schema: TableSchema, engine: str, refuse: _Refuser) -> tuple[str, ...]:
    raw = schema.options.get("sequence.field")
    if raw is None or not raw.strip():
        return ()
    names = tuple(name.strip() for name in raw.split(","))
    if engine == "first-row":
        refuse("sequence.field", raw, "is not allowed with merge-engine=first-row (Paimon rejects it)")
    known = {f.name: f.type for f in schema.fields}
    for name in names:
        if name not in known:
            refuse("sequence.field", raw, f"names {name!r}, which is not a field of the table")
        elif not _orderable(known[name]):
            refuse(
                "sequence.field",
                raw,
                f"names {name!r} of type {known[name].sql()}, which is not ordered here",
            )
    if len(set(names)) != len(names):
        refuse("sequence.field", raw, "names a field twice")
    return names


def _orderable(dtype: DataType) -> bool:
    return dtype.root in ATOMIC_ROOTS and dtype.root not in _UNORDERED_ROOTS


def _partial_update_options(schema: TableSchema, ignore_delete: bool, refuse: _Refuser) -> bool:
    """Partial-update without sequence groups: the options that matter, and what is refused."""
    options = schema.options
    for key, value in sorted(options.items()):
        if key.startswith("fields.") and key.endswith(".sequence-group"):
            refuse(key, value, "(partial-update sequence groups) is not supported")
    group_delete = options.get("partial-update.remove-record-on-sequence-group")
    if group_delete is not None:
        refuse("partial-update.remove-record-on-sequence-group", group_delete, "is not supported")
    keys = set(schema.primary_keys)
    for f in schema.fields:
        function = options.get(f"fields.{f.name}.aggregate-function")
        key = f"fields.{f.name}.aggregate-function"
        if function is None:
            function, key = (
                options.get("fields.default-aggregate-function"),
                "fields.default-aggregate-function",
            )
        if function is not None and f.name not in keys and function != "last_non_null_value":
            refuse(key, function, "needs a partial-update sequence group, which is not supported")
    remove = _bool(options, "partial-update.remove-record-on-delete", refuse)
    if remove and ignore_delete:
        refuse(
            "partial-update.remove-record-on-delete",
            "true",
            "conflicts with ignore-delete=true (Paimon rejects the combination)",
        )
    return remove


def _aggregates(
    schema: TableSchema, sequence_fields: tuple[str, ...], remove_on_delete: bool, refuse: _Refuser
) -> tuple[FieldAggregate, ...]:
    """One FieldAggregate per field, resolved and checked as ``FieldAggregatorFactory#create`` does."""
    options = schema.options
    out = []
    for f in schema.fields:
        key = f"fields.{f.name}.aggregate-function"
        if f.name in sequence_fields:
            function = "last_value"
        elif f.name in schema.primary_keys:
            function = "primary_key"
        elif key in options:
            function = options[key]
        elif "fields.default-aggregate-function" in options:
            key, function = "fields.default-aggregate-function", options["fields.default-aggregate-function"]
        else:
            function = "last_non_null_value"
        function = _ALIASES.get(function, function)
        _check_function(f.name, f.type, key, function, refuse)
        ignore_retract = _bool(options, f"fields.{f.name}.ignore-retract", refuse)
        if ignore_retract and remove_on_delete:
            refuse(
                f"fields.{f.name}.ignore-retract",
                "true",
                "conflicts with aggregation.remove-record-on-delete=true (Paimon rejects the combination)",
            )
        out.append(
            FieldAggregate(
                field=f.name,
                function=function,
                dtype=f.type,
                ignore_retract=ignore_retract,
                delimiter=options.get(f"fields.{f.name}.list-agg-delimiter", ","),
                distinct=_bool(options, f"fields.{f.name}.distinct", refuse),
            )
        )
    return tuple(out)


def _check_function(field: str, dtype: DataType, key: str, function: str, refuse: _Refuser) -> None:
    if function in KNOWN_UNIMPLEMENTED_FUNCTIONS:
        refuse(key, function, "is an aggregate function this compactor does not implement")
    if function not in IMPLEMENTED_FUNCTIONS:
        refuse(key, function, "is not an aggregate function Paimon knows")
    root = dtype.root
    if function in ("sum", "product") and root not in _NUMERIC_ROOTS:
        refuse(key, function, f"needs a numeric field; {field!r} is {dtype.sql()}")
    if function == "product" and root == "DECIMAL":
        refuse(key, function, f"of DECIMAL field {field!r} is not supported (BigDecimal division on retract)")
    if function in ("bool_and", "bool_or") and root != "BOOLEAN":
        refuse(key, function, f"needs a BOOLEAN field; {field!r} is {dtype.sql()}")
    if function == "listagg" and (root != "VARCHAR" or dtype.length != 2147483647):
        refuse(key, function, f"needs a STRING field; {field!r} is {dtype.sql()}")
    if function in ("max", "min") and not _orderable(dtype):
        refuse(key, function, f"needs a comparable field; {field!r} is {dtype.sql()}")
