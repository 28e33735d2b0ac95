"""The field aggregators of the aggregation merge engine, folded over many keys at once.

Java folds one key's records field by field (``AggregateMergeFunction#add``): a record of kind +I/+U calls
``FieldAggregator#agg(accumulator, input)``, a -U/-D calls ``retract`` (which throws "does not support
retraction" unless the function implements it or ``fields.<f>.ignore-retract`` wraps it in
``FieldIgnoreRetractAgg``, whose retract keeps the accumulator), and with
``aggregation.remove-record-on-delete`` a -D replaces the whole row by its own values (``initRow``, NOT NULL
fields checked). The rules per function (``compact/aggregate/Field*Agg.java``):

* ``sum`` (``FieldSumAgg``): nulls skipped; retract subtracts, and from a null accumulator gives the negated
  input; integer overflow throws (``Math.addExact``); floats add in their own width.
* ``product`` (``FieldProductAgg``): nulls skipped; retract divides (Java integer division, truncating) unless
  either side is null; overflow and division by zero throw.
* ``max``/``min`` (``FieldMaxAgg``/``FieldMinAgg``): nulls skipped, ``InternalRowUtils.compare`` order.
* ``last_value`` (``FieldLastValueAgg``): the input, null included; retract gives null.
* ``last_non_null_value`` (``FieldLastNonNullValueAgg``): the input unless null; retract of a non-null gives null.
* ``first_value``/``first_non_null_value``: the first (non-null) input of the key; a flag, reset per key only.
* ``bool_and``/``bool_or``: nulls skipped.
* ``listagg`` (``FieldListaggAgg``): blank inputs (Java ``Character.isWhitespace`` only) skipped, a blank
  accumulator replaced; ``distinct`` adds only tokens (split on the delimiter) not yet present.
* ``primary_key`` (``FieldPrimaryKeyAgg``): the input, on agg and retract.

Vectorization: the records of every key with several records are folded together, one record position per
round (round ``k`` folds the ``k``-th record of every key that has one) with numpy, so the Python work grows
with the longest run of one key (at most the number of input files, as a file holds a key once), not the row
count. Functions whose result is one of the inputs keep the input's position (later taken from the column, any
Arrow type); ``sum``/``product`` keep numpy values (int64 with exact overflow checks, BIGINT products through
Python ints, float32/float64 in their width). Without retractions or removals the ``last``/``first`` functions
are one ``reduceat`` each and a plain ``listagg`` one ``binary_join`` of each run's non-blank inputs. Per-record
Python remains only for DECIMAL ``sum`` and for ``listagg`` with ``distinct`` or with retractions/removals
(:func:`_fold_objects`, Python lists, only those fields).
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.paimon.arrow_types import arrow_type
from airflow_lakeformat.core.paimon.merge_tree.merge_order import order_view
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import FieldAggregate, MergeSpec

AGG, RETRACT, RESET = 0, 1, 2
_POSITIONAL = frozenset(
    {"last_value", "primary_key", "last_non_null_value", "first_value", "first_non_null_value", "max", "min"}
    | {"bool_and", "bool_or"}
)
_INT_RANGES = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
# Java's Character.isWhitespace (space separators except the no-break ones, and the ASCII controls it names).
_JAVA_WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680\u2028\u2029\u205f\u3000" + "".join(
    chr(c) for c in range(0x2000, 0x200B) if c != 0x2007
)
_JAVA_BLANK = "^[" + "".join(f"\\x{{{ord(ch):04x}}}" for ch in _JAVA_WHITESPACE) + "]*$"


@dataclass(frozen=True)
class Runs:
    """The keys with several records: sorted positions ``starts[g] .. starts[g] + sizes[g] - 1`` of a column
    already in merge order; ``events[p]`` is AGG, RETRACT or RESET for sorted position ``p``."""

    starts: np.ndarray
    sizes: np.ndarray
    events: np.ndarray
    key_of: Any  # callable: run index -> key description for messages

    def rounds(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(runs, positions)`` per round: the runs with a ``k``-th record and that record's position."""
        order = np.argsort(-self.sizes, kind="stable")
        descending = -self.sizes[order]
        for k in range(int(self.sizes.max(initial=0))):
            active = order[: int(np.searchsorted(descending, -k, side="left"))]
            yield active, self.starts[active] + k


