"""Triggers that wait for table snapshots: one for a deferred sensor, one for an Asset watcher.

* :class:`LakeformatSnapshotTrigger` (a ``BaseTrigger``): what ``LakeformatSnapshotSensor`` defers to. It fires
  once, when the table has a snapshot newer than ``after_snapshot_id`` that passes the filters
  (``triggers/watch.py``), or with an error event.
* :class:`LakeformatSnapshotEventTrigger` (a ``BaseEventTrigger``): for an Airflow ``AssetWatcher``, so an Asset
  updates whenever ANY engine commits to the table (Spark, Flink, Trino, pyiceberg, this package): it runs in
  the triggerer for as long as a DAG schedules on the Asset and yields one event per matching commit (several
  commits between two polls make one event, for the newest, with the count). :func:`watched_table_asset`
  builds the Asset with its watcher.

Both work on Paimon and Iceberg tables alike (format detected, or ``table_format``), on any branch. Reads are
blocking file IO, so they run in a thread (``asyncio.to_thread``); the connection is fetched by id inside the
triggerer, so no storage or catalog secret is ever serialized with a trigger. ``iceberg_conn_id`` (a connection
of the official Iceberg provider as the catalog, ``hooks/lakeformat.py``) is serialized only when given, so
triggers serialized before it existed load as they were.

Example:
    >>> from airflow.sdk import DAG
    >>> events = watched_table_asset("s3://lake/wh/db.db/events", ignore_commit_kinds=["COMPACT"])  # doctest: +SKIP
    >>> with DAG("on_every_commit", schedule=[events]):  # doctest: +SKIP
    ...     ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_lakeformat.hooks.assets import table_asset_uri
from airflow_lakeformat.hooks.lakeformat import (
    DEFAULT_CONN_ID,
    LakeformatHook,
    choose_conn_id,
    normalize_format,
)
from airflow_lakeformat.triggers.polling import ErrorThrottle, first_match
from airflow_lakeformat.triggers.watch import (
    COMMIT_KINDS,
    ICEBERG_OPERATIONS,
    IcebergSnapshotWatch,
    SnapshotMatch,
    SnapshotWatch,
    describe_error,
    is_permanent,
    latest_snapshot_id,
    make_watch,
    normalize_commit_kinds,
    poll,
)

__all__ = [
    "COMMIT_KINDS",
    "ICEBERG_OPERATIONS",
    "IcebergSnapshotWatch",
    "LakeformatSnapshotEventTrigger",
    "LakeformatSnapshotTrigger",
    "SnapshotMatch",
    "SnapshotWatch",
    "describe_error",
    "is_permanent",
    "normalize_commit_kinds",
    "watched_table_asset",
]

DEFAULT_POLL_INTERVAL = 30.0
STATE_KEY = "lakeformatLastSnapshotId"


class _TableWait:
    """What both triggers hold (a mixin): the table, the connection, the filters, and opening the table."""

    table: str
    lakeformat_conn_id: str
    iceberg_conn_id: str | None
    ignore_commit_kinds: list[str]
    min_new_records: int
    poll_interval: float
    table_format: str | None
    branch: str

    def _set_wait(
        self,
        table: str,
        lakeformat_conn_id: str,
        ignore_commit_kinds: Sequence[str],
        min_new_records: int,
        poll_interval: float,
        table_format: str | None,
        branch: str,
        iceberg_conn_id: str | None,
    ) -> None:
        self.table = table
        self.lakeformat_conn_id = lakeformat_conn_id
        self.iceberg_conn_id = iceberg_conn_id or None
        self.ignore_commit_kinds = list(normalize_commit_kinds(ignore_commit_kinds))
        self.min_new_records = int(min_new_records)
        self.poll_interval = float(poll_interval)
        self.table_format = normalize_format(table_format)
        self.branch = branch or "main"

    def common_kwargs(self) -> dict[str, Any]:
        given = {"iceberg_conn_id": self.iceberg_conn_id} if self.iceberg_conn_id else {}
        return {
            "table": self.table,
            "lakeformat_conn_id": self.lakeformat_conn_id,
            **given,
            "ignore_commit_kinds": list(self.ignore_commit_kinds),
            "min_new_records": self.min_new_records,
            "poll_interval": self.poll_interval,
            "table_format": self.table_format,
            "branch": self.branch,
        }

    async def _open_table(self) -> Any:
        hook = await LakeformatHook.async_for_conn(
            self.lakeformat_conn_id, iceberg_conn_id=self.iceberg_conn_id
        )
        return await asyncio.to_thread(
            hook.open_lake_table, self.table, self.table_format, branch=self.branch
        )


class LakeformatSnapshotTrigger(_TableWait, BaseTrigger):
    """Fire once the table has a snapshot newer than ``after_snapshot_id`` that passes the filters.

    Yields one event: ``{"status": "success", "snapshot": {...}}`` with the matched snapshot (see
    :class:`SnapshotMatch`), or ``{"status": "error", "table": ..., "message": ...}``.

    :param table: full URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's catalog.
    :param after_snapshot_id: wait for a snapshot after this one (Iceberg: above it on the branch; 0: any).
    :param iceberg_conn_id: a connection of the official Iceberg provider as the catalog, instead of
        ``lakeformat_conn_id``.
    :param table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected).
    :param branch: the branch to watch (default ``main``).
    """

    def __init__(
        self,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        after_snapshot_id: int = 0,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        table_format: str | None = None,
        branch: str = "main",
        iceberg_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self._set_wait(
            table,
            lakeformat_conn_id,
            ignore_commit_kinds,
            min_new_records,
            poll_interval,
            table_format,
            branch,
            iceberg_conn_id,
        )
        self.after_snapshot_id = int(after_snapshot_id)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = self.common_kwargs()
        kwargs["after_snapshot_id"] = self.after_snapshot_id
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            table = await self._open_table()
        except Exception as exc:
            yield self._error(exc)
            return
        watch = make_watch(
            table.format, self.after_snapshot_id, self.ignore_commit_kinds, self.min_new_records, self.branch
        )
        try:
            match = await first_match(
                lambda: poll(watch, table), self.poll_interval, self.log, f"polling {table.uri}"
            )
        except Exception as exc:
            yield self._error(exc)
            return
        yield TriggerEvent({"status": "success", "snapshot": match.to_json()})

    def _error(self, exc: BaseException) -> TriggerEvent:
        return TriggerEvent({"status": "error", "table": self.table, "message": describe_error(exc)})


class LakeformatSnapshotEventTrigger(_TableWait, BaseEventTrigger):
    """For an ``AssetWatcher``: yield an event for every new snapshot of the table that passes the filters.

    The first poll starts after ``after_snapshot_id`` when given, else after what the Asset's state store
    remembers from an earlier run of this watcher (the triggerer injects it), else after the table's latest
    snapshot at that poll: only commits made while the watcher runs count. Each event's payload is
    ``{"status": "success", "snapshot": {...}}`` (:class:`SnapshotMatch`); Airflow records it as the Asset
    event's extra ``payload``. A table that does not exist yet or a failing store is waited out (logged at most
    every 5 minutes), never reported as an event.

    :param table: full URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's catalog.
    :param after_snapshot_id: report snapshots after this one; None: after the latest when the watcher starts.
    """

    def __init__(
        self,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        table_format: str | None = None,
        branch: str = "main",
        after_snapshot_id: int | None = None,
        iceberg_conn_id: str | None = None,
    ) -> None:
        super().__init__()
        self._set_wait(
            table,
            lakeformat_conn_id,
            ignore_commit_kinds,
            min_new_records,
            poll_interval,
            table_format,
            branch,
            iceberg_conn_id,
        )
        self.after_snapshot_id = None if after_snapshot_id is None else int(after_snapshot_id)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs = self.common_kwargs()
        kwargs["after_snapshot_id"] = self.after_snapshot_id
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    async def _remembered(self) -> int | None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return None
        try:
            value = await store.aget(STATE_KEY)
        except Exception as exc:  # no store access (e.g. no watched Asset): start after the latest
            self.log.info("no remembered snapshot for %s (%s)", self.table, exc)
            return None
        return int(value) if isinstance(value, (int, str)) and str(value).lstrip("-").isdigit() else None

    async def _remember(self, snapshot_id: int) -> None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return
        try:
            await store.aset(STATE_KEY, snapshot_id)
        except Exception as exc:
            self.log.warning("could not remember snapshot %s of %s (%s)", snapshot_id, self.table, exc)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        watch = None
        errors = ErrorThrottle(self.log, f"watching {self.table}")
        while True:
            try:
                if watch is None:
                    table = await self._open_table()
                    after = self.after_snapshot_id
                    if after is None:
                        after = await self._remembered()
                    if after is None:
                        after = await asyncio.to_thread(latest_snapshot_id, table, self.branch)
                    watch = make_watch(
                        table.format, after, self.ignore_commit_kinds, self.min_new_records, self.branch
                    )
                    self.log.info("watching %s for commits after snapshot %s", table.uri, after)
                match = await asyncio.to_thread(poll, watch, table)
            except Exception as exc:
                errors.failed(exc)
                match = None
            if match is not None:
                yield TriggerEvent({"status": "success", "snapshot": match.to_json()})
                await self._remember(match.snapshot_id)
                watch.restart()  # type: ignore[union-attr]
            await asyncio.sleep(self.poll_interval)


def watched_table_asset(
    table: str,
    *,
    lakeformat_conn_id: str = DEFAULT_CONN_ID,
    iceberg_conn_id: str | None = None,
    table_format: str | None = None,
    branch: str = "main",
    ignore_commit_kinds: Sequence[str] = (),
    min_new_records: int = 0,
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    asset_uri: str | None = None,
    watcher_name: str | None = None,
) -> Any:
    """The table's Asset with an ``AssetWatcher`` that records an event for every matching commit.

    Args:
        table: full URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's catalog.
        lakeformat_conn_id: the connection; read by the trigger when it runs, never when the DAG is parsed.
        iceberg_conn_id: instead, a connection of the official Iceberg provider (type ``iceberg``), read the
            same way; the Asset is ``lakeformat://<iceberg_conn_id>/<namespace>.<table>``.
        table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected).
        branch: the branch to watch.
        ignore_commit_kinds: e.g. ``["COMPACT"]`` (also ignores Iceberg ``REPLACE``).
        min_new_records: records an event needs (summed over the commits since the previous event).
        poll_interval: seconds between looks at the table.
        asset_uri: the Asset's URI (default: ``lakeformat://<conn_id>/<name>`` for a name the connection
            places, the root URI for a full URI, as the write and commit operators name it).
        watcher_name: the watcher's unique name (default: from the Asset's URI and the branch).

    Returns:
        An ``airflow.sdk.Asset`` to put in a DAG's ``schedule``.

    Example:
        >>> asset = watched_table_asset("analytics.events", ignore_commit_kinds=["COMPACT"])  # doctest: +SKIP
    """
    from airflow.sdk import Asset, AssetWatcher

    conn_id = choose_conn_id(lakeformat_conn_id, iceberg_conn_id)
    uri = asset_uri or table_asset_uri(table, conn_id)  # reads no connection
    trigger = LakeformatSnapshotEventTrigger(
        table=table,
        lakeformat_conn_id=lakeformat_conn_id,
        iceberg_conn_id=iceberg_conn_id,
        ignore_commit_kinds=ignore_commit_kinds,
        min_new_records=min_new_records,
        poll_interval=poll_interval,
        table_format=table_format,
        branch=branch,
    )
    name = watcher_name or f"lakeformat-commits:{uri}" + ("" if branch == "main" else f"@{branch}")
    return Asset(uri=uri, watchers=[AssetWatcher(name=name, trigger=trigger)])
