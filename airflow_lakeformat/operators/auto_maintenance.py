"""Maintenance that runs only what a table needs: the steps of the ``lakeformat_auto_maintenance`` example DAG.

The DAG (``dags/lakeformat_auto_maintenance.py``) resolves its tables (:func:`resolve_tables`: a list, every
table of a namespace, or both), maps ``LakeformatHealthOperator`` over them, then maps :func:`maintain_table`
over (table, health document) pairs and ends with :func:`summarize_runs`.

:func:`maintain_table` runs the document's recommendations and nothing else, in the document's order (partitions,
data and deletes, manifests, snapshot expiry, orphans: ``core/health/assess.py``), each as
``getattr(table.maintenance, operation)(**arguments)`` with the arguments health gave, read back from JSON by
:func:`facade_arguments` (a duration in XCom is text; ``remove_orphan_files`` takes a ``timedelta``). The
commits carry the connection's commit user for the DAG and task, as the maintenance operators' do. All of a
table's operations run under ONE hold of its maintenance lock (``table.maintenance.lock``, the lock the
maintenance operators take, ``operators/base.py``): another maintenance run of the same table waits for it (up
to ``lock_wait``) rather than interleaving. A healthy table (no recommendation) takes no lock and runs nothing.
An operation the table's format or features refuse (``UnsupportedFormatError``, ``MaintenanceRefusedError``:
e.g. compaction of a primary-key table with a changelog producer) is reported under ``changes`` as
``{"refused": reason}`` and the next one runs; any other error fails the task (typed errors without retry,
``operators/base.py``'s ``map_error``).

What each returns is JSON: ``{"table", "score", "ran": [operations], "changes": {operation: {"summary": one line,
"result": the figures of the operation's result JSON}}}`` (:func:`result_figures`: lists become their
lengths); :func:`summarize_runs` keys them by table and renders a table for the log.

Example:
    >>> facade_arguments("remove_orphan_files", {"dry_run": False, "older_than": "86400000 ms"})
    {'dry_run': False, 'older_than': datetime.timedelta(days=1)}
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_lakeformat.hooks.lakeformat import LakeformatHook
from airflow_lakeformat.operators.base import (
    DEFAULT_LOCK_LEASE,
    DEFAULT_LOCK_POLL_INTERVAL,
    cause_adds_nothing,
    map_error,
)
from airflow_lakeformat.operators.health import jsonable

log = logging.getLogger(__name__)

# Arguments the facade takes as a timedelta only, by operation; XCom carries them as duration text.
TIMEDELTA_ARGUMENTS: Mapping[str, frozenset[str]] = {"remove_orphan_files": frozenset({"older_than"})}
OPERATIONS = frozenset(
    {
        "compact_data",
        "compact_deletes",
        "compact_manifests",
        "expire_snapshots",
        "remove_orphan_files",
        "expire_partitions",
    }
)


def table_names(value: Any) -> list[str]:
    """Table names from a list, a comma- or newline-separated text (a templated Param), or None.

    Example:
        >>> table_names("db.a, db.b\\n/wh/db.db/c")
        ['db.a', 'db.b', '/wh/db.db/c']
    """
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace("\n", ",").split(",")
    return [str(name).strip() for name in value if str(name).strip() and str(name).strip() != "None"]


def resolve_tables(conn_id: str, tables: Any = None, namespace: str | None = None) -> list[str]:
    """The tables to assess: ``tables`` as given, then every table of ``namespace`` (each table once, by where the
    connection resolves it).

    Args:
        conn_id: the ``lakeformat`` connection.
        tables: table URIs or names (``db.table``, ``namespace.table`` of the connection's catalog).
        namespace: a catalog namespace / warehouse database; all its tables
            (``hooks/table_listing.py``'s :func:`list_namespace_tables`).

    Raises:
        AirflowFailException: neither tables nor a namespace given.

    Example:
        >>> resolve_tables("lakeformat_default", ["db.a"], "db")  # doctest: +SKIP
        ['db.a', 'db.b']
    """
    from airflow_lakeformat.hooks.table_listing import list_namespace_tables

    hook = LakeformatHook(conn_id)
    names = table_names(tables)
    space = (namespace or "").strip()
    if space and space != "None":
        names += list_namespace_tables(hook, space)
    elif not names:
        raise AirflowFailException(
            "give the tables to maintain (param 'tables') or a namespace ('namespace')"
        )
    # One entry per table: a name and the URI it resolves to are the same table (the first spelling is kept).
    by_target: dict[str, str] = {}
    for name in names:
        by_target.setdefault(hook.resolve(name).target.rstrip("/"), name)
    if not by_target:
        log.warning("namespace %r holds no table: nothing to assess", space)
    return list(by_target.values())


def facade_arguments(operation: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """A recommendation's arguments as the facade method takes them (durations read back from XCom's text)."""
    from airflow_lakeformat.core.units import parse_duration

    result = dict(arguments or {})
    for name in TIMEDELTA_ARGUMENTS.get(operation, frozenset()):
        value = result.get(name)
        if isinstance(value, str):
            result[name] = parse_duration(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            result[name] = timedelta(seconds=value)
    return result


def result_figures(document: Mapping[str, Any]) -> dict[str, Any]:
    """An operation's result JSON, kept small for XCom: its scalar fields, its small mappings of counts (files and
    bytes by kind), and each list as its length (the expired snapshot ids become how many expired).

    Example:
        >>> result_figures({"operation": "expire-snapshots", "snapshotsExpired": [1, 2], "files": {"data-file": 2},
        ...                 "groups": [{"paths": ["a"]}], "options": {"a": {"b": 1}}})
        {'operation': 'expire-snapshots', 'snapshotsExpired': 2, 'files': {'data-file': 2}, 'groups': 1}
    """
    figures: dict[str, Any] = {}
    for key, value in jsonable(document).items():
        if isinstance(value, list):
            figures[key] = len(value)
        elif isinstance(value, dict):
            if len(value) <= 12 and all(isinstance(v, (int, float, str, bool)) for v in value.values()):
                figures[key] = value
        else:
            figures[key] = value
    return figures


def _with_commit_user(method: Any, arguments: dict[str, Any], commit_user: str) -> dict[str, Any]:
    """``arguments`` plus ``commit_user`` when the facade method takes one and health gave none."""
    if "commit_user" in arguments or "commit_user" not in inspect.signature(method).parameters:
        return arguments
    return {**arguments, "commit_user": commit_user}


def run_recommendations(
    table: Any, recommendations: Sequence[Mapping[str, Any]], commit_user: str
) -> tuple[list[str], dict[str, Any]]:
    """Run each recommendation on ``table`` in order; the operations that ran and what each changed.

    Args:
        table: the format-neutral table (``core/tables.py``), its lock already held by the caller.
        recommendations: the health document's ``recommendations``.
        commit_user: the commit user of the commits the operations make.

    Returns:
        ``(ran, changes)``: the operations run, and per operation ``{"summary", "result"}`` or ``{"refused"}``.
    """
    from airflow_lakeformat.core.errors import MaintenanceRefusedError, UnsupportedFormatError
    from airflow_lakeformat.core.maintenance.results import summary

    ran: list[str] = []
    changes: dict[str, Any] = {}
    for recommendation in recommendations:
        operation = str(recommendation.get("operation"))
        if operation not in OPERATIONS:
            raise AirflowFailException(f"{table.uri}: health recommends an unknown operation {operation!r}")
        method = getattr(table.maintenance, operation)
        arguments = _with_commit_user(
            method, facade_arguments(operation, recommendation.get("arguments")), commit_user
        )
        log.info("%s: %s(%s) because %s", table.uri, operation, arguments, recommendation.get("reason"))
        try:
            result = method(**arguments)
        except (UnsupportedFormatError, MaintenanceRefusedError) as exc:
            log.warning("%s: %s refused: %s", table.uri, operation, exc)
            changes[operation] = {"refused": str(exc)}
            continue
        document = result.to_json() if hasattr(result, "to_json") else dict(result or {})
        changes[operation] = {"summary": summary(document), "result": result_figures(document)}
        log.info("%s", changes[operation]["summary"])
        ran.append(operation)
    return ran, changes


def lock_owner(context: Mapping[str, Any]) -> str:
    """Who holds the lock, shown to whoever waits: the DAG, run, task (with its map index) and try."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    where = f"{ti.dag_id}/{context['run_id']}/{ti.task_id}" + (f"[{map_index}]" if map_index >= 0 else "")
    return f"airflow {where} try {ti.try_number}"