def aggregate_field(column: pa.ChunkedArray, agg: FieldAggregate, runs: Runs, spec: MergeSpec) -> pa.Array:
    """The merged value of ``agg.field`` for each run of ``runs`` (``column`` in merge order)."""
    values = column.combine_chunks()
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    events = runs.events
    if not agg.retractable:
        _refuse_retractions(agg, runs, spec)
    if agg.function in _POSITIONAL:
        if agg.function in ("max", "min", "bool_and", "bool_or") or bool((events != AGG).any()):
            positions = _fold_positions(values, valid, agg, runs)
        else:
            positions = _last_or_first(valid, agg.function, runs)
        mask = positions < 0
        return values.take(pa.array(np.where(mask, 0, positions), mask=mask))
    quiet = not _run_has(runs, events != AGG).any()
    if agg.function == "listagg" and not agg.distinct and quiet:
        return _joined(values, valid, agg.delimiter, runs)
    if agg.function == "listagg" or agg.dtype.root == "DECIMAL":
        return pa.array(_fold_objects(values, agg, runs, spec), type=values.type)
    return _fold_numbers(values, valid, agg, runs, spec)


def _joined(values: pa.Array, valid: np.ndarray, delimiter: str, runs: Runs) -> pa.Array:
    """``listagg`` without distinct, retraction or removal: each run's non-blank inputs joined in order
    (a blank input is skipped, so the accumulator is never blank), null when there is none."""
    blank = np.asarray(
        pc.fill_null(pc.match_substring_regex(values, _JAVA_BLANK), True).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    keep = valid & ~blank
    counts = segment_reduce(np.add, keep.astype(np.int64), runs.starts, runs.starts + runs.sizes)
    in_runs = np.zeros(valid.size + 1, dtype=np.int64)
    np.add.at(in_runs, runs.starts, 1)
    np.add.at(in_runs, runs.starts + runs.sizes, -1)
    selected = np.flatnonzero(keep & (np.cumsum(in_runs[:-1]) > 0))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), values.take(pa.array(selected)))
    joined = pc.binary_join(lists, delimiter)
    return pc.if_else(pa.array(counts > 0), joined, pa.scalar(None, values.type))


def _refuse_retractions(agg: FieldAggregate, runs: Runs, spec: MergeSpec) -> None:
    hit = np.flatnonzero(_run_has(runs, runs.events == RETRACT))
    if hit.size:
        raise MaintenanceRefusedError(
            spec.where,
            f"aggregate function {agg.function!r} of field {agg.field!r} does not support retraction and key "
            f"{runs.key_of(int(hit[0]))} has a -U/-D record among several (Paimon fails the merge); set "
            f"'fields.{agg.field}.ignore-retract'='true' to ignore retractions",
        )


def _run_has(runs: Runs, flags: np.ndarray) -> np.ndarray:
    """Per run: any of its positions flagged."""
    return segment_reduce(np.logical_or, flags, runs.starts, runs.starts + runs.sizes)


