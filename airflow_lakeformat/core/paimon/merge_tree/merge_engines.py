"""``merge_kv``: what a merge-tree compaction writes for one unit, as Java's merge functions give it.

Input: the KV tables of a unit's files concatenated (any order). Output: one row per key in Java's key order
(:mod:`.merge_order`), the row Java's ``MergeTreeCompactRewriter`` writes: records of one key go through
``ReducerMergeFunctionWrapper``, so a key with exactly ONE record is written unchanged (kind, sequence number,
values) and the merge function only sees keys with several records:

* ``deduplicate`` (``DeduplicateMergeFunction``): the last record, whatever its kind; with ``ignore-delete``
  retractions are skipped (no row when all are retractions).
* ``first-row`` (``FirstRowMergeFunction``): the first record. Java always compacts first-row tables with
  the lookup rewriter (``LookupMergeTreeCompactRewriter`` + ``FirstRowMergeFunctionWrapper``, no reducer), so
  here EVERY key, a lone record included, goes through the function: a retraction fails the merge unless
  ``ignore-delete``, which skips it (no row when nothing else is left). Only a full compaction is equal to
  Java's (a lower output level must also drop keys present above it, which the lookup does).
* ``partial-update`` (``PartialUpdateMergeFunction`` without sequence groups): each field's last non-null
  value, the key of the last record; the sequence number is the last record's (retractions skipped by
  ``ignore-delete`` leave it, 0 when none is left); a first record that is a retraction initialises the row with
  its values; with ``partial-update.remove-record-on-delete`` a -D replaces the row by its own values and a -U
  only moves the sequence number; otherwise a retraction fails the merge. The kind is DELETE when the last
  record was such a -D or no +I/+U was seen, else INSERT. NOT NULL fields must stay non-null.
* ``aggregation`` (``AggregateMergeFunction``, :mod:`.aggregators`): field by field; the last record's key and
  sequence number; kind DELETE only when ``aggregation.remove-record-on-delete`` and the last record is a -D.

``drop_deletes`` then removes -U/-D rows (``DropDeleteReader``). All of it is vectorized: one sort, then
``take`` of the chosen positions (deduplicate, first-row), ``reduceat`` per field (partial-update), and the
aggregators' folds; no per-row Python except the per-element folds of DECIMAL ``sum`` and ``listagg``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.paimon.merge_tree.aggregators import AGG, RESET, RETRACT, Runs, aggregate_field
from airflow_lakeformat.core.paimon.merge_tree.aggregators import segment_reduce as _reduce
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import DELETE, INSERT, SEQUENCE_NUMBER, VALUE_KIND
from airflow_lakeformat.core.paimon.merge_tree.merge_order import MergeOrder, describe_key, merge_order
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

_RETRACT_KINDS = np.array([False, True, False, True])  # RowKind byte -> isRetract


def merge_kv(kv: pa.Table, spec: MergeSpec, *, drop_deletes: bool) -> pa.Table:
    """Merge a unit's KV records into one row per key, sorted by key, as Java's compaction writes them.

    Args:
        kv: the concatenated KV tables of the unit's files (``kv_schema`` layout), in any order.
        spec: the table's merge spec (:meth:`MergeSpec.from_schema`).
        drop_deletes: remove rows of kind -U/-D from the result (output at the highest level).

    Returns:
        A KV table with ``kv``'s schema, one row per key, in Java's key order.

    Raises:
        AmbiguousSequenceError: two records share key, sequence fields and ``_SEQUENCE_NUMBER``.
        MaintenanceRefusedError: a record Java's merge function would fail on (a retraction first-row or
            partial-update cannot accept, a NOT NULL field left null, an aggregate overflow), naming the key.

    Example:
        >>> merged = merge_kv(pa.concat_tables(tables), MergeSpec.from_schema(schema, uri), drop_deletes=True)  # doctest: +SKIP
    """
    if kv.num_rows == 0:
        return kv
    order = merge_order(kv, spec)
    kinds = np.asarray(kv.column(VALUE_KIND).to_numpy(), dtype=np.int8)[order.indices]
    if spec.engine in ("deduplicate", "first-row"):
        rows = _pick(kv, spec, order, kinds)
        if drop_deletes:
            rows = rows[~_RETRACT_KINDS[kinds_at(kv, rows)]]
        return kv.take(pa.array(rows))
    merged = _merged_rows(kv, spec, order, kinds)
    if drop_deletes:
        merged = merged.filter(pc.invert(pc.is_in(merged.column(VALUE_KIND), pa.array([1, 3], pa.int8()))))
    return merged


def kinds_at(kv: pa.Table, rows: np.ndarray) -> np.ndarray:
    """The RowKind bytes of input rows ``rows``."""
    return np.asarray(kv.column(VALUE_KIND).take(pa.array(rows)).to_numpy(), dtype=np.int8)


def _pick(kv: pa.Table, spec: MergeSpec, order: MergeOrder, kinds: np.ndarray) -> np.ndarray:
    """Input rows kept by deduplicate (last) or first-row (first), one per key at most, in key order."""
    first = spec.engine == "first-row"
    positions = order.starts if first else order.ends - 1
    retract = _RETRACT_KINDS[kinds]
    multi = order.sizes > 1
    if first and not spec.ignore_delete and retract.any():
        row = int(order.indices[np.flatnonzero(retract)[0]])
        raise MaintenanceRefusedError(
            spec.where,
            f"first-row merge engine: key {describe_key(kv, spec, row)} has a DELETE/UPDATE_BEFORE record, "
            "which Paimon cannot merge unless 'ignore-delete' is set",
        )
    if spec.ignore_delete and retract.any():
        eligible = ~retract
        if not first:
            eligible[order.starts[~multi]] = True  # a lone record passes the reducer unchanged
        index = np.arange(kinds.size, dtype=np.int64)
        if first:
            positions = _reduce(np.minimum, np.where(eligible, index, kinds.size), order.starts, order.ends)
            positions = positions[positions < kinds.size]
        else:
            positions = _reduce(np.maximum, np.where(eligible, index, -1), order.starts, order.ends)
            positions = positions[positions >= 0]
    return np.asarray(order.indices[positions], dtype=np.int64)


def _merged_rows(kv: pa.Table, spec: MergeSpec, order: MergeOrder, kinds: np.ndarray) -> pa.Table:
    """Partial-update and aggregation: lone records as they are, merged rows for keys with several."""
    multi = order.sizes > 1
    lone_rows = order.indices[order.starts[~multi]]
    runs_starts, runs_sizes = order.starts[multi], order.sizes[multi]
    retract = _RETRACT_KINDS[kinds]
    if spec.engine == "aggregation":
        events = np.where(retract, RETRACT, AGG).astype(np.int8)
        if spec.remove_record_on_delete:
            events[kinds == DELETE] = RESET
    else:
        events = _partial_update_events(kv, spec, order, kinds, multi)

    def key_of(run: int) -> str:
        return describe_key(kv, spec, int(order.indices[runs_starts[run]]))

    runs = Runs(starts=runs_starts, sizes=runs_sizes, events=events, key_of=key_of)
    merged = _build(kv, spec, order, runs, kinds)
    if not lone_rows.size:
        return merged
    table = pa.concat_tables([kv.take(pa.array(lone_rows)), merged])
    group_of = np.concatenate([np.flatnonzero(~multi), np.flatnonzero(multi)])
    return table.take(pa.array(np.argsort(group_of, kind="stable")))


def _partial_update_events(
    kv: pa.Table, spec: MergeSpec, order: MergeOrder, kinds: np.ndarray, multi: np.ndarray
) -> np.ndarray:
    """Per sorted position: AGG (+I/+U: non-null fields update), RESET (the row takes this record's
    values: a retraction first in its key, or a -D under remove-record-on-delete), RETRACT (skipped)."""
    retract = _RETRACT_KINDS[kinds]
    events = np.where(retract, RETRACT, AGG).astype(np.int8)
    if not spec.ignore_delete and not spec.remove_record_on_delete:
        bad = multi & _reduce(np.logical_or, retract, order.starts, order.ends)
        if bad.any():
            row = int(order.indices[order.starts[np.flatnonzero(bad)[0]]])
            raise MaintenanceRefusedError(
                spec.where,
                f"partial-update merge engine: key {describe_key(kv, spec, row)} has a DELETE/UPDATE_BEFORE "
                "record among several records, which Paimon cannot merge without 'ignore-delete', "
                "'partial-update.remove-record-on-delete' or sequence groups",
            )
    if spec.remove_record_on_delete:
        events[kinds == DELETE] = RESET
    first_retract = order.starts[retract[order.starts]]
    events[first_retract] = RESET
    return events


def _build(kv: pa.Table, spec: MergeSpec, order: MergeOrder, runs: Runs, kinds: np.ndarray) -> pa.Table:
    """The merged row of each run: values per engine, the last record's key, sequence number and kind."""
    last = runs.starts + runs.sizes - 1
    numbers = np.asarray(kv.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)[order.indices]
    events = runs.events
    if spec.engine == "aggregation":
        sequence = numbers[last]
        kind = np.where(events[last] == RESET, DELETE, INSERT)
        values = _aggregate_values(kv, spec, order, runs)
    else:
        # A retraction moves the sequence number unless ignore-delete skipped it (the others failed above).
        counted = ~_RETRACT_KINDS[kinds] if spec.ignore_delete else np.ones(kinds.size, dtype=bool)
        index = np.arange(numbers.size, dtype=np.int64)
        latest = _reduce(np.maximum, np.where(counted, index, -1), runs.starts, last + 1)
        sequence = np.where(latest >= 0, numbers[np.maximum(latest, 0)], 0)
        inserts = _reduce(np.logical_or, ~_RETRACT_KINDS[kinds], runs.starts, last + 1)
        deleted = spec.remove_record_on_delete & (kinds[last] == DELETE)
        kind = np.where(deleted | ~inserts, DELETE, INSERT)
        values = _partial_update_values(kv, spec, order, runs)
    taken = pa.array(order.indices[last])
    columns = []
    for name in kv.column_names:
        if name == SEQUENCE_NUMBER:
            columns.append(pa.array(sequence, pa.int64()))
        elif name == VALUE_KIND:
            columns.append(pa.array(kind.astype(np.int8), pa.int8()))
        elif name in values:
            columns.append(values[name])
        else:
            columns.append(kv.column(name).take(taken))
    return pa.Table.from_arrays(columns, schema=kv.schema)


