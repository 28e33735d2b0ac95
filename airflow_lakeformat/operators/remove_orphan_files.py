"""``LakeformatRemoveOrphanFilesOperator``: orphan-file cleanup, in the worker or as a Spark job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, duration_arg, optional_duration

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.paimon.table import Table


class LakeformatRemoveOrphanFilesOperator(LakeformatMaintenanceOperator):
    """Delete old files that no snapshot, tag or changelog of any branch uses (``docs/maintenance.md``).

    :param older_than: only files older than this are candidates: a ``timedelta`` or Paimon's syntax
        (default 1 day; under 1 hour is refused unless ``allow_short_older_than``). Templated.
    :param allow_short_older_than: accept ``older_than`` under 1 hour (only when no writer runs).
    :param dry_run: report what would be deleted, delete nothing (default True: pass ``dry_run=False`` to
        delete). Templated.
    """

    template_fields: Sequence[str] = (*LakeformatMaintenanceOperator.template_fields, "older_than")
    spark_job = "remove_orphan_files"
    deletes = True

    def __init__(
        self,
        *,
        older_than: timedelta | str | None = None,
        allow_short_older_than: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.older_than = older_than
        self.allow_short_older_than = allow_short_older_than

    def _older_than(self) -> timedelta:
        from airflow_lakeformat.core.paimon.maintenance.orphans import DEFAULT_OLDER_THAN

        return optional_duration(self.older_than, "older_than") or DEFAULT_OLDER_THAN

    def run_local(self, context: Context, table: Table) -> dict[str, Any]:
        from airflow_lakeformat.core.paimon.maintenance.orphans import remove_orphan_files

        return remove_orphan_files(
            table,
            dry_run=self.is_dry_run,
            older_than=self._older_than(),
            allow_short_older_than=as_bool(self.allow_short_older_than, "allow_short_older_than"),
        ).to_json()

    def spark_job_args(self, context: Context) -> list[str]:
        args = ["--older-than", duration_arg(self._older_than())]
        if as_bool(self.allow_short_older_than, "allow_short_older_than"):
            args.append("--allow-short-older-than")
        return args
