"""Paimon's automatic tag names and the retention of automatic tags, for scheduled tags on both formats.

Paimon (``core/tag/TagPeriodHandler.java``, ``TagAutoCreation.java``; reference paimon-pk-compaction §5.2):

* ``tag.creation-period`` is ``daily`` (1 day), ``hourly`` (1 h) or ``two-hours`` (2 h);
  ``tag.creation-period-duration`` (any duration) overrides it.
* ``tag.period-formatter`` names the period: daily ``with_dashes`` ``yyyy-MM-dd``, otherwise ``yyyyMMdd``;
  hourly and two-hours ``yyyy-MM-dd HH`` / ``yyyyMMdd HH`` / ``yyyyMMddHH`` (``without_dashes_and_spaces``);
  a custom duration always ``yyyyMMddHHmm``.
* Periods are wall-clock aligned: a time is floored to a multiple of the period counted from the epoch, the
  local date-time read as if it were UTC (``Timestamp.fromLocalDateTime``). A tag made at time *t* is named
  after **the period that just finished**: ``format(floor(t) - 1 period)``; at 2023-07-18 12:12 a daily tag
  is ``2023-07-17``.
* An **auto tag** is a tag whose name parses with the period's formatter (``isAutoTag``; #5785/#5786 made
  ``without_dashes`` names count). ``tag.num-retained-max`` deletes the oldest auto tags (by tagged snapshot,
  then period) until at most that many remain; other tags are never touched.

A scheduler names the tag from the DAG run's data interval: the end of the interval is *t*, so a daily DAG's
run for 2024-01-01 (interval 2024-01-01 00:00 to 2024-01-02 00:00) makes tag ``2024-01-01``.

Nothing here imports a format package: the Paimon and Iceberg tag modules both use it.

Example:
    >>> from datetime import datetime
    >>> PeriodHandler.of("daily", "with_dashes").tag_name_at(datetime(2023, 7, 18, 12, 12))
    '2023-07-17'
    >>> PeriodHandler.of("hourly", "without_dashes_and_spaces").is_auto_tag("2023071811")
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TypeVar

from airflow_lakeformat.core.errors import UsageError

__all__ = ["FORMATTERS", "PERIODS", "PeriodHandler", "as_duration", "oldest_auto_tags", "wall_clock"]

#: ``tag.creation-period`` values and their length.
PERIODS: dict[str, timedelta] = {
    "daily": timedelta(days=1),
    "hourly": timedelta(hours=1),
    "two-hours": timedelta(hours=2),
}
#: ``tag.period-formatter`` values.
FORMATTERS = ("with_dashes", "without_dashes", "without_dashes_and_spaces")
_DAILY = {"with_dashes": "%Y-%m-%d", "without_dashes": "%Y%m%d", "without_dashes_and_spaces": "%Y%m%d"}
_HOURLY = {
    "with_dashes": "%Y-%m-%d %H",
    "without_dashes": "%Y%m%d %H",
    "without_dashes_and_spaces": "%Y%m%d%H",
}
_DURATION_PATTERN = "%Y%m%d%H%M"
_EPOCH = datetime(1970, 1, 1)

T = TypeVar("T")


@dataclass(frozen=True)
class PeriodHandler:
    """One period and its name pattern (``strftime`` form)."""

    period: timedelta
    pattern: str
    description: str

    @classmethod
    def of(
        cls, period: str | None = None, formatter: str | None = None, duration: timedelta | None = None
    ) -> PeriodHandler:
        """The handler of ``tag.creation-period`` / ``tag.period-formatter`` / ``tag.creation-period-duration``.

        Args:
            period: ``daily`` (default), ``hourly`` or ``two-hours``.
            formatter: ``with_dashes`` (default), ``without_dashes`` or ``without_dashes_and_spaces``.
            duration: a custom period (overrides ``period``; names are ``yyyyMMddHHmm``).

        Raises:
            UsageError: an unknown period or formatter, or a duration that is not a positive whole minute.
        """
        formatter = (formatter or "with_dashes").strip().lower()
        if formatter not in FORMATTERS:
            raise UsageError(f"tag.period-formatter: {formatter!r} is not one of {', '.join(FORMATTERS)}")
        if duration is not None:
            if duration <= timedelta(0) or duration % timedelta(minutes=1):
                raise UsageError(f"tag.creation-period-duration: {duration} is not a positive whole minute")
            return cls(duration, _DURATION_PATTERN, f"every {duration}")
        name = (period or "daily").strip().lower()
        if name not in PERIODS:
            raise UsageError(f"tag.creation-period: {name!r} is not one of {', '.join(PERIODS)}")
        pattern = _DAILY[formatter] if name == "daily" else _HOURLY[formatter]
        return cls(PERIODS[name], pattern, f"{name} ({formatter})")

    @classmethod
    def from_options(
        cls, options: Mapping[str, str | None], overrides: Mapping[str, str | timedelta | None] | None = None
    ) -> PeriodHandler:
        """The handler from Paimon's table options, each overridden by a given (not None) value.

        Args:
            options: ``tag.creation-period``, ``tag.period-formatter``, ``tag.creation-period-duration``.
            overrides: the same keys, e.g. an operator's arguments.
        """
        from airflow_lakeformat.core.units import parse_duration

        merged: dict[str, str | timedelta | None] = dict(options)
        merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
        duration: str | timedelta | None = merged.get("tag.creation-period-duration")
        if isinstance(duration, str):
            try:
                duration = parse_duration(duration)
            except ValueError as exc:
                raise UsageError(f"tag.creation-period-duration: {exc}") from None
        period, formatter = merged.get("tag.creation-period"), merged.get("tag.period-formatter")
        return cls.of(
            str(period) if period is not None else None,
            str(formatter) if formatter is not None else None,
            duration if isinstance(duration, timedelta) else None,
        )

    def floor(self, when: datetime) -> datetime:
        """``when`` (naive: a local date-time; aware: converted to UTC) floored to the period's boundary."""
        local = when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when
        return _EPOCH + ((local - _EPOCH) // self.period) * self.period

    def tag_name_at(self, when: datetime) -> str:
        """The name of the tag made at ``when``: the period that just finished."""
        return self.format(self.floor(when) - self.period)

    def format(self, period_start: datetime) -> str:
        return period_start.strftime(self.pattern)

    def parse(self, name: str) -> datetime | None:
        """The period start a name stands for, or None if the name is not an auto tag of this handler."""
        try:
            parsed = datetime.strptime(name, self.pattern)
        except ValueError:
            return None
        # strptime accepts unpadded fields ("2023-1-1"); Java's formatter does not.
        return parsed if parsed.strftime(self.pattern) == name else None

    def is_auto_tag(self, name: str) -> bool:
        return self.parse(name) is not None


def oldest_auto_tags(
    tags: Sequence[T], handler: PeriodHandler, num_retained_max: int, *, name_of: str = "name"
) -> list[T]:
    """The auto tags ``tag.num-retained-max`` deletes, oldest first: by tagged snapshot, then period.

    Args:
        tags: objects with a ``name`` attribute (``name_of``) and a ``snapshot_id``.
        handler: decides which names are auto tags.
        num_retained_max: at most this many auto tags remain.
    """
    if num_retained_max < 0:
        raise UsageError(f"tag.num-retained-max must not be negative, not {num_retained_max}")
    auto = [(t, handler.parse(str(getattr(t, name_of)))) for t in tags]
    ordered = sorted(
        ((t, when) for t, when in auto if when is not None),
        key=lambda pair: (int(getattr(pair[0], "snapshot_id")), pair[1]),  # noqa: B009
    )
    excess = len(ordered) - num_retained_max
    return [t for t, _ in ordered[: max(excess, 0)]]


def as_duration(value: timedelta | str | None, what: str) -> timedelta | None:
    """A retention argument: a ``timedelta`` or Paimon's duration text (``"7 d"``); a bad one is a usage mistake.

    Example:
        >>> as_duration("12 h", "time_retained")
        datetime.timedelta(seconds=43200)
    """
    if value is None or isinstance(value, timedelta):
        return value
    from airflow_lakeformat.core.units import parse_duration

    try:
        return parse_duration(str(value).strip())
    except ValueError as exc:
        raise UsageError(f"{what}: {exc}") from None


def wall_clock(when: datetime, time_zone: str | None = None) -> datetime:
    """The naive wall-clock date-time a period is named from: an aware ``when`` in ``time_zone`` (default
    UTC, Airflow's), a naive one as it is.

    Example:
        >>> wall_clock(datetime(2024, 1, 1, 23, 30, tzinfo=timezone.utc), "Europe/Berlin")
        datetime.datetime(2024, 1, 2, 0, 30)
    """
    if when.tzinfo is None:
        return when
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(time_zone) if time_zone else timezone.utc
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"time_zone: unknown zone {time_zone!r}") from None
    return when.astimezone(zone).replace(tzinfo=None)
