"""Sort compaction of Iceberg data files: the sort order to use, and an external merge sort in bounded memory.

Follows Java's ``SparkSortFileRewriteRunner`` / ``SparkShufflingFileRewriteRunner`` (1.10.2) in what it produces:
each file group's live rows come out **globally sorted** across the group's output files, by the table's sort
order or the one given (Java's ``sort_order => 'id DESC NULLS LAST, name'``); the planner and the commit are
bin-pack's. Java range-shuffles the group in Spark; here one process sorts it without ever holding all its rows:

1. **Resolve the order** (:func:`resolve_sort_order`): the given text (``col [ASC|DESC] [NULLS FIRST|LAST]``,
   comma separated; Spark's defaults: ASC, nulls first for ASC and last for DESC) or the table's default sort
   order, each column matched by name against the current schema (by field id for the table's order). Refused,
   typed, before anything is read: an unsorted table without a given order ("Cannot sort data without a valid
   sort order", Java's words), ``zorder(...)`` (not supported yet), transforms such as ``bucket(4, id)`` or
   ``days(ts)`` (not supported yet), columns that are not primitive.
2. **Runs** (:class:`ExternalSort`): the group's record batches are gathered until about ``run_bytes`` of Arrow
   data (64 MiB by default, ``LAKEFORMAT_SORT_RUN_BYTES``), sorted with Arrow's stable ``sort_indices`` and
   spilled to an Arrow IPC file in a private temporary directory, in batches of about ``batch_bytes``. Null
   placement per column and Spark's NaN order (greater than every number) are honoured with auxiliary key
   columns (validity, is-NaN) ahead of a value column where Arrow's own placement differs. A group that fits one
   run is sorted in memory.
3. **Merge**: each run contributes one batch at a time. Each round takes the *cut*: the smallest, over the runs
   that still have batches on disk, of the last key loaded from that run; every loaded row at or below the cut can
   be emitted (rows still on disk are at or above their run's last loaded key). The rows at or below it are found
   per run by binary search, concatenated and sorted as one small chunk (Arrow, not a Python loop per row), and
   yielded; the run that set the cut has then used its batch up and loads the next one. Memory is about one batch
   per run plus one run while the runs are built. The temporary directory is removed at the end, also on error.

Example:
    >>> keys = parse_sort_order("id DESC NULLS LAST, name")
    >>> [(k.name, k.descending, k.nulls_first) for k in keys]
    [('id', True, False), ('name', False, True)]
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_lakeformat.core.errors import UnsupportedFormatError, UsageError

if TYPE_CHECKING:
    from pyiceberg.table.metadata import TableMetadata

DEFAULT_RUN_BYTES = 64 * 1024 * 1024
DEFAULT_BATCH_BYTES = 4 * 1024 * 1024
RUN_BYTES_VARIABLE = "LAKEFORMAT_SORT_RUN_BYTES"
_PER_KEY_NULL_PLACEMENT = int(pa.__version__.split(".")[0]) >= 25
UNSORTED_ORDER_ID = 0  # what Java's rewrite writes as the new files' sort_order_id (run against 1.10.2)

_TERM = re.compile(
    r"^\s*(?P<name>[A-Za-z_][\w.]*|`[^`]+`)\s*(?P<direction>ASC|DESC)?\s*(?:NULLS\s+(?P<nulls>FIRST|LAST))?\s*$",
    re.IGNORECASE,
)
_CALL = re.compile(r"^\s*(\w+)\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class SortKey:
    """One field of a sort order, by its name in the current schema (``a.b`` for a nested field)."""

    name: str
    descending: bool = False
    nulls_first: bool = True
    field_id: int | None = None

    def describe(self) -> str:
        """Spark's text for this field, e.g. ``id DESC NULLS LAST``."""
        direction = "DESC" if self.descending else "ASC"
        return f"{self.name} {direction} NULLS {'FIRST' if self.nulls_first else 'LAST'}"


def describe_sort_order(keys: Sequence[SortKey]) -> str:
    """The whole order as text, e.g. ``id ASC NULLS FIRST, name DESC NULLS LAST``."""
    return ", ".join(k.describe() for k in keys)


