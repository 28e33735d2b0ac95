"""``LakeformatSnapshotTrigger``: wait in the triggerer for a table snapshot newer than a given id.

The waiting rule lives in :class:`SnapshotWatch` so that the sensor's poke mode and the trigger apply
exactly the same one: look at every snapshot with an id above ``after_snapshot_id``, skip the commit kinds
to ignore, and match once at least one snapshot is left whose ``deltaRecordCount`` values add up to
``min_new_records`` (a net count: an OVERWRITE that removes rows counts negative). The match is the newest
such snapshot. A watch remembers how far it has read, so each poll reads only snapshots committed since.

Reads are blocking file IO, so the trigger runs them in a thread (``asyncio.to_thread``); the connection
is fetched by id inside the triggerer, so no storage secret is ever serialized with the trigger.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatConnectionError, LakeformatHook

if TYPE_CHECKING:
    from airflow_lakeformat.core.paimon.snapshot import Snapshot
    from airflow_lakeformat.core.paimon.table import Table

# Paimon's commit kinds (core.snapshot.CommitKind), spelled out so that DAG files can be parsed without
# importing the core; a test keeps the two in step.
COMMIT_KINDS = ("APPEND", "COMPACT", "OVERWRITE", "ANALYZE")
DEFAULT_POLL_INTERVAL = 30.0
# Errors that are not about the table itself (a dropped connection, a throttled request) are retried for
# this many consecutive polls before the trigger gives up.
MAX_CONSECUTIVE_TRANSIENT_ERRORS = 3


def normalize_commit_kinds(kinds: Sequence[str] | str | None) -> tuple[str, ...]:
    """Upper-cased, validated commit kinds (a single kind may be given as a string)."""
    if kinds is None:
        return ()
    values = [kinds] if isinstance(kinds, str) else list(kinds)
    result = tuple(str(k).strip().upper() for k in values)
    unknown = sorted(set(result) - set(COMMIT_KINDS))
    if unknown:
        raise ValueError(f"unknown commit kind(s) {unknown}; Paimon's kinds are {', '.join(COMMIT_KINDS)}")
    return result


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

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "afterSnapshotId": self.after_snapshot_id,
            "id": self.snapshot_id,
            "commitKind": self.commit_kind,
            "timeMillis": self.time_millis,
            "deltaRecordCount": self.delta_record_count,
            "totalRecordCount": self.total_record_count,
            "newRecords": self.new_records,
            "snapshotsMatched": self.snapshots_matched,
        }


class SnapshotWatch:
    """Incremental check for a snapshot newer than ``after_snapshot_id`` that passes the filters."""

    def __init__(
        self, after_snapshot_id: int, ignore_commit_kinds: Sequence[str] = (), min_new_records: int = 0
    ) -> None:
        self.after_snapshot_id = after_snapshot_id
        self.ignore_commit_kinds = frozenset(normalize_commit_kinds(ignore_commit_kinds))
        self.min_new_records = min_new_records
        self.examined = after_snapshot_id
        self.new_records = 0
        self.matched = 0
        self.newest: Snapshot | None = None

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
        )


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


class LakeformatSnapshotTrigger(BaseTrigger):
    """Fire once the table has a snapshot newer than ``after_snapshot_id`` that passes the filters.

    Yields one event: ``{"status": "success", "snapshot": {...}}`` with the matched snapshot (see
    :class:`SnapshotMatch`), or ``{"status": "error", "message": ...}``.
    """

    def __init__(
        self,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        after_snapshot_id: int = 0,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> None:
        super().__init__()
        self.table = table
        self.lakeformat_conn_id = lakeformat_conn_id
        self.after_snapshot_id = int(after_snapshot_id)
        self.ignore_commit_kinds = list(normalize_commit_kinds(ignore_commit_kinds))
        self.min_new_records = int(min_new_records)
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table": self.table,
                "lakeformat_conn_id": self.lakeformat_conn_id,
                "after_snapshot_id": self.after_snapshot_id,
                "ignore_commit_kinds": list(self.ignore_commit_kinds),
                "min_new_records": self.min_new_records,
                "poll_interval": self.poll_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            hook = await LakeformatHook.async_for_conn(self.lakeformat_conn_id)
            table = await asyncio.to_thread(hook.open_table, self.table)
        except Exception as exc:
            yield self._error(exc)
            return
        watch = SnapshotWatch(self.after_snapshot_id, self.ignore_commit_kinds, self.min_new_records)
        failures = 0
        while True:
            try:
                match = await asyncio.to_thread(watch.poll, table)
                failures = 0
            except Exception as exc:
                failures += 1
                if is_permanent(exc) or failures >= MAX_CONSECUTIVE_TRANSIENT_ERRORS:
                    yield self._error(exc)
                    return
                self.log.warning("polling %s failed (%s); retrying", table.uri, describe_error(exc))
                match = None
            if match is not None:
                yield TriggerEvent({"status": "success", "snapshot": match.to_json()})
                return
            await asyncio.sleep(self.poll_interval)

    def _error(self, exc: BaseException) -> TriggerEvent:
        return TriggerEvent({"status": "error", "table": self.table, "message": describe_error(exc)})
