"""``LakeformatExpireSnapshotsOperator``: snapshot expiry of a Paimon or an Iceberg table, in the worker or on Spark.

Paimon tables follow Paimon's rules (``docs/maintenance.md``: retain min/max, time judged on the successor,
expire limit, consumers, tags); Iceberg tables follow Java Iceberg's ``expire_snapshots`` (``docs/iceberg.md``:
snapshots older than ``older_than``, at least ``retain_min`` ancestors kept per branch, per-ref retention,
metadata committed through the table's catalog, then the files only expired snapshots reached deleted).
Both delete through the core's one deletion module; both dry-run unless ``dry_run=False``.

Example:
    >>> LakeformatExpireSnapshotsOperator(task_id="expire", table="analytics.events", older_than="7 d",
    ...                                   retain_min=3, dry_run=False)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import (
    as_bool,
    duration_arg,
    optional_duration,
    optional_int,
    optional_older_than,
)

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
    spark_iceberg = True
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

    def _settings(self, table: LakeTable) -> dict[str, Any]:
        """The arguments for ``table``'s format; arguments of the other format only are refused."""
        retain_max = optional_int(self.retain_max, "retain_max")
        max_deletes = optional_int(self.max_deletes, "max_deletes")
        clean = as_bool(self.clean_expired_metadata, "clean_expired_metadata")
        if table.format == "iceberg":
            given = [
                name for name, value in (("retain_max", retain_max), ("max_deletes", max_deletes)) if value
            ]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: only for Paimon tables ({table.uri} is an Iceberg table)"
                )
            return {
                "retain_min": optional_int(self.retain_min, "retain_min"),
                "older_than": optional_older_than(self.older_than, "older_than"),
                "clean_expired_metadata": clean,
            }
        if clean:
            raise ValueError(
                f"clean_expired_metadata: only for Iceberg tables ({table.uri} is a Paimon table)"
            )
        return {
            "retain_min": optional_int(self.retain_min, "retain_min"),
            "retain_max": retain_max,
            "older_than": optional_duration(self.older_than, "older_than"),
            "max_deletes": max_deletes,
        }

    def check_table(self, table: LakeTable) -> None:
        self._settings(table)  # bad or misplaced arguments fail before the lock is taken

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        if table.format == "iceberg":
            from airflow_lakeformat.core.iceberg.maintenance.expiry import expire_snapshots as expire_iceberg

            settings = self._settings(table)
            return expire_iceberg(
                table.native,  # type: ignore[arg-type]
                dry_run=self.is_dry_run,
                older_than=settings["older_than"],
                retain_last=settings["retain_min"],
                clean_expired_metadata=settings["clean_expired_metadata"],
            ).to_json()
        from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots

        return expire_snapshots(table.native, dry_run=self.is_dry_run, **self._settings(table)).to_json()  # type: ignore[arg-type]

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        settings = self._settings(table)
        args = []
        for key, flag in (
            ("retain_min", "--retain-min"),
            ("retain_max", "--retain-max"),
            ("max_deletes", "--max-deletes"),
        ):
            if settings.get(key) is not None:
                args += [flag, str(settings[key])]
        older_than = settings["older_than"]
        if older_than is not None:
            args += [
                "--older-than",
                duration_arg(older_than) if isinstance(older_than, timedelta) else older_than,
            ]
        if settings.get("clean_expired_metadata"):
            args.append("--clean-expired-metadata")
        return args
