"""``LakeformatRemoveOrphanFilesOperator``: orphan-file cleanup of a Paimon or an Iceberg table, in the worker
or as a Spark job.

Paimon tables: files no snapshot, tag or changelog of any branch uses (``docs/maintenance.md``; default age
1 day, under 1 hour refused). Iceberg tables: Java's ``DeleteOrphanFilesSparkAction`` rules
(``docs/iceberg.md``; default age 3 days, under 24 hours refused, paths compared after scheme normalisation,
a file valid under another scheme or authority aborts the run). Both dry-run unless ``dry_run=False``.

Example:
    >>> LakeformatRemoveOrphanFilesOperator(task_id="orphans", table="db.events", older_than="3 d",
    ...                                     dry_run=False)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, duration_arg, optional_duration

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable


class LakeformatRemoveOrphanFilesOperator(LakeformatMaintenanceOperator):
    """Delete old files that no snapshot (of any branch, tag or changelog) or metadata file uses.

    :param older_than: only files older than this are candidates: a ``timedelta`` or ``"3 d"`` (default:
        Paimon 1 day, Iceberg 3 days; under 1 hour (Paimon) or 24 hours (Iceberg) is refused unless
        ``allow_short_older_than``). Templated.
    :param allow_short_older_than: accept a shorter ``older_than`` (only when no writer runs). Templated.
    :param dry_run: report what would be deleted, delete nothing (default True: pass ``dry_run=False`` to
        delete). Templated.

    The XCom result is the cleanup result JSON (``operation: remove-orphan-files``, ``table``, ``format``,
    ``dryRun``, files listed, candidates, orphans, files and bytes by kind) plus ``execution``.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "older_than",
        "allow_short_older_than",
    )
    operation = "remove-orphan-files"
    spark_job = "remove_orphan_files"
    spark_formats = frozenset({"paimon", "iceberg"})
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

    def _older_than(self, table: LakeTable) -> timedelta:
        """The given age, or the table's format's default (the facade's one rule)."""
        return table.maintenance.orphan_older_than(optional_duration(self.older_than, "older_than"))

    def check_table(self, table: LakeTable) -> None:
        self._older_than(table)
        as_bool(self.allow_short_older_than, "allow_short_older_than")

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        return table.maintenance.remove_orphan_files(
            dry_run=self.is_dry_run,
            older_than=self._older_than(table),
            allow_short_older_than=as_bool(self.allow_short_older_than, "allow_short_older_than"),
        ).to_json()

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        args = ["--older-than", duration_arg(self._older_than(table))]
        if as_bool(self.allow_short_older_than, "allow_short_older_than"):
            args.append("--allow-short-older-than")
        return args
