"""The in-memory model of a Paimon primary-key table for the primary-key state machine (``pk_machine.py``).

Written from Paimon's merge semantics only (docs of ``DeduplicateMergeFunction`` and
``AggregateMergeFunction``; the reference ``paimon-pk-compaction.md``), never calling the code under test.
Rows are plain JSON dicts ``{"p", "k", "v", "n", "op"}``; the key is ``(p, k)``. A batch is applied in input
order (both writers number a batch's records in input order, so the last record of a key wins its ties):

* **deduplicate**: the newest record of a key is the key's row; if its kind is a retraction (``-U`` or
  ``-D``) the key has no row (Paimon's readers drop retract records after the merge).
* **aggregation** (``fields.n.aggregate-function=sum``, every other field the default
  ``last_non_null_value``): only ``+I``/``+U`` records are written here; ``n`` sums the non-null inputs
  (null while every input is null), ``v`` and ``op`` keep the last non-null input.

Snapshots: the model keeps the expected rows of every retained snapshot id and of every tag, so a read of
any of them can be compared; snapshot expiry removes ids, partition expiry drops whole partitions.

Example:
    >>> m = PkModel("deduplicate")
    >>> m.apply([{"p": "a", "k": 1, "v": "x", "n": 1, "op": "+I"}], snapshot_id=1)
    >>> m.rows_at(1)
    (('a', 1, 'x', 1, '+I'),)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

COLUMNS = ("p", "k", "v", "n", "op")
RETRACT = ("-U", "-D")
Row = dict[str, Any]
RowTuple = tuple[Any, ...]


def as_tuple(row: Mapping[str, Any]) -> RowTuple:
    return tuple(row.get(c) for c in COLUMNS)


def canonical(rows: Iterable[Mapping[str, Any]]) -> tuple[RowTuple, ...]:
    """Rows as sorted tuples (None sorts first)."""
    return tuple(sorted((as_tuple(r) for r in rows), key=lambda t: [(x is not None, x) for x in t]))


def merge_record(engine: str, old: Row | None, record: Row) -> Row | None:
    """The key's state after ``record`` (None: the key reads nothing)."""
    if engine == "deduplicate":
        return None if record["op"] in RETRACT else dict(record)
    if record["op"] in RETRACT:
        raise ValueError("the aggregation model takes no retractions")
    if old is None:
        return dict(record)
    merged = dict(old)
    if record.get("n") is not None:
        merged["n"] = record["n"] if old.get("n") is None else old["n"] + record["n"]
    for name in ("v", "op"):
        if record.get(name) is not None:
            merged[name] = record[name]
    return merged


@dataclass
class PkModel:
    engine: str
    current: dict[tuple[Any, Any], Row] = field(default_factory=dict)
    snapshots: dict[int, tuple[RowTuple, ...]] = field(default_factory=dict)
    tags: dict[str, int] = field(default_factory=dict)
    tag_rows: dict[str, tuple[RowTuple, ...]] = field(default_factory=dict)

    def _record(self, snapshot_id: int) -> None:
        self.snapshots[snapshot_id] = canonical(self.current.values())

    def apply(self, records: Iterable[Row], snapshot_id: int) -> None:
        """One write's records in order, committed as ``snapshot_id``."""
        for record in records:
            key = (record["p"], record["k"])
            state = merge_record(self.engine, self.current.get(key), record)
            if state is None:
                self.current.pop(key, None)
            else:
                self.current[key] = state
        self._record(snapshot_id)

    def same_rows(self, snapshot_id: int) -> None:
        """A snapshot that changes no row (a compaction)."""
        self._record(snapshot_id)

    def drop_partitions(self, partitions: Iterable[str], snapshot_id: int) -> None:
        gone = set(partitions)
        self.current = {key: row for key, row in self.current.items() if key[0] not in gone}
        self._record(snapshot_id)

    def partitions(self) -> set[str]:
        return {p for p, _k in self.current}

    def rows_at(self, snapshot_id: int) -> tuple[RowTuple, ...]:
        return self.snapshots[snapshot_id]

    def latest(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None

    def tag(self, name: str, snapshot_id: int) -> None:
        self.tags[name] = snapshot_id
        self.tag_rows[name] = self.snapshots[snapshot_id]

    def untag(self, name: str) -> None:
        del self.tags[name]
        del self.tag_rows[name]

    def expire(self, ids: Iterable[int]) -> None:
        for snapshot_id in ids:
            del self.snapshots[snapshot_id]
