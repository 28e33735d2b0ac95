"""``LakeformatCompactDataOperator``: compact the data files of a Paimon table or an Iceberg table.

Paimon append tables: the same plan (``core/paimon/maintenance/data_compaction.py``) committed as one COMPACT
snapshot. Paimon primary-key tables: Paimon's merge-tree compaction (``core/paimon/merge_tree``), ``mode``
``"full"`` (every bucket into one max-level run) or ``"minor"`` (the default: Paimon's universal pick); on Spark
the driver plans and commits as in the worker and executors merge the buckets (the job gets ``--full`` or
``--minor``). Iceberg tables: Java's ``rewrite_data_files`` with deletes applied, committed as ``replace`` snapshots
validated against concurrent commits (``core/iceberg/maintenance/data_compaction_run.py``); ``min_file_count`` is
Java's ``min-input-files``, ``target_file_size`` its ``target-file-size-bytes``, ``partitions`` a partition filter
by value, and ``options`` (Java's options by name) and ``where`` (a predicate) are passed on as they are. Both
formats run in the worker (``table.maintenance.compact_data``) or on Spark (``spark/jobs/compact_data.py``: the
driver plans and commits, executors rewrite the groups; Iceberg tables of the connection's catalog too), with the
connection's commit user, ``<commit_user_prefix>-<dag_id>-<task_id>`` (the Spark job gets it as ``--commit-user``);
the operator holds the table's maintenance lock while it runs (dry runs excepted). A table compaction refuses (a
Paimon primary-key table with a changelog producer or deletion vectors, an Iceberg v3 table) fails the task without
retry with one message saying so, or skips it with ``skip_unsupported=True``.

Example:
    >>> LakeformatCompactDataOperator(task_id="compact_data", table="db.events", min_file_count=5,
    ...                               options={"partial-progress.enabled": "true"}, execution="spark")  # doctest: +SKIP
    >>> LakeformatCompactDataOperator(task_id="compact_orders", table="db.orders", mode="full")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


def compaction_options(value: Any) -> dict[str, str] | None:
    """Java's option map from a dict or its JSON text (a templated value renders as text); None when empty.

    Example:
        >>> compaction_options('{"min-input-files": 2, "partial-progress.enabled": true}')
        {'min-input-files': '2', 'partial-progress.enabled': 'true'}
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"options: {value!r} is not a JSON object of rewrite options ({exc.msg})"
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"options: expected a mapping of option names to values, not {type(value).__name__}")
    return {str(k): _option_text(v) for k, v in value.items()} or None


def _text(value: Any) -> str | None:
    """A templated text argument: None, blank, or ``"None"`` (what ``"{{ params.x }}"`` renders for a null
    Param without native rendering; no mode, strategy, predicate or sort order is spelled that way) is not
    given."""
    text = str(value or "").strip()
    return None if text in ("", "None") else text


def _option_text(value: Any) -> str:
    """An option value as Java's option map holds it: booleans lower-case, everything else as text."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class LakeformatCompactDataOperator(LakeformatMaintenanceOperator):
    """Rewrite small data files into files of the target size (Paimon append tables, Iceberg tables).

    :param partitions: only these partitions: a list of dicts or ``"k=v[,k=v]"`` strings (None or ``"*"``:
        all). Templated.
    :param min_file_count: the smallest group worth a rewrite (default 5, Paimon's
        ``compaction.min.file-num``). Templated.
    :param target_file_size: e.g. ``"128 mb"`` (default: the table's ``target-file-size``). Templated.
    :param options: Iceberg only: Java's ``rewrite_data_files`` options by name, e.g.
        ``{"partial-progress.enabled": "true", "remove-dangling-deletes": "true"}`` (a Paimon table refuses them
        by name). Templated.
    :param where: Iceberg only: rewrite only files whose partition may hold rows matching this predicate
        (``"cat = 'a'"``). Templated.
    :param strategy: Iceberg only: ``"binpack"`` (default) or ``"sort"``, Java's procedure argument. Templated.
    :param sort_order: Iceberg only: Java's ``sort_order`` text (``"id DESC NULLS LAST, name"``; implies
        ``sort``; default: the table's sort order). Templated.
    :param mode: Paimon primary-key tables: ``"full"`` (every bucket merged into one sorted run at the max level)
        or ``"minor"`` (Paimon's universal compaction pick; the default). An append table takes ``"minor"`` (its
        bin-pack) and refuses ``"full"``; an Iceberg table refuses it by name. Templated.
    :param dry_run: plan and report, write and commit nothing. Templated.
    :param skip_unsupported: a table data compaction does not handle (Paimon primary keys or deletion vectors,
        an Iceberg v3 table, a file format other than Parquet, ...) skips the task instead of failing it, for
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
        "options",
        "where",
        "strategy",
        "sort_order",
        "mode",
        "skip_unsupported",
    )
    operation = "compact-data"
    spark_job = "compact_data"
    spark_formats = frozenset({"paimon", "iceberg"})
    spark_opens_catalogs = True

    def __init__(
        self,
        *,
        partitions: Any = None,
        min_file_count: int | str | None = None,
        target_file_size: str | None = None,
        options: dict[str, Any] | str | None = None,
        where: str | None = None,
        strategy: str | None = None,
        sort_order: str | None = None,
        mode: str | None = None,
        skip_unsupported: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.skip_unsupported = skip_unsupported
        self.partitions = partitions
        self.min_file_count = min_file_count
        self.target_file_size = target_file_size
        self.options = options
        self.where = where
        self.strategy = strategy
        self.sort_order = sort_order

    def _iceberg_arguments(self) -> dict[str, Any]:
        """Iceberg's own arguments that were given (rendered; empty text is not given): the Paimon facade and the
        Paimon half of the Spark job refuse them by name."""
        given = {
            "options": compaction_options(self.options),
            "where": _text(self.where),
            "strategy": _text(self.strategy),
            "sort_order": _text(self.sort_order),
        }
        return {name: value for name, value in given.items() if value}

    def check_table(self, table: LakeTable) -> None:
        from airflow_lakeformat.core.errors import MaintenanceRefusedError, UnsupportedFormatError

        try:
            # Paimon: deletion vectors, changelog producers (UnsupportedFormatError), merge options the merge-tree
            # compaction does not implement (MaintenanceRefusedError); Iceberg: v3
            table.maintenance.check_compact_data(mode=_text(self.mode))
        except (UnsupportedFormatError, MaintenanceRefusedError) as exc:
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
            mode=_text(self.mode),  # rendered; an Iceberg table refuses it by name
            **self._iceberg_arguments(),
        ).to_json()

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        args: list[str] = []
        iceberg = self._iceberg_arguments()
        for key, value in (iceberg.pop("options", None) or {}).items():
            args += ["--option", f"{key}={value}"]
        for name, value in iceberg.items():
            args += [f"--{name.replace('_', '-')}", value]
        for spec in partition_specs(self.partitions) or []:
            args += ["--partition", ",".join(f"{k}={v}" for k, v in spec.items())]
        min_files = optional_int(self.min_file_count, "min_file_count")
        if min_files is not None:
            args += ["--min-file-count", str(min_files)]
        if self.target_file_size:
            args += ["--target-file-size", str(self.target_file_size)]
        mode = _text(self.mode)  # checked in check_table: "full" or "minor"
        if mode is not None:
            args.append(f"--{mode}")
        args += ["--commit-user", self.task_commit_user(context)]
        return args