def _split_terms(text: str) -> list[str]:
    """Comma-separated terms, commas inside parentheses kept (``bucket(4, id)`` is one term)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return terms


def parse_sort_order(text: str) -> list[SortKey]:
    """Java's ``sort_order`` text as sort keys (names not yet checked against a schema).

    Args:
        text: ``col [ASC|DESC] [NULLS FIRST|LAST]`` terms, comma separated.

    Raises:
        UsageError: empty or malformed text, ``zorder(...)``, or a transform (``bucket(4, id)``, ``days(ts)``).
    """
    if not text or not text.strip():
        raise UsageError("the sort order is empty; give terms like 'id ASC NULLS FIRST, name DESC'")
    keys = []
    for term in _split_terms(text):
        call = _CALL.match(term)
        if call and call.group(1).lower() == "zorder":
            raise UsageError(f"z-order is not supported yet (sort order {text!r}); use plain sort fields")
        if call:
            raise UsageError(
                f"sort order term {term.strip()!r}: transforms ({call.group(1)}) are not supported yet; "
                "sort by plain columns"
            )
        match = _TERM.match(term)
        if not match:
            raise UsageError(
                f"sort order term {term.strip()!r} is not of the form 'column [ASC|DESC] [NULLS FIRST|LAST]'"
            )
        descending = (match.group("direction") or "ASC").upper() == "DESC"
        nulls = match.group("nulls")
        nulls_first = not descending if nulls is None else nulls.upper() == "FIRST"
        keys.append(SortKey(match.group("name").strip("`"), descending, nulls_first))
    return keys


def _check_sortable(table_name: str, name: str, field_type: Any) -> None:
    if not field_type.is_primitive:
        raise UsageError(f"{table_name}: cannot sort by {name}: a {field_type} column is not a primitive")


def resolve_sort_order(metadata: TableMetadata, table_name: str, text: str | None) -> tuple[SortKey, ...]:
    """The sort keys of a sort compaction: ``text`` resolved against the current schema, else the table's order.

    Args:
        metadata: the table's metadata (current schema, sort orders).
        table_name: for messages.
        text: the ``sort_order`` given, or None for the table's default sort order.

    Raises:
        UsageError: no usable order (an unsorted table and none given), an unknown column, a malformed order.
        UnsupportedFormatError: the table's own order uses a transform other than identity.
    """
    schema = metadata.schema()
    if text is not None:
        keys = []
        for key in parse_sort_order(text):
            try:
                found = schema.find_field(key.name, case_sensitive=False)
            except ValueError:
                raise UsageError(f"{table_name}: the sort order names {key.name!r}, not a column") from None
            name = schema.find_column_name(found.field_id) or key.name
            _check_sortable(table_name, name, found.field_type)
            keys.append(SortKey(name, key.descending, key.nulls_first, found.field_id))
        return tuple(keys)
    order = next((o for o in metadata.sort_orders if o.order_id == metadata.default_sort_order_id), None)
    if order is None or not order.fields:
        raise UsageError(
            f"Cannot sort data without a valid sort order: {table_name} is unsorted and no sort order is provided"
        )
    keys = []
    for sort_field in order.fields:
        found_name = schema.find_column_name(sort_field.source_id)
        if found_name is None:
            raise UnsupportedFormatError(
                table_name, f"the sort order's field id {sort_field.source_id} is no longer in the schema"
            )
        name = found_name
        if str(sort_field.transform) != "identity":
            raise UnsupportedFormatError(
                table_name, f"sorting by {sort_field.transform}({name}) is not supported yet (identity only)"
            )
        _check_sortable(table_name, name, schema.find_field(sort_field.source_id).field_type)
        descending = sort_field.direction.value == "desc"
        nulls_first = sort_field.null_order.value == "nulls-first"
        keys.append(SortKey(name, descending, nulls_first, sort_field.source_id))
    return tuple(keys)


# ---- sorting Arrow data -------------------------------------------------------------------------


def key_column(data: pa.Table, name: str) -> pa.ChunkedArray:
    """The column ``name`` of ``data``; ``a.b`` walks into struct ``a`` when there is no column named so."""
    if name in data.column_names:
        return data.column(name)
    head, *path = name.split(".")
    column: Any = data.column(head)
    for child in path:
        column = pc.struct_field(column, [child])
    return column if isinstance(column, pa.ChunkedArray) else pa.chunked_array([column])


def sort_indices(data: pa.Table, keys: Sequence[SortKey]) -> pa.Array:
    """Stable sort indices of ``data`` by ``keys``, each with its own direction and null placement.

    Arrow places nulls (and NaNs) at one end for every key (``null_placement``), whatever the direction; Spark
    orders NaN above every number. So the first key's null placement is Arrow's, and only where a key differs
    (its nulls elsewhere, or NaNs present) an auxiliary column goes before it: its validity, its is-NaN flag.
    Key columns are combined into one chunk first (Arrow sorts one chunk much faster than many).
    """
    placement = "at_start" if keys[0].nulls_first else "at_end"
    columns: dict[str, Any] = {}
    order: list[tuple[str, str]] = []
    for i, key in enumerate(keys):
        values = key_column(data, key.name).combine_chunks()
        direction = "descending" if key.descending else "ascending"
        nans = pa.types.is_floating(values.type) and bool(pc.any(pc.is_nan(values)).as_py())
        if values.null_count and (nans or key.nulls_first != (placement == "at_start")):
            columns[f"v{i}"] = pc.is_valid(values)
            order.append((f"v{i}", "ascending" if key.nulls_first else "descending"))
        if nans:
            columns[f"n{i}"] = pc.fill_null(pc.is_nan(values), False)
            order.append((f"n{i}", direction))
        columns[f"k{i}"] = values
        order.append((f"k{i}", direction))
    if len(order) == 1:
        return pc.array_sort_indices(columns["k0"], order=order[0][1], null_placement=placement)
    if _PER_KEY_NULL_PLACEMENT:  # pyarrow 25 deprecated the table-wide null_placement
        return pc.sort_indices(pa.table(columns), sort_keys=[(name, how, placement) for name, how in order])
    return pc.sort_indices(pa.table(columns), sort_keys=order, null_placement=placement)


def sort_table(data: pa.Table, keys: Sequence[SortKey]) -> pa.Table:
    """``data`` sorted by ``keys`` (stable)."""
    return data.take(sort_indices(data, keys)) if data.num_rows > 1 else data


def _compare(left: Sequence[Any], right: Sequence[Any], keys: Sequence[SortKey]) -> int:
    """-1, 0 or 1: the order of two rows' key values, as :func:`sort_indices` orders them."""
    for a, b, key in zip(left, right, keys, strict=True):
        if a is None or b is None:
            if a is None and b is None:
                continue
            first = -1 if key.nulls_first else 1
            return first if a is None else -first
        a_nan = isinstance(a, float) and math.isnan(a)
        b_nan = isinstance(b, float) and math.isnan(b)
        if a_nan or b_nan:
            if a_nan and b_nan:
                continue
            outcome = 1 if a_nan else -1
        elif a == b:
            continue
        else:
            outcome = -1 if a < b else 1
        return -outcome if key.descending else outcome
    return 0


