"""How old a file must be before an orphan cleanup may delete it, per format, and the one "not given" rule.

An orphan cleanup lists files, then the set the table uses; a file a writer has written but not yet committed
looks like an orphan in between. Both formats therefore only take files older than ``older_than`` and refuse
a short one unless the caller says no writer is running:

* Paimon: ``older_than`` defaults to 1 day (Paimon's ``RemoveOrphanFilesAction``, ``olderThan`` of one day);
  under 1 hour is refused without the override.
* Iceberg: ``older_than`` defaults to 3 days (Java's ``DeleteOrphanFilesSparkAction``: now - 3 days); under
  24 hours is refused without the override (the procedure's check).

:meth:`OrphanAge.older_than` is the only place that turns "no ``older_than`` given" into the format's
default; the facade (``core/table_maintenance.py``), the CLI, the operators and the Spark jobs all call it.

Example:
    >>> ORPHAN_AGES["iceberg"].older_than(None)
    datetime.timedelta(days=3)
    >>> ORPHAN_AGES["paimon"].older_than(timedelta(hours=6))
    datetime.timedelta(seconds=21600)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["ICEBERG_ORPHAN_AGE", "ORPHAN_AGES", "PAIMON_ORPHAN_AGE", "OrphanAge"]


@dataclass(frozen=True)
class OrphanAge:
    """A format's orphan-age rule: the default ``older_than`` and the floor under which the override is needed."""

    default: timedelta
    minimum: timedelta

    def older_than(self, given: timedelta | None) -> timedelta:
        """``given``, or the format's default when none was given (None)."""
        return self.default if given is None else given


PAIMON_ORPHAN_AGE = OrphanAge(default=timedelta(days=1), minimum=timedelta(hours=1))
ICEBERG_ORPHAN_AGE = OrphanAge(default=timedelta(days=3), minimum=timedelta(hours=24))
ORPHAN_AGES: dict[str, OrphanAge] = {"paimon": PAIMON_ORPHAN_AGE, "iceberg": ICEBERG_ORPHAN_AGE}
