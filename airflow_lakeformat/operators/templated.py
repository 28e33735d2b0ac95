"""Coercers for templated operator and sensor arguments.

Jinja renders every templated field to a string unless the DAG sets ``render_template_as_native_obj``, so
``dry_run="{{ params.dry_run }}"`` arrives as ``"False"`` and ``retain_min="{{ params.n }}"`` as ``"5"`` or
``"None"``. These turn such strings back into typed values and fail the task at once
(:class:`AirflowFailException`, no retry) with the argument's name when a value cannot be read, since a
retry would render the same value again.

Example:
    >>> optional_int("None", "retain_min") is None and as_bool("false", "dry_run") is False
    True
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk.exceptions import AirflowFailException


def as_bool(value: bool | str, name: str) -> bool:
    """Templated booleans arrive as strings ("True", "false")."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise AirflowFailException(f"{name} must be true or false, not {value!r}")


def optional_int(value: int | str | None, name: str) -> int | None:
    """Templated ints arrive as strings ("5", "None", ""); None and blank mean "not set"."""
    if value is None or isinstance(value, int):
        return value
    text = str(value).strip()
    if text.lower() in ("", "none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        raise AirflowFailException(f"{name} must be an integer, not {value!r}") from None


def optional_duration(value: timedelta | str | None, name: str) -> timedelta | None:
    """A ``timedelta`` or Paimon's duration syntax (``"1 h"``, ``"30 min"``); None and blank mean "not set"."""
    if value is None or isinstance(value, timedelta):
        return value
    text = str(value).strip()
    if text.lower() in ("", "none", "null"):
        return None
    from airflow_lakeformat.core.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise AirflowFailException(f"{name}: {exc}") from None


def optional_older_than(value: timedelta | str | None, name: str) -> timedelta | str | None:
    """An expiry ``older_than`` as rendered: a ``timedelta``, the text (stripped) for the facade to check (a
    duration; for Iceberg tables also an ISO-8601 timestamp: ``expiry_older_than`` in
    ``core/maintenance/facade_base.py``), or None when blank or ``"none"``/``"null"``."""
    if value is None or isinstance(value, timedelta):
        return value
    text = str(value).strip()
    return None if text.lower() in ("", "none", "null") else text


def duration_arg(value: timedelta) -> str:
    """A duration in Paimon's syntax for a job's command line (whole milliseconds)."""
    return f"{int(value.total_seconds() * 1000)} ms"
