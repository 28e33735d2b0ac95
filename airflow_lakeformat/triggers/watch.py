"""The waiting rule the snapshot sensor and its triggers share: a newer snapshot that passes the filters.

:func:`make_watch` gives a watch for the table's format; ``watch.poll(table)`` reads what was committed since
the previous poll and returns a :class:`SnapshotMatch` or None:

* **Paimon** (:class:`SnapshotWatch`): snapshot ids count up, so "after ``after_snapshot_id``" is every id above
  it on the opened branch (expired ones are skipped: their records can no longer be counted).
* **Iceberg** (:class:`IcebergSnapshotWatch`): snapshot ids are random, so "after" means the snapshots on the
  branch's ancestry above the baseline: the branch head, its parent, and so on, until the baseline, a
  snapshot already examined, or one older than the baseline (a rollback does not count old snapshots as new).

Both skip the ignored commit kinds (Paimon's ``commitKind``; Iceberg's ``operation`` upper-cased: ``APPEND``,
``REPLACE``, ``OVERWRITE``, ``DELETE``; ``COMPACT`` and ``REPLACE`` name the same thing, a rewrite that adds
no data, so either ignores both), add up the net records (Paimon ``deltaRecordCount``; Iceberg
``added-records - deleted-records``) and match once at least ``min_new_records`` came in. The match is the
newest such snapshot.

Example:
    >>> watch = make_watch("paimon", after_snapshot_id=3, ignore_commit_kinds=["COMPACT"])  # doctest: +SKIP
    >>> watch.poll(table)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.hooks.lakeformat import LakeformatConnectionError

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.paimon.snapshot import Snapshot
    from airflow_lakeformat.core.paimon.table import Table

# Paimon's commit kinds (core.snapshot.CommitKind), spelled out so that DAG files can be parsed without
# importing the core; a test keeps the two in step.
COMMIT_KINDS = ("APPEND", "COMPACT", "OVERWRITE", "ANALYZE")
# Iceberg's snapshot operations (spec "Snapshots"), upper-cased.
ICEBERG_OPERATIONS = ("APPEND", "REPLACE", "OVERWRITE", "DELETE")
# A rewrite that adds no data: Paimon calls it COMPACT, Iceberg REPLACE. Ignoring one ignores both.
_SAME_KIND = {"COMPACT": "REPLACE", "REPLACE": "COMPACT"}


def normalize_commit_kinds(kinds: Sequence[str] | str | None) -> tuple[str, ...]:
    """Upper-cased, validated commit kinds of either format (a single kind may be given as a string)."""
    if kinds is None:
        return ()
    values = [kinds] if isinstance(kinds, str) else list(kinds)
    result = tuple(str(k).strip().upper() for k in values)
    unknown = sorted(set(result) - set(COMMIT_KINDS) - set(ICEBERG_OPERATIONS))
    if unknown:
        raise ValueError(
            f"unknown commit kind(s) {unknown}; Paimon's kinds are {', '.join(COMMIT_KINDS)}, Iceberg's "
            f"operations {', '.join(ICEBERG_OPERATIONS)}"
        )
    return result


def _ignored(kinds: Sequence[str]) -> frozenset[str]:
    normalized = normalize_commit_kinds(kinds)
    return frozenset([*normalized, *(_SAME_KIND[k] for k in normalized if k in _SAME_KIND)])


@dataclass(frozen=True)
class SnapshotMatch:
    """The snapshot a wait ended on, and what was counted to get there."""

    table: str
    after_snapshot_id: int
    snapshot_id: int
    commit_kind: str
    time_millis: int
    delta_record_count: int | None
    total_record_count: int | None
    new_records: int
    snapshots_matched: int
    format: str = "paimon"
    branch: str = "main"

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "format": self.format,
            "branch": self.branch,
            "afterSnapshotId": self.after_snapshot_id,
            "id": self.snapshot_id,
            "commitKind": self.commit_kind,
            "timeMillis": self.time_millis,
            "deltaRecordCount": self.delta_record_count,
            "totalRecordCount": self.total_record_count,
            "newRecords": self.new_records,
            "snapshotsMatched": self.snapshots_matched,
        }


class _Watch:
    """The filters and counters both formats' watches keep between polls."""

    format: str

    def __init__(
        self,
        after_snapshot_id: int,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        branch: str = "main",
    ) -> None:
        self.after_snapshot_id = after_snapshot_id
        self.ignore_commit_kinds = _ignored(ignore_commit_kinds)
        self.min_new_records = min_new_records
        self.branch = branch
        self.examined = after_snapshot_id  # the newest snapshot (Iceberg: branch head) the last poll saw
        self.new_records = 0
        self.matched = 0
        self.newest: Any = None

    def restart(self) -> None:
        """Count afresh from what was last examined (after a match was reported, for an Asset watcher)."""
        self.after_snapshot_id = self.examined
        self.new_records = 0
        self.matched = 0
        self.newest = None


