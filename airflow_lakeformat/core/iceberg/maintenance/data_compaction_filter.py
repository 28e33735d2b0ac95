"""The partition filter of an Iceberg data compaction: ``where`` selects files by their partition values.

Java's ``rewrite_data_files(where => ...)`` turns the predicate into an Iceberg expression and scans with it: a
file is selected when the predicate may hold for some row of it, and it is then rewritten with **all** its rows.
Here the predicate is parsed with pyiceberg's expression parser (``cat = 'a'``, ``ts >= '2024-01-01T00:00:00'``,
``id IN (1, 2)``, ``AND``/``OR``/``NOT``), bound to the current schema case-insensitively (Spark's default),
projected inclusively onto each partition spec (``inclusive_projection``: a predicate on ``ts`` reaches a
``days(ts)`` partition) and evaluated on each file's partition tuple. A predicate on a column that is not a
partition source projects to "always true" for that spec: every file of it is selected, which rewrites more
than Java would (Java also prunes by column bounds) but never changes a row.

Example:
    >>> keep = partition_filter(table.metadata, "cat = 'a'")  # doctest: +SKIP
    >>> keep(0, ("a",)), keep(0, ("b",))  # doctest: +SKIP
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import UsageError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata


def partition_filter(metadata: TableMetadata, where: str) -> Callable[[int, tuple[Any, ...]], bool]:
    """A function ``(spec_id, partition tuple) -> whether the predicate may hold for the partition``.

    Args:
        metadata: the table metadata (current schema, every spec).
        where: the predicate, in Iceberg's expression syntax.

    Raises:
        UsageError: the predicate does not parse or names no column of the current schema.
    """
    from pyiceberg.expressions.parser import parse
    from pyiceberg.expressions.visitors import bind, expression_evaluator, inclusive_projection
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record

    schema = metadata.schema()
    from pyparsing import ParseException

    try:
        expression = parse(where)
    except ParseException as exc:
        raise UsageError(
            f"where {where!r}: not a predicate Iceberg can parse (column {exc.col}); e.g. \"cat = 'a'\", "
            '"ts >= \'2024-01-01T00:00:00\'", "id IN (1, 2)"'
        ) from None
    try:
        bind(schema, expression, case_sensitive=False)
    except ValueError as exc:  # an unknown column, or a literal of the wrong type
        raise UsageError(f"where {where!r}: {str(exc).splitlines()[0]}") from None
    evaluators: dict[int, Callable[[Record], bool]] = {}

    def evaluator(spec_id: int) -> Callable[[Record], bool]:
        if spec_id not in evaluators:
            spec = metadata.specs()[spec_id]
            try:
                partition_type = spec.partition_type(schema)
            except (ValueError, KeyError):  # a spec on a since-dropped column: keep its files (inclusive)
                evaluators[spec_id] = lambda _record: True
                return evaluators[spec_id]
            projected = inclusive_projection(schema, spec, False)(expression)
            evaluators[spec_id] = expression_evaluator(Schema(*partition_type.fields), projected, False)
        return evaluators[spec_id]

    return lambda spec_id, partition: bool(evaluator(spec_id)(Record(*partition)))
