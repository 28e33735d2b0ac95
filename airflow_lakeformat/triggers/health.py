"""``LakeformatHealthTrigger``: fire when a table's health crosses a threshold (small files >= 500, a score
under 60, a recommended operation), for a deferred sensor or an Airflow 3 ``AssetWatcher``.

The rule is ``triggers/health_watch.py``'s :class:`HealthRule`, which ``LakeformatHealthSensor`` pokes with
too. Every ``poll_interval`` seconds the trigger computes the table's health (metadata only; in a thread,
``asyncio.to_thread``, as it is blocking file IO) and evaluates the conditions. The connection is fetched by
id inside the triggerer, so no storage or catalog secret is ever serialized with the trigger.

It is a ``BaseEventTrigger``, which is what an ``AssetWatcher`` requires and still a ``BaseTrigger`` for
``defer()``. Its two ways of running:

* ``fire_once=True`` (what the sensor defers to): one event, at the first poll that matches, then the
  trigger ends; or an error event for a table problem (missing table, corrupt metadata) or after
  ``triggers/polling.py``'s ``MAX_CONSECUTIVE_TRANSIENT_ERRORS`` failed polls in a row.
* ``fire_once=False`` (an ``AssetWatcher``): it runs for as long as a DAG schedules on the Asset and fires
  when the table CROSSES: at the first poll that matches, then not again until a poll finds the table back
  under the thresholds (maintenance fixed it), so one degradation starts one maintenance run, not one per
  poll. ``refire_after`` (seconds) fires again while the table stays over for that long (maintenance that
  failed, or a DAG that was paused). Whether it is waiting for the table to recover, and when it last fired,
  is kept in the Asset's state store, so a triggerer restart does not fire again for the same degradation.
  Failing polls are logged (at most every 5 minutes) and waited out, never reported as events.

The event's payload, in both ways: ``{"status": "success", "match": {"table", "format", "snapshotId",
"score", "crossed": [{"condition", "metric", "comparison", "threshold", "value"}], "operations", "summary",
"health": {...}}}`` (:class:`HealthMatch`; ``health`` is the health document without its per-partition
rows); Airflow records it as the Asset event's extra ``payload``. An error event is ``{"status": "error",
"table", "message"}``.

Example:
    >>> from airflow.sdk import DAG
    >>> asset = health_watched_asset("demo.events", {"smallFiles": 500})  # doctest: +SKIP
    >>> with DAG("compact_when_needed", schedule=[asset]):  # doctest: +SKIP
    ...     ...
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_lakeformat.core.health.policy import HealthPolicy
from airflow_lakeformat.hooks.assets import table_asset_uri
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatHook, normalize_format
from airflow_lakeformat.triggers.health_watch import HealthMatch, HealthRule
from airflow_lakeformat.triggers.polling import ErrorThrottle, first_match
from airflow_lakeformat.triggers.watch import describe_error

__all__ = ["HealthMatch", "HealthRule", "LakeformatHealthTrigger", "health_asset_uri", "health_watched_asset"]

DEFAULT_POLL_INTERVAL = 300.0
STATE_KEY = "lakeformatHealthWatch"
#: The URI scheme of the Assets a health watcher updates (``x-``: a scheme Airflow leaves as it is).
HEALTH_SCHEME = "x-lakeformat-health"


class LakeformatHealthTrigger(BaseEventTrigger):
    """Fire when the table's health matches the conditions (see the module docstring for both ways).

    :param table: full URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's catalog.
    :param conditions: e.g. ``{"smallFiles": 500}``, ``{"score_below": 60}``, ``{"operations": ["compact_data"]}``
        (``triggers/health_watch.py``); validated here, so a bad one fails when the DAG is parsed.
    :param lakeformat_conn_id: the ``lakeformat`` connection, read in the triggerer.
    :param require: ``"any"`` crossed condition fires (default), or ``"all"`` of them.
    :param poll_interval: seconds between health computations.
    :param table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected).
    :param fire_once: one event then stop (a deferred sensor); False: fire on every crossing (an AssetWatcher).
    :param refire_after: an AssetWatcher fires again after this many seconds while the table stays over
        (None: only after it recovered).
    :param policy: the health policy's document (a mapping, as ``HealthPolicy.document``; checked here) that
        the table is assessed with, or None (its properties and the defaults). Serialized with the trigger,
        so the triggerer reads no file or Variable.
    :param policy_source: what messages and the health document call that policy (a file, a Variable).
    """

    def __init__(
        self,
        table: str,
        conditions: Mapping[str, Any],
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        require: str = "any",
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        table_format: str | None = None,
        fire_once: bool = False,
        refire_after: float | None = None,
        policy: Mapping[str, Any] | None = None,
        policy_source: str | None = None,
    ) -> None:
        super().__init__()
        self.policy = None if policy is None else dict(policy)
        self.policy_source = policy_source
        checked = None if policy is None else HealthPolicy.from_mapping(policy, policy_source or "<mapping>")
        self.rule = HealthRule(conditions, require, policy=checked)
        self.table = table
        self.conditions = dict(conditions)
        self.lakeformat_conn_id = lakeformat_conn_id
        self.require = require
        self.poll_interval = float(poll_interval)
        self.table_format = normalize_format(table_format)
        self.fire_once = bool(fire_once)
        self.refire_after = None if refire_after is None else float(refire_after)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", {
            "table": self.table,
            "conditions": dict(self.conditions),
            "lakeformat_conn_id": self.lakeformat_conn_id,
            "require": self.require,
            "poll_interval": self.poll_interval,
            "table_format": self.table_format,
            "fire_once": self.fire_once,
            "refire_after": self.refire_after,
            # only when given, so triggers serialized before policies existed load as they were
            **(
                {"policy": self.policy, "policy_source": self.policy_source}
                if self.policy is not None
                else {}
            ),
        }

    async def _open_table(self) -> Any:
        hook = await LakeformatHook.async_for_conn(self.lakeformat_conn_id)
        return await asyncio.to_thread(hook.open_lake_table, self.table, self.table_format)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        events = self._run_once() if self.fire_once else self._watch()
        async for event in events:
            yield event

    async def _run_once(self) -> AsyncIterator[TriggerEvent]:
        """One event: the first match, or an error that waiting cannot cure (``triggers/polling.py``)."""
        try:
            table = await self._open_table()
            match = await first_match(
                lambda: self.rule.poll(table), self.poll_interval, self.log, f"health of {self.table}"
            )
        except Exception as exc:
            yield self._error(exc)
            return
        yield _success(match)

    async def _watch(self) -> AsyncIterator[TriggerEvent]:
        """An event each time the table crosses (again after ``refire_after`` while it stays over)."""
        state = await self._remembered()
        armed = bool(state.get("armed", True))
        fired_ms = int(state.get("firedMs") or 0)
        table = None
        errors = ErrorThrottle(self.log, f"health of {self.table}")
        while True:
            try:
                if table is None:
                    table = await self._open_table()
                    self.log.info("watching the health of %s for %s", self.table, self.conditions)
                match = await asyncio.to_thread(self.rule.poll, table)
            except Exception as exc:
                errors.failed(exc)
                await asyncio.sleep(self.poll_interval)
                continue
            now_ms = int(time.time() * 1000)
            if match is None:
                if not armed:
                    self.log.info("%s is back under the thresholds; the next crossing fires", self.table)
                    armed = True
                    await self._remember({"armed": True, "firedMs": fired_ms})
            elif armed or self._refire_due(fired_ms, now_ms):
                yield _success(match)
                armed, fired_ms = False, now_ms
                await self._remember({"armed": False, "firedMs": fired_ms})
            await asyncio.sleep(self.poll_interval)

    def _refire_due(self, fired_ms: int, now_ms: int) -> bool:
        return self.refire_after is not None and now_ms - fired_ms >= self.refire_after * 1000

    async def _remembered(self) -> dict[str, Any]:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return {}
        try:
            value = await store.aget(STATE_KEY)
        except Exception as exc:  # no store access: start armed
            self.log.info("no remembered health watch state for %s (%s)", self.table, exc)
            return {}
        return dict(value) if isinstance(value, Mapping) else {}

    async def _remember(self, state: dict[str, Any]) -> None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return
        try:
            await store.aset(STATE_KEY, state)
        except Exception as exc:
            self.log.warning("could not remember the health watch state of %s (%s)", self.table, exc)

    def _error(self, exc: BaseException) -> TriggerEvent:
        return TriggerEvent({"status": "error", "table": self.table, "message": describe_error(exc)})


def _success(match: HealthMatch) -> TriggerEvent:
    return TriggerEvent({"status": "success", "match": match.to_json()})


def health_asset_uri(table: str, lakeformat_conn_id: str = DEFAULT_CONN_ID) -> str:
    """The URI of the Asset a health watcher of ``table`` updates (no IO).

    It is not the table's own Asset (``hooks/assets.py``), which the write operators update on every commit:
    a DAG scheduled on it would run after each write.

    Example:
        >>> health_asset_uri("demo.events", "lake")
        'x-lakeformat-health:lakeformat://lake/demo.events'
    """
    return f"{HEALTH_SCHEME}:{table_asset_uri(table, lakeformat_conn_id)}"


def policy_kwargs(policy: HealthPolicy | None) -> dict[str, Any]:
    """The trigger's ``policy`` and ``policy_source`` for a loaded policy (none for None)."""
    return {} if policy is None else {"policy": policy.document, "policy_source": policy.source}


