"""The in-memory model of a Paimon table, written from Paimon's rules and nothing else.

It never calls the code under test: rows are plain JSON dicts, partition matching follows Paimon's
rule (the ``partition.default-name`` means IS NULL, any other value matches by equality of the
value cast to the key's type), and the expiry range follows Paimon's ``ExpireSnapshotsImpl`` as
docs/maintenance.md states it (retain max / min, time judged on the successor, consumers, limit).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PARTITION = "__DEFAULT_PARTITION__"

Row = dict[str, Any]
Matcher = Callable[[Row], bool]


def canonical(row: Mapping[str, Any]) -> str:
    return json.dumps(dict(row), sort_keys=True, ensure_ascii=False)


def canonical_rows(rows: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(sorted(canonical(r) for r in rows))


def spec_matcher(spec: Mapping[str, str | None], key_types: Mapping[str, str]) -> Matcher:
    """A user's partition spec (text values) as Paimon reads it: the default name or None (JSON null)
    -> IS NULL, any other value -> equality with the value cast to the key's type."""

    def value_matches(key: str, wanted: str | None, actual: Any) -> bool:
        if wanted is None or wanted == DEFAULT_PARTITION:
            return actual is None
        if actual is None:
            return False
        if key_types[key] == "INT":
            try:
                return int(wanted) == actual
            except ValueError:
                return False
        return str(actual) == wanted

    return lambda row: all(value_matches(k, v, row.get(k)) for k, v in spec.items())


def pypaimon_static_matcher(spec: Mapping[str, Any]) -> Matcher:
    """pypaimon's static overwrite filter: None or the default name -> IS NULL, else equality."""

    def value_matches(wanted: Any, actual: Any) -> bool:
        if wanted is None or wanted == DEFAULT_PARTITION:
            return actual is None
        return actual is not None and actual == wanted

    return lambda row: all(value_matches(v, row.get(k)) for k, v in spec.items())


def dynamic_matcher(rows: Sequence[Row], keys: Sequence[str]) -> Matcher:
    """Dynamic partition overwrite: exactly the partitions the new rows fall into (NULL is IS NULL)."""
    partitions = {tuple(json.dumps(r.get(k)) for k in keys) for r in rows}
    return lambda row: tuple(json.dumps(row.get(k)) for k in keys) in partitions


@dataclass
class TableModel:
    """Snapshot id -> rows (canonical JSON strings, sorted), tags, consumers."""

    partition_keys: tuple[str, ...]
    key_types: dict[str, str]
    primary_keys: tuple[str, ...] = ()
    snapshots: dict[int, tuple[str, ...]] = field(default_factory=dict)
    tags: dict[str, int] = field(default_factory=dict)
    tag_rows: dict[str, tuple[str, ...]] = field(default_factory=dict)
    consumers: dict[str, int] = field(default_factory=dict)

    @property
    def latest(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None

    @property
    def earliest(self) -> int | None:
        return min(self.snapshots) if self.snapshots else None

    def rows(self, snapshot_id: int | None = None) -> list[Row]:
        if snapshot_id is None:
            snapshot_id = self.latest
        if snapshot_id is None:
            return []
        return [json.loads(r) for r in self.snapshots[snapshot_id]]

    def _upsert(self, current: list[Row], new: Sequence[Row]) -> list[Row]:
        if not self.primary_keys:
            return current + [dict(r) for r in new]
        by_key: dict[str, Row] = {}
        for row in current + [dict(r) for r in new]:
            by_key[json.dumps([row.get(k) for k in self.primary_keys])] = row
        return list(by_key.values())

    def commit(self, new_rows: Sequence[Row], delete: Matcher | None = None) -> int:
        """One snapshot: the latest rows minus those ``delete`` matches, then ``new_rows`` added."""
        current = self.rows()
        if delete is not None:
            current = [r for r in current if not delete(r)]
        snapshot_id = (self.latest or 0) + 1
        self.snapshots[snapshot_id] = canonical_rows(self._upsert(current, new_rows))
        return snapshot_id

    def same_rows_snapshot(self, snapshot_id: int) -> None:
        """A snapshot that changes files but not rows (compaction)."""
        assert self.latest is not None and snapshot_id == self.latest + 1, (snapshot_id, self.latest)
        self.snapshots[snapshot_id] = self.snapshots[self.latest]

    def tag(self, name: str, snapshot_id: int) -> None:
        self.tags[name] = snapshot_id
        self.tag_rows[name] = self.snapshots[snapshot_id]

    def untag(self, name: str) -> None:
        del self.tags[name]
        del self.tag_rows[name]

    def expire(self, ids: Iterable[int]) -> None:
        for snapshot_id in ids:
            del self.snapshots[snapshot_id]


def expected_expired_ids(
    times: Mapping[int, int],
    consumers: Mapping[str, int],
    *,
    retain_min: int,
    retain_max: int | None,
    older_than_millis: int,
    expire_limit: int,
    now_millis: int,
) -> list[int]:
    """Which snapshots an expiry removes, from Paimon's rules (``times``: id -> timeMillis)."""
    if not times:
        return []
    latest, earliest = max(times), min(times)
    lowest_kept = earliest if retain_max is None else max(latest - retain_max + 1, earliest)
    max_exclusive = latest - retain_min + 1
    if consumers:
        max_exclusive = min(max_exclusive, min(consumers.values()))
    max_exclusive = min(max_exclusive, earliest + expire_limit)
    end = max_exclusive
    threshold = now_millis - older_than_millis
    for snapshot_id in range(lowest_kept, max_exclusive):
        successor = snapshot_id + 1
        if successor not in times or times[successor] >= threshold:
            end = snapshot_id
            break
    return [i for i in sorted(times) if earliest <= i < end]