class SnapshotWatch(_Watch):
    """Incremental check of a Paimon table for a snapshot newer than ``after_snapshot_id`` that passes the filters."""

    format = "paimon"
    newest: Snapshot | None

    def baseline(self, table: Table) -> int:
        """The id a wait starts after: the latest snapshot of the opened branch (0: none)."""
        return table.snapshot_manager.latest_snapshot_id() or 0

    def poll(self, table: Table) -> SnapshotMatch | None:
        """Read the snapshots committed since the last poll; the match, or None to keep waiting."""
        from airflow_lakeformat.core.errors import SnapshotNotFoundError

        manager = table.snapshot_manager
        latest = manager.latest_snapshot_id()
        if latest is not None and latest > self.examined:
            first = self.examined + 1
            earliest = manager.earliest_snapshot_id()
            if earliest is not None and earliest > first:
                first = earliest  # the ones in between were expired; their records can no longer be counted

            def read(snapshot_id: int) -> Snapshot | None:
                try:
                    return manager.snapshot(snapshot_id)
                except SnapshotNotFoundError:
                    return None  # expired between the listing and the read

            for snapshot in table.parallel_map(read, list(range(first, latest + 1))):
                if snapshot is None or snapshot.commit_kind.value in self.ignore_commit_kinds:
                    continue
                self.new_records += snapshot.delta_record_count or 0
                self.matched += 1
                self.newest = snapshot
            self.examined = latest
        if self.newest is None or self.new_records < self.min_new_records:
            return None
        return SnapshotMatch(
            table=table.uri,
            after_snapshot_id=self.after_snapshot_id,
            snapshot_id=self.newest.id,
            commit_kind=self.newest.commit_kind.value,
            time_millis=self.newest.time_millis,
            delta_record_count=self.newest.delta_record_count,
            total_record_count=self.newest.total_record_count,
            new_records=self.new_records,
            snapshots_matched=self.matched,
            branch=self.branch,
        )


def _summary_int(snapshot: IcebergSnapshot, key: str) -> int | None:
    summary = snapshot.summary
    value = summary.get(key) if summary is not None else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def iceberg_kind(snapshot: IcebergSnapshot) -> str:
    """An Iceberg snapshot's operation as a commit kind (``APPEND``, ``REPLACE``, ...)."""
    return snapshot.summary.operation.value.upper() if snapshot.summary is not None else "APPEND"


def iceberg_delta(snapshot: IcebergSnapshot) -> int:
    """Net records a snapshot brought: ``added-records - deleted-records`` of its summary."""
    return (_summary_int(snapshot, "added-records") or 0) - (_summary_int(snapshot, "deleted-records") or 0)


