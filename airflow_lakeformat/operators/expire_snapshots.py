"""``LakeformatExpireSnapshotsOperator``: snapshot expiry of a Paimon or an Iceberg table, in the worker or on Spark.

Paimon tables follow Paimon's rules (``docs/maintenance.md``: retain min/max, time judged on the successor,
expire limit, consumers, tags); Iceberg tables follow Java Iceberg's ``expire_snapshots`` (``docs/iceberg.md``:
snapshots older than ``older_than``, at least ``retain_min`` ancestors kept per branch, per-ref retention,
metadata committed through the table's catalog, then the files only expired snapshots reached deleted).
Both delete through the core's one deletion module; both dry-run unless ``dry_run=False``. The operator calls
``table.maintenance.expire_snapshots`` (the facade): an argument only one format takes is refused there, by name,
for a table of the other format.

Example:
    >>> LakeformatExpireSnapshotsOperator(task_id="expire", table="analytics.events", older_than="7 d",
    ...                                   retain_min=3, dry_run=False)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, duration_arg, optional_int, optional_older_than

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable


class LakeformatExpireSnapshotsOperator(LakeformatMaintenanceOperator):
    """Expire old snapshots and delete the files only they used.

    :param retain_min: keep at least this many snapshots (Paimon: ``snapshot.num-retained.min``, 10; Iceberg:
        ancestors of each branch head, ``history.expire.min-snapshots-to-keep``, 1). Templated.
    :param retain_max: Paimon only: keep at most this many (default: ``snapshot.num-retained.max``). Templated.
    :param older_than: Paimon: expire a snapshot only once its successor is older than this (a ``timedelta``
        or ``"1 h"``; default ``snapshot.time-retained``). Iceberg: expire snapshots older than this (a
        duration, or an ISO-8601 timestamp; default ``history.expire.max-snapshot-age-ms``, 5 days). Templated.
    :param max_deletes: Paimon only: snapshots expired per run (default: ``snapshot.expire.limit``, 50). Templated.
    :param clean_expired_metadata: Iceberg only: also remove partition specs and schemas no remaining snapshot
        uses. Templated.
    :param dry_run: report what would be deleted, delete nothing (default True: pass ``dry_run=False`` to
        delete). Templated.

    The XCom result is the expiry result JSON (``operation: expire-snapshots``, ``table``, ``format``,
    ``dryRun``, snapshots expired, files and bytes by kind, decisions) plus ``execution``.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "retain_min",
        "retain_max",
        "older_than",
        "max_deletes",
        "clean_expired_metadata",
    )
    operation = "expire-snapshots"
    spark_job = "expire_snapshots"
    spark_formats = frozenset({"paimon", "iceberg"})
    deletes = True

    def __init__(
        self,
        *,
        retain_min: int | str | None = None,
        retain_max: int | str | None = None,
        older_than: timedelta | str | None = None,
        max_deletes: int | str | None = None,
        clean_expired_metadata: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.retain_min = retain_min
        self.retain_max = retain_max
        self.older_than = older_than
        self.max_deletes = max_deletes
        self.clean_expired_metadata = clean_expired_metadata

    def _settings(self) -> dict[str, Any]:
        """The rendered arguments, checked; the facade refuses those the table's format does not take."""
        return {
            "retain_min": optional_int(self.retain_min, "retain_min"),
            "retain_max": optional_int(self.retain_max, "retain_max"),
            "older_than": optional_older_than(self.older_than, "older_than"),
            "max_deletes": optional_int(self.max_deletes, "max_deletes"),
            "clean_expired_metadata": as_bool(self.clean_expired_metadata, "clean_expired_metadata"),
        }

    def check_table(self, table: LakeTable) -> None:
        # Bad or misplaced arguments fail before the lock is taken (the facade checks, reading nothing).
        table.maintenance.check_expire_snapshots(**self._settings())

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        return table.maintenance.expire_snapshots(dry_run=self.is_dry_run, **self._settings()).to_json()

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        settings = self._settings()
        args: list[str] = []
        for key, flag in (
            ("retain_min", "--retain-min"),
            ("retain_max", "--retain-max"),
            ("max_deletes", "--max-deletes"),
        ):
            if settings.get(key) is not None:
                args += [flag, str(settings[key])]
        older_than = table.maintenance.check_expire_snapshots(**settings)
        if isinstance(older_than, timedelta):
            args += ["--older-than", duration_arg(older_than)]
        elif older_than is not None:  # an ISO-8601 timestamp (Iceberg)
            args += [
                "--older-than",
                older_than.isoformat() if isinstance(older_than, datetime) else older_than,
            ]
        if settings.get("clean_expired_metadata"):
            args.append("--clean-expired-metadata")
        return args