def health_watched_asset(
    table: str,
    conditions: Mapping[str, Any],
    *,
    lakeformat_conn_id: str = DEFAULT_CONN_ID,
    require: str = "any",
    poll_interval: float = DEFAULT_POLL_INTERVAL,
    table_format: str | None = None,
    refire_after: float | None = None,
    asset_uri: str | None = None,
    watcher_name: str | None = None,
    policy: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> Any:
    """An Asset with an ``AssetWatcher`` that records an event each time the table's health crosses.

    Args:
        table: full URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's catalog.
        conditions: what to watch for, e.g. ``{"smallFiles": 500}`` (``triggers/health_watch.py``).
        lakeformat_conn_id: the connection; read by the trigger when it runs, never when the DAG is parsed.
        require: ``"any"`` or ``"all"`` of the conditions.
        poll_interval: seconds between health computations.
        table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected).
        refire_after: fire again after this many seconds while the table stays over (None: after it recovered).
        asset_uri: the Asset's URI (default :func:`health_asset_uri`).
        watcher_name: the watcher's unique name (default: the Asset's URI).
        policy: a health policy (a YAML/JSON file's path, its text, or a mapping), read when the DAG is
            parsed and serialized with the trigger; None: the table's properties and the defaults.

    Returns:
        An ``airflow.sdk.Asset`` to put in a DAG's ``schedule``.

    Raises:
        UsageError: a bad condition, naming its key.
        PolicyError: an invalid policy, naming the key.

    Example:
        >>> asset = health_watched_asset("demo.events", {"smallFiles": 500}, poll_interval=600)  # doctest: +SKIP
    """
    from airflow.sdk import Asset, AssetWatcher

    uri = asset_uri or health_asset_uri(table, lakeformat_conn_id)  # reads no connection
    trigger = LakeformatHealthTrigger(
        table=table,
        conditions=conditions,
        lakeformat_conn_id=lakeformat_conn_id,
        require=require,
        poll_interval=poll_interval,
        table_format=table_format,
        refire_after=refire_after,
        **policy_kwargs(None if policy is None else HealthPolicy.load(policy)),
    )
    return Asset(uri=uri, watchers=[AssetWatcher(name=watcher_name or uri, trigger=trigger)])
