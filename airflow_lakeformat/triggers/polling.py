"""How the triggers poll a table: one loop for a one-shot wait, one throttle for watchers' errors.

Every trigger of this package waits the same way; only what a poll computes differs (a newer snapshot,
``triggers/watch.py``; a health threshold crossed, ``triggers/health_watch.py``).

* :func:`first_match` (a sensor's deferred wait): run the blocking ``poll`` in a thread
  (``asyncio.to_thread``: reads are file IO) every ``interval`` seconds until it returns a match. A failing
  poll is retried while its error is transient (a dropped connection, a throttled request), for at most
  :data:`MAX_CONSECUTIVE_TRANSIENT_ERRORS` polls in a row; an error about the table or the settings
  (``is_permanent``: a missing table, corrupt metadata, a bad option) is raised at once, since waiting
  cannot cure it. The caller turns what is raised into its error event.
* :class:`ErrorThrottle` (an ``AssetWatcher``'s trigger, which never gives up): a failing poll is logged at
  most every :data:`WATCHER_ERROR_LOG_SECONDS`, so a table that does not exist yet fills no log.

Example:
    >>> match = await first_match(lambda: watch.poll(table), 30.0, log, f"polling {table.uri}")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from airflow_lakeformat.triggers.watch import describe_error, is_permanent

T = TypeVar("T")


class WarningLog(Protocol):
    """What is logged to: a trigger's ``self.log`` (Airflow's logger) or a ``logging.Logger``."""

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...


#: Transient errors retried this many consecutive polls before a one-shot wait gives up.
MAX_CONSECUTIVE_TRANSIENT_ERRORS = 3
#: An Asset watcher logs a failing poll at most this often (seconds).
WATCHER_ERROR_LOG_SECONDS = 300.0


async def first_match(poll: Callable[[], T | None], interval: float, log: WarningLog, what: str) -> T:
    """The first non-None result of ``poll``, polled every ``interval`` seconds (module docstring).

    Args:
        poll: one blocking poll; returns a match or None.
        interval: seconds between polls.
        log: where a retried error is logged.
        what: what is polled, for that log line (e.g. ``"polling s3://lake/db.db/t"``).

    Returns:
        The match. Raises a permanent error at once, a transient one after it failed
        ``MAX_CONSECUTIVE_TRANSIENT_ERRORS`` polls in a row.
    """
    failures = 0
    while True:
        try:
            match = await asyncio.to_thread(poll)
            failures = 0
        except Exception as exc:
            failures += 1
            if is_permanent(exc) or failures >= MAX_CONSECUTIVE_TRANSIENT_ERRORS:
                raise
            log.warning("%s failed (%s); retrying", what, describe_error(exc))
            match = None
        if match is not None:
            return match
        await asyncio.sleep(interval)


class ErrorThrottle:
    """Logs a watcher's failing polls at most every :data:`WATCHER_ERROR_LOG_SECONDS` (module docstring)."""

    def __init__(self, log: WarningLog, what: str) -> None:
        self.log = log
        self.what = what
        self._last = float("-inf")

    def failed(self, exc: BaseException) -> None:
        """A poll failed: log it unless one was logged within the last period."""
        if time.monotonic() - self._last >= WATCHER_ERROR_LOG_SECONDS:
            self._last = time.monotonic()
            self.log.warning("%s: %s; will look again", self.what, describe_error(exc))