def _partial_update_values(
    kv: pa.Table, spec: MergeSpec, order: MergeOrder, runs: Runs
) -> dict[str, pa.Array]:
    """Each field's last non-null value (AGG) or value of a RESET record, per run; NOT NULL checked."""
    taken = pa.array(order.indices)
    index = np.arange(order.indices.size, dtype=np.int64)
    ends = runs.starts + runs.sizes
    sets = runs.events == RESET
    updates = runs.events == AGG
    out: dict[str, pa.Array] = {}
    for name in spec.fields:
        column = kv.column(name).take(taken).combine_chunks()
        valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
        if name in spec.not_null_fields:
            _check_not_null(spec, name, (sets | updates) & ~valid, runs)
        chosen = _reduce(np.maximum, np.where((updates & valid) | sets, index, -1), runs.starts, ends)
        mask = chosen < 0
        out[name] = column.take(pa.array(np.where(mask, 0, chosen), mask=mask))
    return out


def _check_not_null(spec: MergeSpec, name: str, bad: np.ndarray, runs: Runs) -> None:
    hit = np.flatnonzero(_reduce(np.logical_or, bad, runs.starts, runs.starts + runs.sizes))
    if hit.size:
        raise MaintenanceRefusedError(
            spec.where,
            f"{spec.engine} merge engine: NOT NULL field {name!r} would be null for key "
            f"{runs.key_of(int(hit[0]))} (Paimon fails the merge: 'can not be null')",
        )


def _aggregate_values(kv: pa.Table, spec: MergeSpec, order: MergeOrder, runs: Runs) -> dict[str, pa.Array]:
    taken = pa.array(order.indices)
    resets = runs.events == RESET
    out: dict[str, pa.Array] = {}
    for agg in spec.aggregates:
        column = kv.column(agg.field).take(taken)
        if agg.field in spec.not_null_fields and resets.any():
            valid = np.asarray(
                pc.is_valid(column.combine_chunks()).to_numpy(zero_copy_only=False), dtype=bool
            )
            _check_not_null(spec, agg.field, resets & ~valid, runs)
        out[agg.field] = aggregate_field(column, agg, runs, spec)
    return out
