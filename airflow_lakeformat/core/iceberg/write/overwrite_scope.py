"""What an Iceberg partition overwrite replaces: the new rows' partitions (dynamic) or a row filter (static).

:class:`OverwriteScope` answers, for a live file of any spec, whether the overwrite removes it (``True``),
keeps it (``False``) or cannot tell from its partition alone (``None``, a filter on non-partition columns),
and then from its column metrics. Both scopes compare partition VALUES, never paths:

* dynamic: ``(spec id, partition tuple)`` in the set of the new rows' partitions of the current spec, the
  tuples normalised (:func:`partition_key`: a date as days, a timestamp as microseconds, a UUID as bytes) so
  that a value read from a manifest by either decoder equals the one computed from the rows;
* filter: pyiceberg's strict projection of the filter onto the file's spec decides "all rows match", its
  inclusive projection "no row matches" (Java's ``ManifestFilterManager`` with ``StrictMetricsEvaluator`` and
  ``InclusiveMetricsEvaluator`` for the rest, here pyiceberg's ports of both).

A filter is Iceberg's expression syntax (``cat = 'a'``, ``ts >= '2024-01-01T00:00:00' AND ts <
'2024-01-02T00:00:00'``, ``cat IS NULL``), bound to the current schema case-insensitively (Spark's default);
``*`` is the whole table; a ``k=v`` partition spec of the CLI becomes ``k = 'v' AND ...`` (``k IS NULL`` for a
null value).

Example:
    >>> scope = OverwriteScope.from_filter(table.metadata, "cat = 'a'")  # doctest: +SKIP
    >>> scope.partition_verdict(0, ("a",)), scope.partition_verdict(0, ("b",))  # doctest: +SKIP
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.errors import RegisterError, UsageError
from airflow_lakeformat.core.iceberg.write.partitioned import manifest_value

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata


def partition_key(values: Iterable[Any]) -> tuple[Any, ...]:
    """A partition tuple in one comparable form, whichever decoder read it (module docstring)."""
    return tuple(manifest_value(v) for v in values)


def parse_filter(metadata: TableMetadata, text: str) -> BooleanExpression:
    """``text`` as an expression bound-checked against the current schema (``*``: always true).

    Raises:
        UsageError: it does not parse, or names a column the schema lacks, or a literal of the wrong type.
    """
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.parser import parse
    from pyiceberg.expressions.visitors import bind
    from pyparsing import ParseException

    if text.strip() == "*":
        return AlwaysTrue()
    try:
        expression = parse(text)
    except ParseException as exc:
        raise UsageError(
            f"overwrite filter {text!r}: not a predicate Iceberg can parse (column {exc.col}); e.g. \"cat = 'a'\", "
            "\"ts >= '2024-01-01T00:00:00' AND ts < '2024-01-02T00:00:00'\", \"cat IS NULL\""
        ) from None
    try:
        bind(metadata.schema(), expression, case_sensitive=False)
    except ValueError as exc:
        raise UsageError(f"overwrite filter {text!r}: {str(exc).splitlines()[0]}") from None
    return expression


def filter_from_values(values: Mapping[str, str | None]) -> str:
    """A ``k=v`` partition spec (the CLI's ``--overwrite k=v``) as filter text: ``k = 'v' AND k2 IS NULL``."""
    if not values:
        return "*"
    parts = []
    for name, value in values.items():
        column = '"' + name.replace('"', '""') + '"'
        quoted = "'" + value.replace("'", "''") + "'" if value is not None else None
        parts.append(f"{column} IS NULL" if quoted is None else f"{column} = {quoted}")
    return " AND ".join(parts)


@dataclass
class OverwriteScope:
    """A dynamic or filter scope (module docstring); build it with :meth:`dynamic` or :meth:`from_filter`."""

    metadata: TableMetadata
    filter_text: str | None = None
    expression: BooleanExpression | None = None
    spec_id: int = 0
    partitions: frozenset[tuple[Any, ...]] = frozenset()
    whole_table: bool = False
    _evaluators: dict[int, tuple[Callable[[Any], bool], Callable[[Any], bool]] | None] = field(
        default_factory=dict
    )

    @classmethod
    def dynamic(cls, metadata: TableMetadata, partitions: Iterable[tuple[Any, ...]]) -> OverwriteScope:
        """The partitions of the current spec the new rows fall into (all of the table if unpartitioned)."""
        spec = metadata.spec()
        keys = frozenset(partition_key(p) for p in partitions)
        return cls(metadata, spec_id=spec.spec_id, partitions=keys, whole_table=not spec.fields)

    @classmethod
    def from_filter(cls, metadata: TableMetadata, text: str) -> OverwriteScope:
        """The rows ``text`` selects (:func:`parse_filter`)."""
        return cls(metadata, filter_text=text, expression=parse_filter(metadata, text))

    @property
    def mode(self) -> str:
        return "dynamic" if self.expression is None else "filter"

    def describe(self) -> str:
        """The scope in words, for messages."""
        if self.expression is None:
            return (
                "the whole table" if self.whole_table else f"{len(self.partitions)} partition(s) of the input"
            )
        return f"filter {self.filter_text}"

    def _partition_evaluators(
        self, spec_id: int
    ) -> tuple[Callable[[Any], bool], Callable[[Any], bool]] | None:
        """(strict, inclusive) evaluators of the filter's projections onto spec ``spec_id``'s partition."""
        from pyiceberg.expressions.visitors import (
            expression_evaluator,
            inclusive_projection,
            strict_projection,
        )
        from pyiceberg.schema import Schema

        if spec_id not in self._evaluators:
            schema, spec = self.metadata.schema(), self.metadata.specs().get(spec_id)
            try:
                if spec is None or self.expression is None:
                    raise ValueError(spec_id)
                struct = Schema(*spec.partition_type(schema).fields)
                strict = strict_projection(schema, spec, False)(self.expression)
                inclusive = inclusive_projection(schema, spec, False)(self.expression)
                self._evaluators[spec_id] = (
                    expression_evaluator(struct, strict, False),
                    expression_evaluator(struct, inclusive, False),
                )
            except (ValueError, KeyError):  # a spec on a since-dropped column: decide by metrics
                self._evaluators[spec_id] = None
        return self._evaluators[spec_id]

    def partition_verdict(self, spec_id: int, partition: tuple[Any, ...]) -> bool | None:
        """Remove (True), keep (False) or undecided (None) by the file's partition alone."""
        from pyiceberg.typedef import Record

        if self.expression is None:
            if self.whole_table:
                return True
            return spec_id == self.spec_id and partition_key(partition) in self.partitions
        evaluators = self._partition_evaluators(spec_id)
        if evaluators is None:
            return None
        record = Record(*partition_key(partition))
        if evaluators[0](record):
            return True
        return None if evaluators[1](record) else False

    def metrics_verdict(self, data_file: DataFile) -> bool | None:
        """For a file :meth:`partition_verdict` left undecided: by its column metrics (Java's evaluators)."""
        from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, _StrictMetricsEvaluator

        if self.expression is None:
            return False
        schema = self.metadata.schema()
        if _StrictMetricsEvaluator(schema, self.expression, False).eval(data_file):
            return True
        return None if _InclusiveMetricsEvaluator(schema, self.expression, False).eval(data_file) else False

    def may_touch(self, spec_id: int, partition: tuple[Any, ...]) -> bool:
        """Whether a file of this partition may hold rows the overwrite replaces (the conflict check)."""
        return self.partition_verdict(spec_id, partition) is not False

    def check_rows(self, data: pa.Table, source: str) -> None:
        """Every input row must satisfy a filter (Java's ``validateAddedFilesMatchOverwriteFilter``).

        Raises:
            RegisterError: a row outside the filter (its number, counted from 1, and how many); nothing written.
        """
        import pyarrow as pa
        from pyiceberg.expressions.visitors import bind
        from pyiceberg.io.pyarrow import expression_to_pyarrow

        if self.expression is None or data.num_rows == 0:
            return
        bound = bind(self.metadata.schema(), self.expression, case_sensitive=False)
        numbered = data.append_column("__lakeformat_row__", pa.array(range(data.num_rows), pa.int64()))
        inside = numbered.filter(expression_to_pyarrow(bound)).column("__lakeformat_row__").to_pylist()
        if len(inside) == data.num_rows:
            return
        kept = set(inside)
        first = next(i for i in range(data.num_rows) if i not in kept)
        raise RegisterError(
            source,
            f"row {first + 1}: outside the overwrite filter {self.filter_text!r} ({data.num_rows - len(inside)} of "
            f"{data.num_rows} rows); an overwrite writes only rows its filter selects (Spark refuses them too); "
            "nothing was written",
        )