class IcebergSnapshotWatch(_Watch):
    """Incremental check of an Iceberg table's branch for snapshots above ``after_snapshot_id`` (0: none)."""

    format = "iceberg"
    newest: IcebergSnapshot | None

    def __init__(
        self,
        after_snapshot_id: int,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        branch: str = "main",
    ) -> None:
        super().__init__(after_snapshot_id, ignore_commit_kinds, min_new_records, branch)
        self.seen: set[int] = set()
        self.baseline_ms: int | None = None

    def baseline(self, table: IcebergTable) -> int:
        """The id a wait starts after: the branch head (0: none)."""
        ref = table.metadata.refs.get(self.branch)
        return ref.snapshot_id if ref is not None else 0

    def poll(self, table: IcebergTable) -> SnapshotMatch | None:
        """Reload the table, walk the branch from its head down to what was examined; the match or None."""
        table.refresh()
        metadata = table.metadata
        if self.baseline_ms is None and self.after_snapshot_id:
            baseline = metadata.snapshot_by_id(self.after_snapshot_id)
            self.baseline_ms = baseline.timestamp_ms if baseline is not None else None
        ref = metadata.refs.get(self.branch)
        head = ref.snapshot_id if ref is not None else None
        if head is not None and head != self.examined:
            fresh: list[IcebergSnapshot] = []
            snapshot_id: int | None = head
            while snapshot_id is not None and snapshot_id not in self.seen:
                if snapshot_id in (self.examined, self.after_snapshot_id):
                    break
                snapshot = metadata.snapshot_by_id(snapshot_id)
                if snapshot is None:  # expired: what lies below can no longer be read
                    break
                if self.baseline_ms is not None and snapshot.timestamp_ms < self.baseline_ms:
                    break  # older than the baseline: the branch was rolled back, nothing new below
                fresh.append(snapshot)
                snapshot_id = snapshot.parent_snapshot_id
            for snapshot in reversed(fresh):  # oldest first, so the newest match ends up in ``newest``
                self.seen.add(snapshot.snapshot_id)
                if iceberg_kind(snapshot) in self.ignore_commit_kinds:
                    continue
                self.new_records += iceberg_delta(snapshot)
                self.matched += 1
                self.newest = snapshot
            self.examined = head
        if self.newest is None or self.new_records < self.min_new_records:
            return None
        return SnapshotMatch(
            table=table.name,
            after_snapshot_id=self.after_snapshot_id,
            snapshot_id=self.newest.snapshot_id,
            commit_kind=iceberg_kind(self.newest),
            time_millis=self.newest.timestamp_ms,
            delta_record_count=iceberg_delta(self.newest),
            total_record_count=_summary_int(self.newest, "total-records"),
            new_records=self.new_records,
            snapshots_matched=self.matched,
            format="iceberg",
            branch=self.branch,
        )


Watch = SnapshotWatch | IcebergSnapshotWatch


def make_watch(
    table_format: str,
    after_snapshot_id: int,
    ignore_commit_kinds: Sequence[str] = (),
    min_new_records: int = 0,
    branch: str = "main",
) -> Watch:
    """The watch for a table of ``table_format`` (``"paimon"`` or ``"iceberg"``)."""
    # Format branch: the one place the waiting rule picks its per-format strategy (snapshot ids count up in
    # Paimon, Iceberg's are random and need the branch's ancestry).
    cls = IcebergSnapshotWatch if table_format == "iceberg" else SnapshotWatch
    return cls(after_snapshot_id, ignore_commit_kinds, min_new_records, branch)


def latest_snapshot_id(table: Any, branch: str = "main") -> int:
    """The id a wait starts after: the latest snapshot (Paimon) or the branch head (Iceberg); 0 for none."""
    return make_watch(table.format, 0, branch=branch).baseline(table.native)


def poll(watch: Watch, table: Any) -> SnapshotMatch | None:
    """One poll of the facade ``table`` (``core/tables.py``) with a watch of its format (``make_watch``)."""
    return watch.poll(table.native)


def describe_error(exc: BaseException) -> str:
    """One line for a task log: our typed errors already name the file and the problem."""
    from airflow_lakeformat.core.errors import LakeformatError

    if isinstance(exc, (LakeformatError, LakeformatConnectionError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def is_permanent(exc: BaseException) -> bool:
    """Errors about the table or the connection settings, which waiting cannot cure."""
    from airflow_lakeformat.core.errors import LakeformatError

    return isinstance(exc, (LakeformatError, LakeformatConnectionError, ValueError))
