"""The in-memory model of an Iceberg table for the stateful machine, written from Iceberg's rules only.

It never calls the code under test. A table is a graph of snapshots (id -> parent, commit time, the rows it
holds) and a set of refs (branches and tags naming a snapshot); rows are plain dicts ``{"k", "p", "v"}``
compared as sorted canonical JSON. The rules:

* Spark SQL writes (Iceberg 1.10.2, Spark 3.5): ``DELETE``/``UPDATE`` with SQL's three-valued logic (``p = 'a'``
  is false for a NULL ``p``), ``MERGE INTO ... ON t.k = s.k`` (a NULL key never matches), ``INSERT OVERWRITE``
  static (the ``PARTITION`` clause as a filter; no clause: every row) or dynamic (the partitions of the new rows;
  the whole table when unpartitioned), partitions compared by value with NULL equal to NULL;
* snapshot expiry as Java's ``RemoveSnapshots.internalApply`` (shared/reference/iceberg-maintenance.md, "selecting
  the snapshots to drop"): every ref is kept (no ``max-ref-age-ms`` is set here); a branch keeps the ancestors of
  its head while fewer than ``min-snapshots-to-keep`` (the ref's, else ``retain_last``, else the table's 1) are
  kept **or** the snapshot is at least as new as ``older_than``, stopping at the first that fails both; tags keep
  their snapshot; a snapshot that is neither an ancestor of a branch head nor tagged is kept iff it is at least as
  new as ``older_than``;
* maintenance that rewrites files (data, delete and manifest compaction) adds snapshots holding the same rows as
  the head they replace, and expiry or orphan cleanup changes no retained snapshot's rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
Rows = tuple[str, ...]  # sorted canonical JSON of each row
# A predicate of the machine's SQL: (column, value); value None means IS NULL.
Predicate = tuple[str, Any]
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1  # history.expire.min-snapshots-to-keep


def canonical(row: Mapping[str, Any]) -> str:
    return json.dumps(
        {"k": row.get("k"), "p": row.get("p"), "v": row.get("v")}, sort_keys=True, ensure_ascii=False
    )


def canonical_rows(rows: Iterable[Mapping[str, Any]]) -> Rows:
    return tuple(sorted(canonical(r) for r in rows))


def decode(rows: Rows) -> list[Row]:
    return [json.loads(r) for r in rows]


def matches(row: Mapping[str, Any], predicate: Predicate) -> bool:
    """SQL's ``col = value`` (false when either side is NULL), or ``col IS NULL`` for a None value."""
    column, value = predicate
    if value is None:
        return row.get(column) is None
    return row.get(column) is not None and row.get(column) == value


def delete(rows: Rows, predicate: Predicate) -> Rows:
    return canonical_rows(r for r in decode(rows) if not matches(r, predicate))


def update(rows: Rows, predicate: Predicate, column: str, value: Any) -> Rows:
    return canonical_rows({**r, column: value} if matches(r, predicate) else r for r in decode(rows))


def merge(rows: Rows, source: Sequence[Row], matched: str) -> Rows:
    """``MERGE INTO t USING s ON t.k = s.k WHEN MATCHED THEN UPDATE SET t.v = s.v | DELETE WHEN NOT MATCHED
    THEN INSERT *``; the source's keys are unique and never NULL."""
    by_key = {s["k"]: s for s in source}
    out: list[Row] = []
    hit: set[Any] = set()
    for row in decode(rows):
        found = by_key.get(row["k"]) if row.get("k") is not None else None
        if found is None:
            out.append(row)
            continue
        hit.add(row["k"])
        if matched == "update":
            out.append({**row, "v": found["v"]})
    out += [dict(s) for k, s in by_key.items() if k not in hit]
    return canonical_rows(out)