def maintain_table(
    conn_id: str,
    table: str,
    document: Mapping[str, Any],
    context: Mapping[str, Any],
    *,
    lock_lease: timedelta = DEFAULT_LOCK_LEASE,
    lock_wait: timedelta | None = None,
    lock_poll_interval: float = DEFAULT_LOCK_POLL_INTERVAL,
) -> dict[str, Any]:
    """Run what ``document`` (the table's health) recommends, under the table's maintenance lock.

    Args:
        conn_id: the ``lakeformat`` connection.
        table: the table as the DAG names it (URI, ``db.table`` or ``namespace.table``).
        document: ``LakeformatHealthOperator``'s XCom document for that table.
        context: the task's Airflow context (lock owner, commit user).
        lock_lease, lock_wait, lock_poll_interval: as the maintenance operators take them.

    Returns:
        ``{"table", "score", "ran", "changes"}`` (JSON).

    Example:
        >>> maintain_table("lakeformat_default", "db.events", health_doc, context)["ran"]  # doctest: +SKIP
        ['compact_data', 'expire_snapshots']
    """
    recommendations = list(document.get("recommendations") or [])
    outcome: dict[str, Any] = {"table": table, "score": document.get("score"), "ran": [], "changes": {}}
    if not recommendations:
        log.info("%s is healthy (score %s): nothing to run", table, document.get("score"))
        return outcome
    hook = LakeformatHook(conn_id)
    ti = context["ti"]
    try:
        lake_table = hook.open_lake_table(table)
        lock = lake_table.maintenance.lock(
            lock_owner(context), lock_lease, wait=lock_wait, poll_interval=lock_poll_interval
        )
        lease = lock.acquire()
        log.info("Holding the maintenance lock of %s (generation %s)", lake_table.uri, lease.generation)
        try:
            ran, changes = run_recommendations(
                lake_table, recommendations, hook.commit_user(ti.dag_id, ti.task_id)
            )
        finally:
            lock.release()
    except Exception as exc:
        mapped = map_error(exc, table, conn_id)
        if mapped is None:
            raise
        if cause_adds_nothing(exc):
            raise mapped from None
        raise mapped from exc
    return {**outcome, "ran": ran, "changes": changes}


def summarize_runs(outcomes: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], str]:
    """The DAG's summary: ``{table: {"score", "ran", "changes"}}`` and a text table for the log.

    Example:
        >>> print(summarize_runs([{"table": "db.a", "score": 100, "ran": [], "changes": {}}])[1])
        table  score  ran
        -----  -----  ---------------
        db.a   100    nothing (healthy)
    """
    summary: dict[str, Any] = {}
    for outcome in outcomes:
        summary[str(outcome["table"])] = {
            "score": outcome.get("score"),
            "ran": list(outcome.get("ran") or []),
            "changes": dict(outcome.get("changes") or {}),
        }
    rows = [("table", "score", "ran")]
    for name, entry in summary.items():
        idle = "nothing (refused)" if entry["changes"] else "nothing (healthy)"
        rows.append((name, str(entry["score"]), ", ".join(entry["ran"]) or idle))
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip() for row in rows]
    lines.insert(1, f"{'-' * widths[0]}  {'-' * widths[1]}  {'-' * 15}")
    for name, entry in summary.items():
        for operation, change in entry["changes"].items():
            line = change.get("summary") or f"refused: {change.get('refused')}"
            lines.append(f"  {name} {operation}: {line}")
    return summary, "\n".join(lines)
