"""The format-neutral half of the facade's ``table.maintenance``: what both formats' classes share.

``core/table_maintenance.py`` holds one class per format (``PaimonMaintenance``, ``IcebergMaintenance``); both
derive from :class:`MaintenanceBase` here: the orphan-age rule (``orphan_age.py``: "no ``older_than`` given"
means the format's default, decided in one place), the maintenance lock (``lock.py``) and a deleter on the
table's store (``deletion.py``). :func:`expiry_older_than` checks an expiry age before anything runs (a
duration or, for Iceberg, an ISO-8601 timestamp), :func:`refuse_options` refuses another format's options by
name instead of ignoring them, and :class:`TableSize` is what the operators' ``execution="auto"`` weighs.

Nothing here imports a format package.

Example:
    >>> expiry_older_than("2024-05-01T00:00:00Z")
    '2024-05-01T00:00:00Z'
    >>> refuse_options("/wh/t", {"retain_max": 5}, only="Paimon", this="an Iceberg")
    Traceback (most recent call last):
    ...
    airflow_lakeformat.core.errors.UsageError: retain_max: only for Paimon tables (/wh/t is an Iceberg table)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.maintenance.orphan_age import OrphanAge
from airflow_lakeformat.core.progress import NO_PROGRESS, Progress

if TYPE_CHECKING:
    from airflow_lakeformat.core.maintenance.deletion import FileDeleter
    from airflow_lakeformat.core.maintenance.lock import MaintenanceLock

__all__ = [
    "MaintenanceBase",
    "OlderThan",
    "TableSize",
    "duration_older_than",
    "expiry_older_than",
    "refuse_options",
]

OlderThan = timedelta | datetime | str | None


@dataclass(frozen=True)
class TableSize:
    """What the latest snapshot references (Iceberg: the ``main`` head), read from its manifest list(s) only."""

    snapshot_id: int | None
    live_files: int
    manifests: int


def expiry_older_than(value: OlderThan) -> OlderThan:
    """An expiry ``older_than`` checked before anything runs: a duration text becomes a ``timedelta``, an
    ISO-8601 timestamp stays text (only Iceberg tables take one; Paimon's facade refuses it).

    Raises:
        UsageError: text that is neither a duration nor an ISO-8601 timestamp.

    Example:
        >>> expiry_older_than("7 d")
        datetime.timedelta(days=7)
    """
    if not isinstance(value, str):
        return value
    from airflow_lakeformat.core.units import DURATION_HELP, parse_duration

    text = value.strip()
    try:
        return parse_duration(text)
    except ValueError:
        pass
    if not _is_timestamp(text):
        raise UsageError(
            f"older_than: {value!r} is neither a duration ({DURATION_HELP}) nor an ISO-8601 timestamp "
            "(e.g. '2024-05-01T00:00:00Z'; Iceberg tables only)"
        ) from None
    return text


def refuse_options(name: str, given: Mapping[str, Any], *, only: str, this: str) -> None:
    """Refuse the options of another format that were given (set and not False), naming them.

    Args:
        name: the table, for the message.
        given: option name -> value.
        only: the format the options belong to (``"Paimon"``).
        this: the table's format with its article (``"an Iceberg"``).
    """
    named = [key for key, value in given.items() if value not in (None, False, (), [])]
    if named:
        raise UsageError(f"{', '.join(named)}: only for {only} tables ({name} is {this} table)")


def duration_older_than(value: OlderThan) -> timedelta | None:
    """An expiry ``older_than`` of a format that judges age by a duration only (Paimon): a ``timedelta`` or a
    duration text; a timestamp is refused as Iceberg's form.

    Raises:
        UsageError: a timestamp, or text that is not a duration.
    """
    if value is None or isinstance(value, timedelta):
        return value
    if isinstance(value, datetime) or _is_timestamp(str(value).strip()):
        raise UsageError(
            "older_than: a timestamp is only accepted for Iceberg tables (Paimon takes a duration)"
        )
    from airflow_lakeformat.core.units import parse_duration

    try:
        return parse_duration(str(value).strip())
    except ValueError as exc:
        raise UsageError(f"older_than: {exc}") from None


class MaintenanceBase:
    """What both formats share: the orphan-age rule, the lock and a deleter on the table's store."""

    orphan_age: ClassVar[OrphanAge]
    table: Any

    def orphan_older_than(self, given: timedelta | None = None) -> timedelta:
        """The orphan cleanup's ``older_than``: ``given``, or this format's default when None."""
        return self.orphan_age.older_than(given)

    def lock(
        self,
        owner: str,
        lease: timedelta,
        *,
        wait: timedelta | float | None = None,
        poll_interval: float | None = None,
    ) -> MaintenanceLock:
        """The table's maintenance lock (not yet taken: call ``acquire()``/``release()`` or use ``with``).

        Args:
            owner: who holds it (shown to whoever waits).
            lease: how long a taken lock is valid; it must outlast the run.
            wait: wait up to this long for a held lock (None: fail at once).
            poll_interval: seconds between tries while waiting.
        """
        from airflow_lakeformat.core.maintenance.lock import MaintenanceLock

        extra: dict[str, Any] = {} if poll_interval is None else {"poll_interval": poll_interval}
        return MaintenanceLock(self.table, owner, lease, wait=wait, **extra)

    def file_deleter(
        self, *, dry_run: bool = True, batch_size: int | None = None, progress: Progress = NO_PROGRESS
    ) -> FileDeleter:
        """The core's deleter on this table's store (pass it as ``deleter=`` to tune batches or progress)."""
        from airflow_lakeformat.core.maintenance.deletion import FileDeleter

        extra: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}
        return FileDeleter(self.table.io, dry_run=dry_run, progress=progress, **extra)


def _is_timestamp(text: str) -> bool:
    """An ISO-8601 date or timestamp as Iceberg's ``older_than`` reads it (``Z`` or an offset; none is UTC)."""
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return False
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        datetime.fromisoformat(iso)
    except ValueError:
        return False
    return True
