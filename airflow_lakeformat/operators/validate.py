"""Check a maintenance run's inputs before anything runs, and fail once, clearly, when one is wrong.

A manual DAG's Params arrive from a trigger form (or ``--conf``): a duration that does not parse, a retention
of zero, a table name with a typo, an orphan age under the safety floor. Left to the maintenance tasks, each
would fail on its own, some only after another task already changed the table. A validation task placed
first checks every input at once and fails with ONE message listing every problem
(:class:`AirflowFailException`: no retry, no chained traceback), so every task after it ends
``upstream_failed`` and nothing touches the table.

What is checked (blank, ``None`` and ``"None"`` mean "not set", as for the operators):

* durations parse with :func:`airflow_lakeformat.core.units.parse_duration` (``"30 min"``, ``"1 h"``, ``"7 d"``);
* retention and file counts are whole numbers at or above their minimum;
* ``execution`` is ``auto``, ``local`` or ``spark``;
* the table exists: placed and opened by :class:`LakeformatHook` (``resolve`` + ``open_lake_table``, the
  format-neutral facade of ``core/tables.py``), so Paimon tables, Iceberg tables under the warehouse and
  tables of the connection's Iceberg catalog all pass;
* the orphan age is not under the floor of the table's format (1 h for Paimon, 24 h for Iceberg; 1 h when
  no table is checked) unless the short-age override is set.

A storage error that is not about the input (a dropped connection) is raised as is, so the task's retries
apply. :data:`DURATION_PATTERN` is the JSON-schema ``pattern`` of a duration Param, so the trigger form
refuses what :func:`parse_duration` would refuse before a run is even created.

Example:
    >>> validate = LakeformatValidateOperator(
    ...     task_id="validate_inputs",
    ...     table="{{ params.table }}",
    ...     older_than="{{ params.older_than }}",
    ...     orphan_older_than="{{ params.orphan_older_than }}",
    ... )  # doctest: +SKIP
    >>> validate >> first_maintenance_task  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from airflow_lakeformat.core.units import DURATION_UNITS
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatHook

if TYPE_CHECKING:
    from airflow.sdk import Context

EXECUTIONS = ("auto", "local", "spark")
FORMAT_NAMES = {"paimon": "Paimon", "iceberg": "Iceberg"}
_UNSET = ("", "none", "null")


def _any_case(unit: str) -> str:
    return "".join(f"[{c}{c.upper()}]" if c.isascii() and c.isalpha() else c for c in unit)


#: JSON-schema ``pattern`` of a duration Param: what ``parse_duration`` reads (a whole number, optional
#: blanks, a unit of any case; a bare number is ms), or blank. Built from the same unit table.
DURATION_PATTERN = (
    r"^\s*(\d+\s*("
    + "|".join(_any_case(u) for u in sorted(DURATION_UNITS, key=len, reverse=True))
    + r")?)?\s*$"
)


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _UNSET)


def _text(delta: timedelta) -> str:
    """A duration as a person writes it: ``"1 h"``, ``"24 h"``, ``"90 s"``."""
    seconds = delta.total_seconds()
    for unit, size in (("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds * 1000)} ms"


def orphan_floor(table_format: str | None) -> timedelta:
    """The shortest orphan age a format accepts without the override (Paimon's when ``None``)."""
    from airflow_lakeformat.core.maintenance.orphan_age import ORPHAN_AGES, PAIMON_ORPHAN_AGE

    return ORPHAN_AGES.get(table_format or "paimon", PAIMON_ORPHAN_AGE).minimum


class _Problems:
    """Collects what is wrong, so one message can say all of it."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def duration(self, name: str, value: Any) -> timedelta | None:
        if isinstance(value, timedelta):
            return value
        if _unset(value):
            return None
        from airflow_lakeformat.core.units import parse_duration

        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.items.append(f"{name}: {exc}")
            return None

    def integer(self, name: str, value: Any, minimum: int) -> int | None:
        if _unset(value):
            return None
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            number = int(value.strip())
        if number is None:
            self.items.append(f"{name} must be a whole number, not {value!r}")
        elif number < minimum:
            self.items.append(f"{name} must be at least {minimum}, not {number}")
            return None
        return number

    def boolean(self, name: str, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = "" if value is None else str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no", "", "none"):
            return False
        self.items.append(f"{name} must be true or false, not {value!r}")
        return False


def _open(table: str, conn_id: str, problems: _Problems) -> tuple[str | None, str | None]:
    """The table's URI and format, or a problem; storage errors that a retry may cure are raised."""
    from airflow_lakeformat.core import errors
    from airflow_lakeformat.operators.base import map_error

    hook = LakeformatHook(conn_id)
    where, in_catalog = table, False
    try:
        ref = hook.resolve(table)  # a root URI, or namespace.table of the connection's Iceberg catalog
        where, in_catalog = ref.target, ref.identifier is not None
        opened = hook.open_lake_table(ref)
        return opened.uri, opened.format
    except AirflowNotFoundException:
        problems.items.append(
            f"connection {conn_id!r} does not exist: create it (type lakeformat, host = the warehouse)"
        )
    except errors.TableNotFoundError as exc:
        detail = getattr(exc, "reason", None) or str(exc)
        if in_catalog:
            problems.items.append(
                f"table {table!r} does not exist in the Iceberg catalog of connection {conn_id!r} ({detail}); "
                "name it as namespace.table of that catalog"
            )
        else:
            problems.items.append(
                f"table {table!r} does not exist at {where} ({detail}); name it by its URI or as db.table "
                f"under the warehouse of connection {conn_id!r}"
            )
    except Exception as exc:
        mapped = map_error(exc, where, conn_id)
        if mapped is None:
            raise  # not about the input (a dropped connection): the task's retries apply
        problems.items.append(str(mapped) if repr(table) in str(mapped) else f"table {table!r}: {mapped}")
    return None, None


def validate_maintenance_inputs(
    table: str | None = None,
    *,
    lakeformat_conn_id: str = DEFAULT_CONN_ID,
    retain_min: int | str | None = None,
    older_than: timedelta | str | None = None,
    orphan_older_than: timedelta | str | None = None,
    allow_short_orphan_older_than: bool | str = False,
    min_file_count: int | str | None = None,
    execution: str | None = None,
) -> dict[str, Any]:
    """Check every input of a maintenance run; return them read, or fail once listing every problem.

    Usable in a ``@task`` (or through :class:`LakeformatValidateOperator`). Values may be typed or the
    strings templates render (``"5"``, ``"None"``, ``"False"``).

    Args:
        table: the table (URI or ``db.table`` under the connection's warehouse); it must exist. ``None``:
            not checked (a DAG over a list of tables checks each in its own tasks).
        lakeformat_conn_id: the ``lakeformat`` connection that places ``table``.
        retain_min: snapshots to keep at least: a whole number >= 1, or unset (the table's option).
        older_than: expiry age, a duration (``"1 h"``), or unset (the table's option).
        orphan_older_than: orphan age, a duration, or unset (the operator's default); not under
            :func:`orphan_floor` of the table's format unless ``allow_short_orphan_older_than``.
        allow_short_orphan_older_than: accept an orphan age under the floor (only when no writer runs).
        min_file_count: data compaction's smallest group: a whole number >= 2, or unset.
        execution: ``auto``, ``local`` or ``spark``, or unset.

    Returns:
        ``{"table", "format", "retainMin", "olderThanMs", "orphanOlderThanMs", "allowShortOrphanOlderThan",
        "minFileCount", "execution"}`` (the table's URI and format are None when ``table`` is None).

    Raises:
        AirflowFailException: one message naming every bad input (no retry: a retry reads the same input).

    Example:
        >>> @task
        ... def validate_inputs(params: dict) -> dict:
        ...     return validate_maintenance_inputs(params["table"], older_than=params["older_than"])
    """
    problems = _Problems()
    retain = problems.integer("retain_min", retain_min, 1)
    expiry_age = problems.duration("older_than", older_than)
    orphan_age = problems.duration("orphan_older_than", orphan_older_than)
    allow_short = problems.boolean("allow_short_orphan_older_than", allow_short_orphan_older_than)
    files = problems.integer("min_file_count", min_file_count, 2)
    if not _unset(execution) and str(execution).strip() not in EXECUTIONS:
        problems.items.append(f"execution must be one of {', '.join(EXECUTIONS)}, not {execution!r}")
    uri = table_format = None
    if table is not None:
        if _unset(table):
            problems.items.append("table is empty: name a table by its URI or as db.table")
        else:
            uri, table_format = _open(str(table).strip(), lakeformat_conn_id, problems)
    floor = orphan_floor(table_format)
    if orphan_age is not None and orphan_age < floor and not allow_short:
        problems.items.append(
            f"orphan_older_than {orphan_older_than!r} is under the {_text(floor)} floor for "
            f"{FORMAT_NAMES.get(table_format or 'paimon', table_format)} tables: a younger file may belong to a commit still being "
            f"written; give at least {_text(floor)}, or set allow_short_orphan_older_than if no writer runs"
        )
    if problems.items:
        count = len(problems.items)
        what = "1 invalid input" if count == 1 else f"{count} invalid inputs"
        raise AirflowFailException(f"{what}, nothing was run: " + "; ".join(problems.items)) from None

    def ms(delta: timedelta | None) -> int | None:
        return None if delta is None else int(delta.total_seconds() * 1000)

    return {
        "table": uri,
        "format": table_format,
        "retainMin": retain,
        "olderThanMs": ms(expiry_age),
        "orphanOlderThanMs": ms(orphan_age),
        "allowShortOrphanOlderThan": allow_short,
        "minFileCount": files,
        "execution": None if _unset(execution) else str(execution).strip(),
    }


class LakeformatValidateOperator(BaseOperator):
    """Validate a maintenance run's inputs first; fail once, clearly, so nothing after it runs.

    Every argument is templated and passed to :func:`validate_maintenance_inputs`; the XCom result is what
    it returns. Put it upstream of the first maintenance task.

    Args:
        table: the table that must exist (URI or ``db.table``). Templated.
        lakeformat_conn_id: the ``lakeformat`` connection. Templated.
        retain_min, older_than, orphan_older_than, allow_short_orphan_older_than, min_file_count,
            execution: as for :func:`validate_maintenance_inputs`. Templated.

    Example:
        >>> LakeformatValidateOperator(
        ...     task_id="validate_inputs",
        ...     table="{{ params.table }}",
        ...     retain_min="{{ params.retain_min }}",
        ...     older_than="{{ params.older_than }}",
        ...     orphan_older_than="{{ params.orphan_older_than }}",
        ...     allow_short_orphan_older_than="{{ params.allow_short_orphan_older_than }}",
        ... ) >> first_maintenance_task  # doctest: +SKIP
    """

    template_fields: Sequence[str] = (
        "table",
        "lakeformat_conn_id",
        "retain_min",
        "older_than",
        "orphan_older_than",
        "allow_short_orphan_older_than",
        "min_file_count",
        "execution",
    )
    ui_color = "#fdf3d0"

    def __init__(
        self,
        *,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        retain_min: int | str | None = None,
        older_than: timedelta | str | None = None,
        orphan_older_than: timedelta | str | None = None,
        allow_short_orphan_older_than: bool | str = False,
        min_file_count: int | str | None = None,
        execution: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.lakeformat_conn_id = lakeformat_conn_id
        self.retain_min = retain_min
        self.older_than = older_than
        self.orphan_older_than = orphan_older_than
        self.allow_short_orphan_older_than = allow_short_orphan_older_than
        self.min_file_count = min_file_count
        self.execution = execution

    def execute(self, context: Context) -> dict[str, Any]:
        checked = validate_maintenance_inputs(
            self.table,
            lakeformat_conn_id=self.lakeformat_conn_id,
            retain_min=self.retain_min,
            older_than=self.older_than,
            orphan_older_than=self.orphan_older_than,
            allow_short_orphan_older_than=self.allow_short_orphan_older_than,
            min_file_count=self.min_file_count,
            execution=self.execution,
        )
        self.log.info("Inputs valid: %s", json.dumps(checked, sort_keys=True))
        return checked
