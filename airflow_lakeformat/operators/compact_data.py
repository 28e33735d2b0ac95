"""``LakeformatCompactDataOperator``: bin-pack small data files, of a Paimon append table or an Iceberg table.

Paimon append tables run in the worker or on Spark, the same plan (``core/paimon/maintenance/data_compaction.py``)
committed as one COMPACT snapshot. Iceberg tables run in the worker: Java's ``rewrite_data_files`` bin-pack with
deletes applied, committed as ``replace`` snapshots validated against concurrent commits
(``core/iceberg/maintenance/data_compaction_run.py``); ``min_file_count`` is Java's ``min-input-files``,
``target_file_size`` its ``target-file-size-bytes``, ``partitions`` a partition filter by value. Both go through
``table.maintenance.compact_data`` with the connection's commit user, ``<commit_user_prefix>-<dag_id>-<task_id>``
(the Spark job gets it as ``--commit-user``); the operator holds the table's maintenance lock while it runs (dry
runs excepted). A table compaction refuses (a Paimon primary-key table, an Iceberg v3 table) fails the task
without retry with one message saying so, or skips it with ``skip_unsupported=True``.

Example:
    >>> LakeformatCompactDataOperator(task_id="compact_data", table="db.events", min_file_count=5)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSkipException

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable


def partition_specs(value: Any) -> list[dict[str, str | None]] | None:
    """Partition filters from a dict, a ``"k=v[,k=v]"`` string or a list of them; None or ``"*"``: all."""
    from airflow_lakeformat.core.table_writes import partition_filters

    return partition_filters(value)


class LakeformatCompactDataOperator(LakeformatMaintenanceOperator):
    """Rewrite small level-0 data files of an append table into files of ``target-file-size``.

    :param partitions: only these partitions: a list of dicts or ``"k=v[,k=v]"`` strings (None or ``"*"``:
        all). Templated.
    :param min_file_count: the smallest group worth a rewrite (default 5, Paimon's
        ``compaction.min.file-num``). Templated.
    :param target_file_size: e.g. ``"128 mb"`` (default: the table's ``target-file-size``). Templated.
    :param dry_run: plan and report, write and commit nothing. Templated.
    :param skip_unsupported: a table data compaction does not handle (an Iceberg table, primary keys,
        deletion vectors, a file format other than Parquet, ...) skips the task instead of failing it, for
        DAGs that maintain mixed lists of tables. Templated.

    The XCom result is the data-compaction JSON (``operation: compact-data``, ``table``, ``format``,
    ``dryRun``, ``snapshotId`` or null, ``groups``, ``filesRewritten``, ``filesWritten``, bytes) plus
    ``execution``.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "partitions",
        "min_file_count",
        "target_file_size",
        "skip_unsupported",
    )
    operation = "compact-data"
    spark_job = "compact_data"

    def __init__(
        self,
        *,
        partitions: Any = None,
        min_file_count: int | str | None = None,
        target_file_size: str | None = None,
        skip_unsupported: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.skip_unsupported = skip_unsupported
        self.partitions = partitions
        self.min_file_count = min_file_count
        self.target_file_size = target_file_size

    def check_table(self, table: LakeTable) -> None:
        from airflow_lakeformat.core.errors import UnsupportedFormatError

        try:
            table.maintenance.check_compact_data()  # Paimon: primary keys, deletion vectors; Iceberg: v3
        except UnsupportedFormatError as exc:
            if as_bool(self.skip_unsupported, "skip_unsupported"):
                raise AirflowSkipException(f"skipped: {exc}") from None
            raise

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        from airflow_lakeformat.core.units import parse_memory_size

        target = parse_memory_size(str(self.target_file_size)) if self.target_file_size else None
        return table.maintenance.compact_data(
            dry_run=self.is_dry_run,
            partitions=partition_specs(self.partitions),
            min_file_count=optional_int(self.min_file_count, "min_file_count"),
            target_file_size=target,
            commit_user=self.task_commit_user(context),
        ).to_json()

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        args: list[str] = []
        for spec in partition_specs(self.partitions) or []:
            args += ["--partition", ",".join(f"{k}={v}" for k, v in spec.items())]
        min_files = optional_int(self.min_file_count, "min_file_count")
        if min_files is not None:
            args += ["--min-file-count", str(min_files)]
        if self.target_file_size:
            args += ["--target-file-size", str(self.target_file_size)]
        args += ["--commit-user", self.task_commit_user(context)]
        return args
