"""Which Paimon tags expire: Java's ``TagTimeExpire`` (procedure ``expire_tags(table, older_than)``).

A tag expires when (reference paimon-pk-compaction §5.2):

1. it has ``tagCreateTime`` and ``tagTimeRetained`` and ``now > create + retained`` (time retention); or
2. ``older_than`` is given and the tag's create time is before it; a tag without ``tagCreateTime`` (Java
   writes none when no retention is set) is judged by its file's modification time.

``now`` and the create time are local wall-clock date-times, as Java's ``LocalDateTime.now()``; an aware
``now`` or ``older_than`` is converted to this machine's zone. ``older_than`` is a point in time or a
duration before ``now``. Auto-tag retention (``tag.num-retained-max``) is separate:
``core/maintenance/tag_periods.oldest_auto_tags``.

Example:
    >>> expiry_cutoff(timedelta(days=1), datetime(2024, 1, 2))
    datetime.datetime(2024, 1, 1, 0, 0)
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.paimon.tags.tag_files import PaimonTag


def parse_older_than(value: timedelta | datetime | str | None) -> timedelta | datetime | None:
    """``older_than`` as given: a duration (``"7 d"``) or a timestamp (``"2024-05-01 00:00:00"``, local when
    it names no zone, as Java's ``expire_tags`` reads it).

    Raises:
        UsageError: text that is neither.
    """
    if value is None or isinstance(value, (timedelta, datetime)):
        return value
    text = str(value).strip()
    if re.match(r"^\d{4}-\d{2}-\d{2}", text):
        iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            return local_naive(datetime.fromisoformat(iso))
        except ValueError:
            raise UsageError(f"older_than: not a timestamp: {text!r}") from None
    from airflow_lakeformat.core.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"older_than: {exc}") from None


def local_naive(value: datetime) -> datetime:
    """An aware date-time in this machine's zone without its zone; a naive one as it is."""
    return value.astimezone().replace(tzinfo=None) if value.tzinfo else value


def expiry_cutoff(older_than: timedelta | datetime | None, now: datetime) -> datetime | None:
    """``older_than`` as a local date-time: a point in time as it is, a duration before ``now``."""
    if older_than is None:
        return None
    if isinstance(older_than, timedelta):
        return local_naive(now) - older_than
    return local_naive(older_than)


def expired_tags(
    tags: list[PaimonTag], *, now: datetime, older_than: timedelta | datetime | None = None
) -> list[tuple[PaimonTag, str]]:
    """The tags ``expire_tags`` removes, each with its reason (module docstring), by name.

    Args:
        tags: the branch's tags.
        now: the current local time (injected by tests).
        older_than: also expire tags created before this point, or this long before ``now``.
    """
    now = local_naive(now)
    cutoff = expiry_cutoff(older_than, now)
    result = []
    for tag in tags:
        expires = tag.expires_at
        if expires is not None and now > expires:
            result.append(
                (tag, f"its time retention ended: created {tag.create_time}, retained {tag.time_retained}")
            )
            continue
        if cutoff is None:
            continue
        created, source = tag.create_time, "created"
        if created is None:
            created, source = tag.mtime, "file modified"
        if created is not None and created < cutoff:
            result.append((tag, f"older than {cutoff}: {source} {created}"))
    return result
