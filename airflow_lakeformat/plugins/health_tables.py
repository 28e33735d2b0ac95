"""Which tables the "Table health" page shows, and their health documents.

Algorithm:

1. The connections: the Airflow option ``[lakeformat] health_ui_conn_ids`` (comma-separated ids) when it is
   set; otherwise every connection of type ``lakeformat`` in the metadata database plus those defined by
   ``AIRFLOW_CONN_*`` environment variables of that type (sorted, at most :data:`MAX_CONNECTIONS`).
2. The tables of one connection (at most :data:`MAX_TABLES`, the page stays bounded on a large warehouse):
   the connection's extra ``health_tables`` (a list, or names separated by commas or new lines) when given;
   else, for a connection whose host is one table's root, that table; else the warehouse is listed one level
   deep the way the warehouse layout places tables (``<warehouse>/<db>.db/<table>``), each directory kept
   when :func:`~airflow_lakeformat.core.formats.detect_format` says it is a Paimon or Iceberg table; a
   connection with an Iceberg catalog and no host lists the namespaces named by the extra
   ``health_namespaces`` through the catalog.
3. Each table's document: ``hook.open_lake_table(name).health().to_json()`` (metadata only), kept for
   :data:`CACHE_SECONDS` per (connection, table) so a page reload does not re-read every table; a table that
   cannot be read becomes an entry with its error message instead of failing the page.

Example:
    >>> for entry in collect_entries():  # doctest: +SKIP
    ...     print(entry.conn_id, entry.table, entry.document and entry.document["score"])
    lakeformat_default demo.events 85
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from airflow_lakeformat.core.errors import TableNotFoundError
from airflow_lakeformat.core.formats import detect_format
from airflow_lakeformat.core.io import FileIO
from airflow_lakeformat.hooks.lakeformat import CONN_TYPE, LakeformatHook

MAX_CONNECTIONS = 20
MAX_TABLES = 50
CACHE_SECONDS = 30.0
CONFIG_SECTION = "lakeformat"
CONFIG_CONN_IDS = "health_ui_conn_ids"
EXTRA_TABLES = "health_tables"
EXTRA_NAMESPACES = "health_namespaces"


@dataclass(frozen=True)
class HealthEntry:
    """One row of the page: a table of a connection, its health document or why there is none."""

    conn_id: str
    table: str
    document: dict[str, Any] | None = None
    error: str | None = None


def _split_names(value: Any) -> list[str]:
    """A list, or a text of names separated by commas or new lines (JSON lists accepted too)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = text.strip("[]")
        if isinstance(value, str):
            return [n.strip() for n in value.replace("\n", ",").split(",") if n.strip()]
    return [str(n).strip() for n in value if str(n).strip()]


def configured_conn_ids() -> list[str]:
    """The ids of the connections the page shows (step 1 of the module's algorithm)."""
    from airflow.configuration import conf

    named = _split_names(conf.get(CONFIG_SECTION, CONFIG_CONN_IDS, fallback="") or "")
    if named:
        return named[:MAX_CONNECTIONS]
    return sorted(set(_database_conn_ids()) | set(_environment_conn_ids()))[:MAX_CONNECTIONS]


def _database_conn_ids() -> list[str]:
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)
        return [str(conn_id) for conn_id in session.scalars(query)]


def _environment_conn_ids() -> list[str]:
    """``AIRFLOW_CONN_<ID>`` variables whose connection is of type ``lakeformat`` (URI or JSON form)."""
    found = []
    for key, value in os.environ.items():
        if not key.startswith("AIRFLOW_CONN_") or not value:
            continue
        text = value.strip()
        if text.startswith("{"):
            try:
                is_ours = json.loads(text).get("conn_type") == CONN_TYPE
            except (json.JSONDecodeError, AttributeError):
                is_ours = False
        else:
            is_ours = text.split("://", 1)[0].replace("_", "-") == CONN_TYPE
        if is_ours:
            found.append(key[len("AIRFLOW_CONN_") :].lower())
    return found


def connection_tables(hook: LakeformatHook) -> list[str]:
    """The table names of one connection (step 2), relative to it where the warehouse layout allows."""
    extra = hook.get_connection(hook.lakeformat_conn_id).extra_dejson
    named = _split_names(extra.get(EXTRA_TABLES))
    if named:
        return named[:MAX_TABLES]
    settings = hook.settings
    if settings.root is None:
        if not settings.catalog.configured:
            return []
        catalog = hook.load_iceberg_catalog()
        names: list[str] = []
        for namespace in _split_names(extra.get(EXTRA_NAMESPACES)):
            names += [".".join(identifier) for identifier in catalog.list_tables(namespace)]
        return sorted(names)[:MAX_TABLES]
    return _warehouse_tables(settings.root, hook.storage_options(settings.root))


def _warehouse_tables(root: str, storage_options: dict[str, Any]) -> list[str]:
    """``db.table`` for each table directory under ``<root>/<db>.db/`` (or ``""``: the root is a table)."""
    io, path = FileIO.for_uri(root, storage_options)
    try:
        detect_format(root, io)
        return [""]
    except TableNotFoundError:
        pass
    names: list[str] = []
    for database in sorted(n for n in io.list_names(path) if n.endswith(".db")):
        for table in sorted(io.list_names(io.join(path, database))):
            if len(names) >= MAX_TABLES:
                return names
            try:
                detect_format(io.join(path, database, table), io)
            except TableNotFoundError:
                continue
            names.append(f"{database[: -len('.db')]}.{table}")
    return names


class _Cache:
    """Documents by (connection, table), each kept ``ttl`` seconds (thread-safe: FastAPI's threadpool)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], tuple[float, HealthEntry]] = {}

    def get(self, key: tuple[str, str], compute: Callable[[], HealthEntry]) -> HealthEntry:
        now = time.monotonic()
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        entry = compute()
        with self._lock:
            self._items[key] = (time.monotonic(), entry)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


CACHE = _Cache(CACHE_SECONDS)


def table_entry(hook: LakeformatHook, table: str) -> HealthEntry:
    """The health of one table of the connection (step 3), or the error that prevented it."""
    conn_id = hook.lakeformat_conn_id
    try:
        document = hook.open_lake_table(table or None).health().to_json()
    except Exception as exc:  # one unreadable table must not hide the others: shown in its row
        return HealthEntry(conn_id, table, error=f"{type(exc).__name__}: {exc}")
    return HealthEntry(conn_id, table, document=document)


def collect_entries(conn_ids: Iterable[str] | None = None, *, refresh: bool = False) -> list[HealthEntry]:
    """Every table of the configured connections with its health (the page's rows).

    Args:
        conn_ids: the connections to read (default: :func:`configured_conn_ids`).
        refresh: recompute every document instead of using the cache.

    Returns:
        One entry per table, by connection then table name; a connection that cannot be listed gives one
        entry with an empty table name and the error.

    Example:
        >>> [e.table for e in collect_entries(["lakeformat_default"])]  # doctest: +SKIP
        ['demo.events', 'demo.events_iceberg']
    """
    if refresh:
        CACHE.clear()
    entries: list[HealthEntry] = []
    for conn_id in conn_ids if conn_ids is not None else configured_conn_ids():
        hook = LakeformatHook(conn_id)
        try:
            tables = connection_tables(hook)
        except Exception as exc:  # a broken connection is shown, the others still are
            entries.append(HealthEntry(conn_id, "", error=f"{type(exc).__name__}: {exc}"))
            continue
        for table in tables:
            entries.append(CACHE.get((conn_id, table), functools.partial(table_entry, hook, table)))
    return entries