def segment_reduce(ufunc: Any, values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``ufunc`` reduced over ``values[starts[g]:ends[g]]`` for each (non-empty, ordered) segment ``g``.

    Segments need not be adjacent: ``reduceat`` gets start/end pairs and every second result is kept.
    """
    if not starts.size:
        return np.zeros(0, dtype=values.dtype)
    padded = np.append(values, values[-1:])
    bounds = np.empty(2 * starts.size, dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    return np.asarray(ufunc.reduceat(padded, bounds)[0::2])


def _last_or_first(valid: np.ndarray, function: str, runs: Runs) -> np.ndarray:
    """Positions of the last/first (non-null) record of each run, -1 when none: no retraction, no removal."""
    ends = runs.starts + runs.sizes - 1
    if function in ("last_value", "primary_key"):
        return np.array(ends, dtype=np.int64)
    if function == "first_value":
        return np.array(runs.starts, dtype=np.int64)
    position = np.arange(valid.size, dtype=np.int64)
    if function == "last_non_null_value":
        return segment_reduce(np.maximum, np.where(valid, position, -1), runs.starts, ends + 1)
    best = segment_reduce(np.minimum, np.where(valid, position, valid.size), runs.starts, ends + 1)
    return np.where(best >= valid.size, -1, best).astype(np.int64)


def _fold_positions(values: pa.Array, valid: np.ndarray, agg: FieldAggregate, runs: Runs) -> np.ndarray:
    """Fold functions whose result is one of the inputs, keeping the input's position (-1: null)."""
    function = agg.function
    acc = np.full(runs.starts.size, -1, dtype=np.int64)
    started = np.zeros(runs.starts.size, dtype=bool)  # first_value's ``initialized``
    rank = _ranks(values) if function in ("max", "min") else None
    truth = _truths(values) if function in ("bool_and", "bool_or") else None
    for active, rows in runs.rounds():
        event, ok, current = runs.events[rows], valid[rows], acc[active]
        safe = np.maximum(current, 0)
        has = (current >= 0) & valid[safe]  # the accumulator is a non-null value (a position may hold a null)
        if function in ("last_value", "primary_key"):
            take = np.ones(rows.size, dtype=bool)
        elif function == "last_non_null_value":
            take = ok
        elif function in ("first_value", "first_non_null_value"):
            take = ~started[active] & (ok if function == "first_non_null_value" else True)
            started[active] |= take & (event == AGG)
        elif rank is not None:
            later = rank[rows] > rank[safe] if function == "max" else ~(rank[safe] < rank[rows])
            take = ok & (~has | later)
        else:
            assert truth is not None
            keep = truth[safe] if function == "bool_or" else ~truth[safe]
            take = ok & (~has | ~keep)
        updated = np.where(take, rows, current)
        retracted = _retract_positions(function, agg.ignore_retract, rows, ok, current)
        acc[active] = np.where(event == AGG, updated, np.where(event == RESET, rows, retracted))
    return acc


def _retract_positions(
    function: str, ignore: bool, rows: np.ndarray, ok: np.ndarray, current: np.ndarray
) -> Any:
    if ignore:
        return current
    if function == "primary_key":
        return rows
    if function == "last_value":
        return np.full(rows.size, -1, dtype=np.int64)
    if function == "last_non_null_value":
        return np.where(ok, -1, current)
    return current  # refused earlier for functions without retract


def _ranks(values: pa.Array) -> np.ndarray:
    """Dense ranks of the values in Java's order (``InternalRowUtils.compare``)."""
    view = order_view(values, "-", "-")
    ranks = pc.rank(view, sort_keys="ascending", tiebreaker="dense")
    return np.asarray(ranks.to_numpy(zero_copy_only=False), dtype=np.int64)


def _truths(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _fold_numbers(
    values: pa.Array, valid: np.ndarray, agg: FieldAggregate, runs: Runs, spec: MergeSpec
) -> pa.Array:
    """``sum``/``product`` of integers and floats: numpy values, exact Java overflow and division rules."""
    root = agg.dtype.root
    floating = root in ("FLOAT", "DOUBLE")
    dtype = (np.float32 if root == "FLOAT" else np.float64) if floating else np.int64
    numbers = np.asarray(pc.fill_null(values, 0).to_numpy(zero_copy_only=False)).astype(dtype)
    acc = np.zeros(runs.starts.size, dtype=dtype)
    has = np.zeros(runs.starts.size, dtype=bool)
    arith = _Arith(agg, root, runs, spec)
    for active, rows in runs.rounds():
        event, ok, x = runs.events[rows], valid[rows], numbers[rows]
        a, a_ok = acc[active], has[active]
        both = a_ok & ok
        if agg.function == "sum":
            combined = arith.run(active, both, np.add, a, x)
            new, new_ok = np.where(both, combined, np.where(a_ok, a, x)), a_ok | ok
            back = arith.run(active, both, np.subtract, a, x)
            negated = arith.negate(active, ~a_ok & ok, x)
            r_val, r_ok = np.where(both, back, np.where(a_ok, a, negated)), a_ok | ok
        else:
            combined = arith.run(active, both, np.multiply, a, x)
            new, new_ok = np.where(both, combined, np.where(a_ok, a, x)), a_ok | ok
            r_val, r_ok = np.where(both, arith.divide(active, both, a, x), a), a_ok
        if agg.ignore_retract:
            r_val, r_ok = a, a_ok
        reset = event == RESET
        acc[active] = np.where(event == AGG, new, np.where(reset, x, r_val))
        has[active] = np.where(event == AGG, new_ok, np.where(reset, ok, r_ok))
    out = pa.array(acc, mask=~has)
    return out.cast(values.type) if not floating else out


class _Arith:
    """Integer arithmetic as Java's ``Math.*Exact`` does it (throws on overflow) for one field's width."""

    def __init__(self, agg: FieldAggregate, root: str, runs: Runs, spec: MergeSpec) -> None:
        self.agg, self.runs, self.spec = agg, runs, spec
        self.bits = _INT_RANGES.get(root)

    def _fail(self, active: np.ndarray, bad: np.ndarray, what: str) -> None:
        run = int(active[np.flatnonzero(bad)[0]])
        raise MaintenanceRefusedError(
            self.spec.where,
            f"{what} in {self.agg.function!r} of field {self.agg.field!r} ({self.agg.dtype.sql()}) for key "
            f"{self.runs.key_of(run)}; Paimon fails the merge (ArithmeticException)",
        )

    def run(self, active: np.ndarray, where: np.ndarray, op: Any, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if self.bits is None:
                return np.asarray(op(a, b))
            if self.bits < 64:
                out = np.asarray(op(a, b))
                low, high = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
                bad = where & ((out < low) | (out > high))
            elif op is np.multiply:
                exact = op(a.astype(object), b.astype(object))
                bad = where & ((exact < -(2**63)) | (exact > 2**63 - 1))
                out = np.where(bad, 0, exact).astype(np.int64)
            else:
                out = np.asarray(op(a, b))
                flip = b if op is np.add else ~b
                bad = where & (((a ^ out) & (flip ^ out)) < 0)
        if bad.any():
            self._fail(active, bad, "integer overflow")
        return out

    def negate(self, active: np.ndarray, where: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``-x`` (``FieldSumAgg#negative``): -0.0 for a float 0.0, overflow for the integer minimum."""
        if self.bits is None:
            return np.asarray(np.negative(x))
        return self.run(active, where, np.subtract, np.zeros_like(x), x)

    def divide(self, active: np.ndarray, where: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            if self.bits is None:
                return np.asarray(a / b)
            zero = where & (b == 0)
            if zero.any():
                self._fail(active, zero, "division by zero")
            safe = np.where(b == 0, 1, b)
            if self.bits == 64:
                overflow = where & (a == np.iinfo(np.int64).min) & (safe == -1)
                if overflow.any():
                    self._fail(active, overflow, "integer overflow")
                safe = np.where(overflow, 1, safe)
            quotient = np.abs(a) // np.abs(safe) * np.where((a < 0) != (safe < 0), -1, 1)
            if self.bits < 64:
                high = 2 ** (self.bits - 1) - 1
                if (where & (quotient > high)).any():
                    self._fail(active, where & (quotient > high), "integer overflow")
            return np.asarray(quotient)


def _fold_objects(values: pa.Array, agg: FieldAggregate, runs: Runs, spec: MergeSpec) -> list[Any]:
    """DECIMAL ``sum`` and ``listagg``: Python values, one record at a time (Python lists, run by run)."""
    objects = values.to_pylist()  # None where null
    events = runs.events.tolist()
    step = _listagg_step(agg) if agg.function == "listagg" else _decimal_step(agg, runs, spec)
    out: list[Any] = []
    with decimal.localcontext() as context:
        context.prec = 200
        for run, (start, size) in enumerate(zip(runs.starts.tolist(), runs.sizes.tolist(), strict=True)):
            current = None
            for position in range(start, start + size):
                value, event = objects[position], events[position]
                if event == RESET:
                    current = value
                elif event == RETRACT:
                    current = current if agg.ignore_retract else step(run, current, value, True)
                else:
                    current = step(run, current, value, False)
            out.append(current)
    return out


def _decimal_step(agg: FieldAggregate, runs: Runs, spec: MergeSpec) -> Any:
    precision, scale = agg.dtype.precision or 10, agg.dtype.scale or 0
    limit = decimal.Decimal(10) ** (precision - scale)

    def step(run: int, acc: Any, value: Any, retract: bool) -> Any:
        if acc is None or value is None:
            if retract:
                return -value if acc is None and value is not None else acc
            return value if acc is None else acc
        result = acc - value if retract else acc + value
        if abs(result) >= limit:
            raise MaintenanceRefusedError(
                spec.where,
                f"sum of field {agg.field!r} exceeds {agg.dtype.sql()} for key {runs.key_of(run)} (Java gives "
                "null or an out-of-range value depending on the precision)",
            )
        return result

    return step


def _listagg_step(agg: FieldAggregate) -> Any:
    delimiter = agg.delimiter
    separator = delimiter or " "  # BinaryStringUtils splits on whitespace when the delimiter is empty

    def blank(text: str) -> bool:
        return not text.strip(_JAVA_WHITESPACE)

    def step(run: int, acc: Any, value: Any, retract: bool) -> Any:
        if value is None or blank(value):
            return acc
        if acc is None or blank(acc):
            return value
        if not agg.distinct:
            return acc + delimiter + value
        seen = set(acc.split(separator))
        parts = [acc]
        for token in value.split(separator):
            if blank(token) or token in seen:
                continue
            seen.add(token)
            parts.append(token)
        return delimiter.join(parts)

    return step


def field_arrow_type(agg: FieldAggregate) -> pa.DataType:
    """The Arrow type of an aggregated field (as the KV table holds it)."""
    return arrow_type(agg.dtype)