def overwrite(rows: Rows, new: Sequence[Row], mode: str, partitioned: bool, partition: Any = None) -> Rows:
    """``INSERT OVERWRITE``: ``mode`` "static-all" (no PARTITION clause: every row goes), "static" (``PARTITION
    (p = partition)``), "dynamic" (the partitions of ``new``; every row when unpartitioned)."""
    current = decode(rows)
    if mode == "static-all" or (mode == "dynamic" and not partitioned):
        kept: list[Row] = []
    elif mode == "static":
        kept = [r for r in current if not matches(r, ("p", partition))]
    else:
        replaced = {json.dumps(r.get("p")) for r in new}
        kept = [r for r in current if json.dumps(r.get("p")) not in replaced]
    return canonical_rows(kept + [dict(r) for r in new])


@dataclass
class Snap:
    """A snapshot the model knows: parent, commit time (Java's ``committed_at``), rows (None: not known)."""

    parent: int | None
    timestamp_ms: int
    rows: Rows | None
    operation: str = ""


@dataclass
class Ref:
    kind: str  # "BRANCH" or "TAG"
    snapshot_id: int
    min_snapshots_to_keep: int | None = None


@dataclass
class IcebergModel:
    partitioned: bool
    snapshots: dict[int, Snap] = field(default_factory=dict)
    refs: dict[str, Ref] = field(default_factory=dict)

    def rows(self, ref: str = "main") -> Rows:
        found = self.snapshots[self.refs[ref].snapshot_id].rows
        assert found is not None, f"the model does not know the rows of {ref}"
        return found

    def branches(self) -> list[str]:
        return sorted(n for n, r in self.refs.items() if r.kind == "BRANCH")

    def ancestors(self, snapshot_id: int) -> list[int]:
        """``snapshot_id`` and its parents, newest first, as far as the model knows them."""
        out: list[int] = []
        current: int | None = snapshot_id
        while current is not None and current in self.snapshots and current not in out:
            out.append(current)
            current = self.snapshots[current].parent
        return out

    def expected_expiry(self, older_than_ms: int, retain_last: int | None) -> set[int]:
        """The snapshots Java's ``expire_snapshots(older_than, retain_last)`` removes (module docstring)."""
        retained: set[int] = set()
        branch_ancestry: set[int] = set()
        default_keep = retain_last if retain_last is not None else DEFAULT_MIN_SNAPSHOTS_TO_KEEP
        for ref in self.refs.values():
            if ref.kind == "TAG":
                retained.add(ref.snapshot_id)
                continue
            keep = ref.min_snapshots_to_keep or default_keep
            ancestry = self.ancestors(ref.snapshot_id)
            branch_ancestry.update(ancestry)
            kept = 0
            for snapshot_id in ancestry:
                if kept < keep or self.snapshots[snapshot_id].timestamp_ms >= older_than_ms:
                    retained.add(snapshot_id)
                    kept += 1
                else:
                    break
        tagged = {r.snapshot_id for r in self.refs.values() if r.kind == "TAG"}
        for snapshot_id, snap in self.snapshots.items():
            unreferenced = snapshot_id not in branch_ancestry and snapshot_id not in tagged
            if unreferenced and snap.timestamp_ms >= older_than_ms:
                retained.add(snapshot_id)
        return set(self.snapshots) - retained

    def expire(self, ids: Iterable[int]) -> None:
        for snapshot_id in ids:
            del self.snapshots[snapshot_id]


def describe_rows_difference(label: str, got: Rows, want: Rows) -> str:
    """Missing and extra rows (as multisets) in one line each."""
    from collections import Counter

    g, w = Counter(got), Counter(want)
    missing = sorted((w - g).elements())
    extra = sorted((g - w).elements())
    return f"{label}: Java reads {len(got)} rows, the model {len(want)}; missing {missing}; extra {extra}"


# -- the machine's SQL, rendered from the same values the rules above take ---------------------------------------


def literal(value: Any) -> str:
    """A Spark SQL literal; the machine's strings hold no quote or backslash."""
    if value is None:
        return "CAST(NULL AS STRING)"
    if isinstance(value, int):
        return str(value)
    assert "'" not in value and "\\" not in value, value
    return f"'{value}'"


def condition(predicate: Predicate) -> str:
    column, value = predicate
    return f"{column} IS NULL" if value is None else f"{column} = {literal(value)}"


def values(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = ("k", "p", "v")) -> str:
    return ", ".join("(" + ", ".join(literal(r.get(c)) for c in columns) + ")" for r in rows)
