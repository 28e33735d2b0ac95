"""Java's merge order of KV records, vectorized: sort, runs of one key, the ambiguity check.

A merge-tree reader (``SortMergeReaderWithMinHeap``/``...WithLoserTree``) orders one bucket's records by key
(the generated ``RecordComparator`` of the ``_KEY_*`` fields, nulls first), then by the ``sequence.field``
values (``UserDefinedSeqComparator``: nulls first, every field descending when
``sequence.field.sort-order=descending``; the nulls stay first), then by ``_SEQUENCE_NUMBER``. Values compare
as Java compares them: strings and binaries as unsigned bytes then length (Arrow's order too), booleans false
first, floating point as ``Float.compare``/``Double.compare`` (-0.0 before 0.0, NaN above +Infinity, every NaN
equal). Arrow orders NaN among the nulls' end and -0.0 equal to 0.0, so a float column is sorted (and compared
for equal keys) through :func:`order_view`, an integer whose order is Java's: the IEEE bits, NaN made
canonical, negative values' magnitude bits flipped.

:func:`merge_order` sorts once (``pyarrow.compute.sort_indices``, stable), then finds where each key's run
starts by comparing each sorted row with the previous one (nulls equal to nulls), and refuses two rows that
share key, sequence fields and ``_SEQUENCE_NUMBER`` (:class:`AmbiguousSequenceError`: Java 1.x breaks that tie
by heap order, so readers may have shown either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import AmbiguousSequenceError, MaintenanceRefusedError
from airflow_lakeformat.core.paimon.merge_tree.kv_schema import SEQUENCE_NUMBER
from airflow_lakeformat.core.paimon.merge_tree.merge_spec import MergeSpec

_PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".")[0]) >= 25
_CANONICAL_NAN = {32: 0x7FC00000, 64: 0x7FF8000000000000}


@dataclass(frozen=True)
class MergeOrder:
    """Sorted positions of a KV table and its runs of equal keys.

    ``indices[i]`` is the input row at sorted position ``i``; run ``g`` covers sorted positions
    ``starts[g] .. starts[g] + sizes[g] - 1``, oldest record first.
    """

    indices: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @property
    def ends(self) -> np.ndarray:
        """One past the last sorted position of each run."""
        return np.asarray(self.starts + self.sizes, dtype=np.int64)


def order_view(column: pa.Array | pa.ChunkedArray, name: str, where: str) -> pa.Array:
    """``column`` as an Arrow array whose ascending order with nulls first is Java's order of its values.

    Floats become int32/int64 (``Float.compare``); other orderable types are returned as they are. Nested
    types have no order here: refused.
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    dtype = array.type
    if pa.types.is_floating(dtype):
        return _float_view(array, name, where)
    if pa.types.is_boolean(dtype):
        return pc.cast(array, pa.int8())
    if pa.types.is_nested(dtype) or pa.types.is_dictionary(dtype) or pa.types.is_null(dtype):
        raise MaintenanceRefusedError(
            where, f"column {name!r} of type {dtype} cannot order primary-key records"
        )
    return array


def _float_view(array: pa.Array, name: str, where: str) -> pa.Array:
    width = array.type.bit_width
    if width not in (32, 64):
        raise MaintenanceRefusedError(where, f"column {name!r} of type {array.type} is no Paimon type")
    int_type = np.int32 if width == 32 else np.int64
    values = pc.fill_null(array, 0.0).to_numpy(zero_copy_only=False)
    bits = values.view(int_type).copy()
    bits[np.isnan(values)] = _CANONICAL_NAN[width]
    flip = int_type(np.iinfo(int_type).max)
    keys = bits ^ ((bits >> (width - 1)) & flip)
    mask = None if array.null_count == 0 else np.asarray(pc.is_null(array).to_numpy(zero_copy_only=False))
    return pa.array(keys, mask=mask)


def sort_indices(columns: list[tuple[pa.Array, bool]]) -> np.ndarray:
    """Stable sort indices by ``(view, descending)`` columns, nulls first in each."""
    names = [f"c{i}" for i in range(len(columns))]
    table = pa.table({name: view for name, (view, _) in zip(names, columns, strict=True)})
    order = [
        (name, "descending" if desc else "ascending") for name, (_, desc) in zip(names, columns, strict=True)
    ]
    if _PER_KEY_NULL_PLACEMENT:
        indices = pc.sort_indices(table, sort_keys=[(n, o, "at_start") for n, o in order])
    else:
        indices = pc.sort_indices(table, sort_keys=order, null_placement="at_start")
    return np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def equal_to_previous(view: pa.Array) -> np.ndarray:
    """``out[i]``: sorted row ``i`` has the same value as row ``i - 1`` (nulls equal nulls); ``out[0]`` False."""
    n = len(view)
    out = np.zeros(n, dtype=bool)
    if n < 2:
        return out
    later, earlier = view.slice(1), view.slice(0, n - 1)
    same = pc.fill_null(pc.equal(later, earlier), False)
    if view.null_count:
        same = pc.or_(same, pc.and_(pc.is_null(later), pc.is_null(earlier)))
    out[1:] = same.to_numpy(zero_copy_only=False)
    return out


def merge_order(kv: pa.Table, spec: MergeSpec) -> MergeOrder:
    """Sort ``kv`` in Java's merge order and cut it into runs of one key; refuse ambiguous sequences.

    Raises:
        AmbiguousSequenceError: two records with the same key, sequence fields and ``_SEQUENCE_NUMBER``.
    """
    keys = [order_view(kv.column(name), name, spec.where) for name in spec.key_columns]
    sequences = [order_view(kv.column(name), name, spec.where) for name in spec.sequence_fields]
    number = kv.column(SEQUENCE_NUMBER).combine_chunks()
    columns = (
        [(v, False) for v in keys] + [(v, spec.sequence_descending) for v in sequences] + [(number, False)]
    )
    indices = sort_indices(columns) if kv.num_rows > 1 else np.arange(kv.num_rows, dtype=np.int64)
    taken = pa.array(indices)
    same_key = np.ones(kv.num_rows, dtype=bool)
    if kv.num_rows:
        same_key[0] = False
    for view in keys:
        same_key &= equal_to_previous(view.take(taken))
    tie = same_key.copy()
    for view in [*sequences, number]:
        if tie.any():
            tie &= equal_to_previous(view.take(taken))
    if tie.any():
        position = int(np.flatnonzero(tie)[0])
        row = int(indices[position])
        raise AmbiguousSequenceError(
            spec.where, describe_key(kv, spec, row), _describe_sequence(kv, spec, row)
        )
    starts = np.flatnonzero(~same_key).astype(np.int64)
    sizes = np.diff(np.append(starts, kv.num_rows)).astype(np.int64)
    return MergeOrder(indices=indices, starts=starts, sizes=sizes)


def describe_key(kv: pa.Table, spec: MergeSpec, row: int) -> str:
    """The key of input row ``row`` as ``(name=value, ...)`` for messages."""
    parts = [f"{name}={_value(kv, name, row)!r}" for name in spec.key_columns]
    return "(" + ", ".join(parts) + ")"


def _describe_sequence(kv: pa.Table, spec: MergeSpec, row: int) -> str:
    names = [*spec.sequence_fields, SEQUENCE_NUMBER]
    return ", ".join(f"{name}={_value(kv, name, row)!r}" for name in names)


def _value(kv: pa.Table, name: str, row: int) -> Any:
    return kv.column(name)[row].as_py()
