"""``LakeformatExpireSnapshotsOperator``: Paimon's snapshot expiry, in the worker or as a Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import duration_arg, optional_duration, optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.paimon.table import Table


class LakeformatExpireSnapshotsOperator(LakeformatMaintenanceOperator):
    """Expire old snapshots and delete the files only they used (``docs/maintenance.md``).

    :param retain_min: keep at least this many snapshots (default: the table's
        ``snapshot.num-retained.min``, 10). Templated.
    :param retain_max: keep at most this many (default: ``snapshot.num-retained.max``). Templated.
    :param older_than: expire a snapshot only once its successor is older than this: a ``timedelta`` or
        Paimon's syntax (``"1 h"``; default: ``snapshot.time-retained``). Templated.
    :param max_deletes: snapshots expired per run (default: ``snapshot.expire.limit``, 50). Templated.
    :param dry_run: report what would be deleted, delete nothing (default True: pass ``dry_run=False`` to
        delete). Templated.

    The XCom result is the expiry result JSON (snapshots expired, files and bytes by kind, decisions)
    plus ``table`` and ``execution``.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "retain_min",
        "retain_max",
        "older_than",
        "max_deletes",
    )
    spark_job = "expire_snapshots"
    deletes = True

    def __init__(
        self,
        *,
        retain_min: int | str | None = None,
        retain_max: int | str | None = None,
        older_than: timedelta | str | None = None,
        max_deletes: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.retain_min = retain_min
        self.retain_max = retain_max
        self.older_than = older_than
        self.max_deletes = max_deletes

    def _settings(self) -> dict[str, Any]:
        return {
            "retain_min": optional_int(self.retain_min, "retain_min"),
            "retain_max": optional_int(self.retain_max, "retain_max"),
            "older_than": optional_duration(self.older_than, "older_than"),
            "max_deletes": optional_int(self.max_deletes, "max_deletes"),
        }

    def run_local(self, context: Context, table: Table) -> dict[str, Any]:
        from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots

        return expire_snapshots(table, dry_run=self.is_dry_run, **self._settings()).to_json()

    def spark_job_args(self, context: Context) -> list[str]:
        settings = self._settings()
        args = []
        for key, flag in (
            ("retain_min", "--retain-min"),
            ("retain_max", "--retain-max"),
            ("max_deletes", "--max-deletes"),
        ):
            if settings[key] is not None:
                args += [flag, str(settings[key])]
        if settings["older_than"] is not None:
            args += ["--older-than", duration_arg(settings["older_than"])]
        return args
