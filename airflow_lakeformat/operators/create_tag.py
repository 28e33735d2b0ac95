"""``LakeformatCreateTagOperator``: a scheduled (or named) tag on a Paimon or an Iceberg table.

Without ``tag_name``, the tag is named as Paimon's automatic tag creation names it (``tag.creation-period``:
``daily``, ``hourly``, ``two-hours``, or ``tag.creation-period-duration``; ``tag.period-formatter``:
``with_dashes``, ``without_dashes``, ``without_dashes_and_spaces``), after the period that ended at the DAG run's
data interval end: a daily DAG's run for 2024-01-01 makes tag ``2024-01-01``. The period settings come from the
operator's arguments, else (Paimon) the table's options, else Paimon's defaults (daily, with dashes). After
creating, ``tag.num-retained-max`` (argument or Paimon option) deletes the oldest *automatic* tags, those whose
names parse with the period's formatter (#5785/#5786); other tags are never touched. New tags get
``time_retained`` (argument, else Paimon's ``tag.default-time-retained``): Paimon's ``tagTimeRetained``, Iceberg's
``max-ref-age-ms``; ``LakeformatExpireSnapshotsOperator`` on Iceberg and ``lakeformat expire-tags`` remove them
once it has passed.

It is idempotent: a re-run finds the tag and leaves it as it is (Java's ``ignoreIfExists``), reported in the
result's ``alreadyExisted``. Deleting a tag deletes only the tag; files only it held are left to snapshot expiry
and orphan cleanup. Runs in the worker (a few metadata reads and one small write), under the table's maintenance
lock; the XCom value is the tag result's JSON (``operation: create-tag``, ``created``, ``alreadyExisted``,
``deleted``, ``tags``, ``decisions``) plus ``execution``. There is no expire-tags operator: the CLI's
``expire-tags`` (or ``table.maintenance.expire_tags`` in a ``@task``) does that.

Example:
    >>> LakeformatCreateTagOperator(task_id="daily_tag", table="db.orders", period="daily",
    ...                             num_retained_max=30, time_retained="45 d")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, optional_duration, optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable


class LakeformatCreateTagOperator(LakeformatMaintenanceOperator):
    """Create the tag of the DAG run's period (or ``tag_name``), then apply the retention of automatic tags.

    :param tag_name: the tag's name (default: named from the data interval end by the period rules). Templated.
    :param period: ``daily``, ``hourly`` or ``two-hours`` (default: Paimon ``tag.creation-period``, else daily).
        Templated.
    :param period_duration: a custom period, e.g. ``"30 min"`` (default: Paimon ``tag.creation-period-duration``,
        else none). Templated.
    :param period_formatter: ``with_dashes``, ``without_dashes`` or ``without_dashes_and_spaces`` (default: Paimon
        ``tag.period-formatter``, else with_dashes). Templated.
    :param time_zone: the zone whose wall clock names the periods (default: UTC, Airflow's). Templated.
    :param snapshot_id: the snapshot to tag (default: the latest, Iceberg the current one). Templated.
    :param time_retained: the new tag's retention (default: Paimon ``tag.default-time-retained``, else none).
        Templated.
    :param num_retained_max: keep at most this many automatic tags (default: Paimon ``tag.num-retained-max``,
        else all). Templated.
    :param ignore_if_exists: with ``tag_name``: an existing tag of that name is left as it is (default True: a
        re-run is a no-op); False fails the task instead. A period-named tag is always left as it is. Templated.
    :param dry_run: report, change nothing (default False). Templated.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "tag_name",
        "period",
        "period_duration",
        "period_formatter",
        "time_zone",
        "snapshot_id",
        "time_retained",
        "num_retained_max",
        "ignore_if_exists",
    )
    operation = "create-tag"

    def __init__(
        self,
        *,
        tag_name: str | None = None,
        period: str | None = None,
        period_duration: timedelta | str | None = None,
        period_formatter: str | None = None,
        time_zone: str | None = None,
        snapshot_id: int | str | None = None,
        time_retained: timedelta | str | None = None,
        num_retained_max: int | str | None = None,
        ignore_if_exists: bool | str = True,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("execution", "local")
        super().__init__(**kwargs)
        self.tag_name = tag_name
        self.period = period
        self.period_duration = period_duration
        self.period_formatter = period_formatter
        self.time_zone = time_zone
        self.snapshot_id = snapshot_id
        self.time_retained = time_retained
        self.num_retained_max = num_retained_max
        self.ignore_if_exists = ignore_if_exists

    def _settings(self) -> dict[str, Any]:
        """The rendered arguments, checked (a bad one fails before the lock is taken)."""
        return {
            "period": self.period or None,
            "period_duration": optional_duration(self.period_duration, "period_duration"),
            "formatter": self.period_formatter or None,
            "num_retained_max": optional_int(self.num_retained_max, "num_retained_max"),
            "time_retained": optional_duration(self.time_retained, "time_retained"),
            "snapshot_id": optional_int(self.snapshot_id, "snapshot_id"),
            "time_zone": self.time_zone or None,
        }

    def check_table(self, table: LakeTable) -> None:
        self._settings()
        as_bool(self.ignore_if_exists, "ignore_if_exists")

    @staticmethod
    def period_end(context: Mapping[str, Any]) -> datetime:
        """The time the tag is named from: the data interval end, else the logical date, else now (UTC)."""
        for key in ("data_interval_end", "logical_date"):
            value = context.get(key)
            if isinstance(value, datetime):
                return value
        return datetime.now(timezone.utc)

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        settings = self._settings()
        ignore = as_bool(self.ignore_if_exists, "ignore_if_exists")
        if self.tag_name:
            return table.maintenance.create_tag(
                str(self.tag_name),
                settings["snapshot_id"],
                settings["time_retained"],
                ignore_if_exists=ignore,
                dry_run=self.is_dry_run,
            ).to_json()
        when = self.period_end(context)
        self.log.info("Naming the tag from the period ending %s", when.isoformat())
        return table.maintenance.create_scheduled_tag(when, dry_run=self.is_dry_run, **settings).to_json()

    def summarize(self, result: Mapping[str, Any]) -> str:
        from airflow_lakeformat.core.maintenance.tag_results import tag_summary

        table = result.get("table")
        return f"{table}: {tag_summary(dict(result))}" if table else tag_summary(dict(result))