@dataclass(frozen=True)
class SortBudget:
    """How much Arrow data one sorted run holds, and how big the batches read back in the merge are."""

    run_bytes: int = DEFAULT_RUN_BYTES
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @classmethod
    def from_environment(cls) -> SortBudget:
        """The default budget, ``LAKEFORMAT_SORT_RUN_BYTES`` overriding the run size (the batch: 1/16 of it)."""
        text = os.environ.get(RUN_BYTES_VARIABLE)
        if not text:
            return cls()
        try:
            run = int(text)
        except ValueError:
            raise UsageError(f"{RUN_BYTES_VARIABLE} must be a number of bytes, not {text!r}") from None
        if run <= 0:
            raise UsageError(f"{RUN_BYTES_VARIABLE} must be > 0, not {run}")
        return cls(run, max(1, min(DEFAULT_BATCH_BYTES, run // 16)))


# ---- the external merge sort --------------------------------------------------------------------


class _Run:
    """One spilled run during the merge: the batch loaded (sorted, rows not yet emitted) and the rest on disk."""

    def __init__(self, path: Path, keys: Sequence[SortKey]) -> None:
        self._file = pa.OSFile(str(path), "rb")
        self._reader = pa.ipc.open_file(self._file)
        self._keys = keys
        self._next = 0
        self.buffer: pa.Table | None = None
        self._values: list[pa.Array] = []
        self.last: list[Any] = []
        self.load()

    @property
    def on_disk(self) -> bool:
        return self._next < int(self._reader.num_record_batches)

    def load(self) -> None:
        """Replace the (used up) buffer with the next batch on disk."""
        batch = self._reader.get_batch(self._next)
        self._next += 1
        self.buffer = pa.Table.from_batches([batch])
        self._values = [key_column(self.buffer, k.name).combine_chunks() for k in self._keys]
        self.last = self._row(self.buffer.num_rows - 1)

    def _row(self, index: int) -> list[Any]:
        return [values[index].as_py() for values in self._values]

    def take_through(self, cut: Sequence[Any]) -> pa.Table | None:
        """Remove and return the buffer's rows at or below ``cut`` (binary search: the buffer is sorted)."""
        if self.buffer is None or not self.buffer.num_rows:
            return None
        low, high = 0, self.buffer.num_rows
        while low < high:
            middle = (low + high) // 2
            if _compare(self._row(middle), cut, self._keys) <= 0:
                low = middle + 1
            else:
                high = middle
        if low == 0:
            return None
        taken = self.buffer.slice(0, low)
        self.buffer = self.buffer.slice(low)
        self._values = [values.slice(low) for values in self._values]
        return taken

    def close(self) -> None:
        self._file.close()


class ExternalSort:
    """Sort a stream of record batches in bounded memory: sorted runs spilled to disk, then a k-way merge.

    Args:
        keys: the sort keys (:func:`resolve_sort_order`).
        budget: run and batch sizes (default: :meth:`SortBudget.from_environment`).
        spill_dir: where the private temporary directory goes (default: the system's temporary directory).

    Example:
        >>> with ExternalSort([SortKey("id")], SortBudget(run_bytes=64, batch_bytes=16)) as sorter:
        ...     for start in (30, 10, 20):
        ...         sorter.add(pa.record_batch({"id": list(range(start, start + 10))[::-1]}))
        ...     ids = [i for chunk in sorter.sorted_tables() for i in chunk.column("id").to_pylist()]
        >>> ids == list(range(10, 40)), sorter.rows, sorter.runs_spilled > 1
        (True, 30, True)
    """

    def __init__(
        self, keys: Sequence[SortKey], budget: SortBudget | None = None, spill_dir: str | None = None
    ) -> None:
        self.keys = tuple(keys)
        self.budget = budget or SortBudget.from_environment()
        self._spill_parent = spill_dir
        self._directory: Path | None = None
        self._schema: pa.Schema | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._runs: list[Path] = []
        self.rows = 0

    @property
    def runs_spilled(self) -> int:
        return len(self._runs)

    def __enter__(self) -> ExternalSort:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop what is held and remove the spill directory."""
        self._pending = []
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    def add(self, batch: pa.RecordBatch) -> None:
        """Take one batch; a run is sorted and spilled once about ``run_bytes`` are held."""
        if not batch.num_rows:
            return
        if self._schema is None:
            self._schema = batch.schema
        elif batch.schema != self._schema:
            batch = batch.cast(self._schema)
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._pending_bytes >= self.budget.run_bytes:
            self._spill()

    def _spill(self) -> None:
        assert self._schema is not None
        data = sort_table(pa.Table.from_batches(self._pending, self._schema), self.keys)
        self._pending, self._pending_bytes = [], 0
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="lakeformat-sort-", dir=self._spill_parent))
        path = self._directory / f"run-{len(self._runs):05d}.arrow"
        rows = max(1, int(self.budget.batch_bytes / max(1.0, data.nbytes / max(1, data.num_rows))))
        codec = "lz4" if pa.Codec.is_available("lz4") else None
        options = pa.ipc.IpcWriteOptions(compression=codec)
        with (
            pa.OSFile(str(path), "wb") as sink,
            pa.ipc.new_file(sink, self._schema, options=options) as writer,
        ):
            for batch in data.to_batches(max_chunksize=rows):
                writer.write_batch(batch)
        self._runs.append(path)

    def sorted_tables(self) -> Iterator[pa.Table]:
        """The rows added, in order, as a sequence of tables (each bounded by the budget)."""
        if self._schema is None:
            return
        if not self._runs:  # everything fits one run: sorted in memory
            data = sort_table(pa.Table.from_batches(self._pending, self._schema), self.keys)
            self._pending = []
            yield data
            return
        if self._pending:
            self._spill()
        yield from self._merge()

    def _merge(self) -> Iterator[pa.Table]:
        runs = [_Run(path, self.keys) for path in self._runs]
        keys = self.keys

        def compare(left: Sequence[Any], right: Sequence[Any]) -> int:
            return _compare(left, right, keys)

        by_key = functools.cmp_to_key(compare)
        try:
            while True:
                limiting = [r for r in runs if r.on_disk]
                if not limiting:
                    rest = [r.buffer for r in runs if r.buffer is not None and r.buffer.num_rows]
                    if rest:
                        yield sort_table(pa.concat_tables(rest), self.keys)
                    return
                cut = min((r.last for r in limiting), key=by_key)
                taken = [t for t in (r.take_through(cut) for r in runs) if t is not None]
                if taken:
                    yield sort_table(pa.concat_tables(taken), self.keys)
                used_up = [r for r in limiting if r.buffer is None or not r.buffer.num_rows]
                if not used_up:  # the run that set the cut always empties; never loop without progress
                    raise RuntimeError(f"the merge of sorted runs made no progress at key {cut!r}")
                for run in used_up:
                    run.load()
        finally:
            for run in runs:
                run.close()
