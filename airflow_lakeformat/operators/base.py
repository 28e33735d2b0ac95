"""What every Lakeformat operator shares: the table and connection, one result shape in XCom, error mapping.

:class:`LakeformatBaseOperator` resolves the table through :class:`LakeformatHook` (a Paimon or an Iceberg
table: a root URI, ``db.table`` under the warehouse, or ``namespace.table`` of the connection's Iceberg
catalog), runs the subclass's work, logs a one-line summary plus the JSON result, and returns the JSON (so it
lands in XCom). Every operator's result has ONE shape (:func:`result_document`): ``operation``, ``table``,
``format`` and ``dryRun`` first, then the operation's own fields (and ``execution`` for the operators that can
run on Spark). Errors are mapped once, here, and shown once (the mapped exception is raised ``from None``
when its cause would only repeat the message):

* ``CommitStateUnknownError`` (and a Spark job's exit code 8) fails the task *without retry*: whether the
  commit landed is unknown, and a blind retry of a delete could delete what the landed commit still
  references. The message says how to check and re-run.
* Errors about the table or the settings (missing table, corrupt or unsupported metadata, an operation a
  format does not support yet, a refused request, bad connection settings or arguments, access denied) fail
  without retry too: a retry would fail the same.
* Anything else (a dropped connection, a held maintenance lock, a conflict with a concurrent commit
  that a new attempt resolves) is raised as is, so the task's ``retries`` apply.

:class:`LakeformatMaintenanceOperator` adds what maintenance needs: ``dry_run``, the per-table maintenance
lock, the commit user of its commits (the connection's ``commit_user_prefix``, the DAG and the task), and
``execution``: ``local`` runs the core in the worker, ``spark`` submits the operation's Spark job through
``SparkSubmitHook`` (``operators/spark_submit.py``), ``auto`` picks Spark when the latest snapshot references
at least ``spark_min_files`` live data files or ``spark_min_manifests`` manifests (counted from the manifest
lists alone, or for Iceberg from the snapshot summary and the manifest list: ``table.maintenance.size()``).
Most Spark jobs open tables by their root only: a catalog table on their Spark is refused with
``UnsupportedFormatError`` before anything runs, and ``auto`` keeps it in the worker. A job whose executors need
no catalog (``spark_opens_catalogs``: data compaction, whose driver commits through the catalog and whose
executors read the metadata file it points at) gets ``--table namespace.table`` and the connection's catalog in
its environment (``$LAKEFORMAT_ICEBERG_CATALOG``, never on its command line).

Every operator reaches the table through the facade (``core/tables.py``'s ``open_table`` and
``table.maintenance``, ``core/table_maintenance.py``): nothing here imports a format package.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_lakeformat.hooks.lakeformat import (
    DEFAULT_CONN_ID,
    LakeformatConnectionError,
    LakeformatHook,
    choose_conn_id,
)
from airflow_lakeformat.operators.lineage import LakeformatLineageMixin
from airflow_lakeformat.operators.spark_submit import (
    JobSubmission,
    commit_state_unknown_message,
    make_submit_hook,
    submit_job,
)
from airflow_lakeformat.operators.templated import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.maintenance.lock import MaintenanceLock
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable

    LakeTable = PaimonTable | IcebergLakeTable
else:
    LakeTable = Any  # core/tables.py's PaimonTable | IcebergLakeTable, imported when a task runs

__all__ = [
    "LakeTable",
    "LakeformatBaseOperator",
    "LakeformatMaintenanceOperator",
    "commit_state_unknown_message",
    "map_error",
    "result_document",
]

Execution = Literal["auto", "local", "spark"]
EXECUTIONS: tuple[str, ...] = ("auto", "local", "spark")
# Thresholds for execution="auto". In-process planning reads about 60k manifest entries per second and
# a worker holds every live file in memory while it plans, so from a few hundred thousand files on the
# cluster is the better place; the manifest count bounds the number of reads.
AUTO_SPARK_MIN_FILES = 250_000
AUTO_SPARK_MIN_MANIFESTS = 5_000
DEFAULT_LOCK_LEASE = timedelta(hours=2)
DEFAULT_LOCK_POLL_INTERVAL = 30.0
# The keys every result starts with, in this order.
RESULT_HEAD = ("operation", "table", "format", "dryRun")


def map_error(exc: BaseException, table_uri: str, conn_id: str) -> BaseException | None:
    """The Airflow exception to raise instead of ``exc``, or None to re-raise it (retryable)."""
    from airflow_lakeformat.core import errors

    if isinstance(exc, errors.CommitStateUnknownError):
        return AirflowFailException(commit_state_unknown_message(exc, table_uri))
    permanent = (
        errors.TableNotFoundError,
        errors.CorruptMetadataError,
        errors.UnsupportedFormatError,
        errors.UnsupportedStorageError,
        errors.SnapshotNotFoundError,
        errors.TagNotFoundError,
        errors.CommitConflictError,
        errors.RegisterError,
        errors.MaintenanceRefusedError,
        LakeformatConnectionError,
        # Bad arguments (a templated mode or duration that does not parse): a retry renders the same.
        ValueError,
    )
    if isinstance(exc, permanent):
        return AirflowFailException(str(exc))
    if isinstance(exc, PermissionError):
        return AirflowFailException(
            f"{table_uri}: access denied ({exc}); check the credentials of connection {conn_id!r}"
        )
    return None


def cause_adds_nothing(exc: BaseException) -> bool:
    """Whether chaining ``exc`` under its mapped exception would only show the same message twice.

    Our typed errors and connection errors name the file or setting already; an unexpected ``ValueError``
    keeps its traceback (it says where the bug is).
    """
    from airflow_lakeformat.core.errors import LakeformatError

    return isinstance(exc, (LakeformatError, LakeformatConnectionError, PermissionError))


def result_document(operation: str, result: Mapping[str, Any], **head: Any) -> dict[str, Any]:
    """The one XCom shape: ``operation``, ``table``, ``format``, ``dryRun``, then the operation's fields.

    ``head`` values (e.g. ``table`` and ``format`` of the opened table) win over the result's. A Spark job's
    bookkeeping (``job``, and ``mode: spark``) is dropped: ``execution`` says where the work ran.

    Example:
        >>> result_document("compact-data", {"job": "compact_data", "mode": "spark", "groups": 1},
        ...                 table="/wh/db.db/t", format="paimon")
        {'operation': 'compact-data', 'table': '/wh/db.db/t', 'format': 'paimon', 'dryRun': False, 'groups': 1}
    """
    fields = {**result, **{k: v for k, v in head.items() if v is not None}}
    fields.pop("job", None)
    if fields.get("mode") == "spark":
        fields.pop("mode")
    document: dict[str, Any] = {
        "operation": fields.pop("operation", None) or operation,
        "table": fields.pop("table", None),
        "format": fields.pop("format", None),
        "dryRun": bool(fields.pop("dryRun", False)),
    }
    document.update(fields)
    return document


class LakeformatBaseOperator(LakeformatLineageMixin, BaseOperator):
    """Base of the Lakeformat operators: table, connection, one result shape in XCom, error mapping.

    :param table: full table URI, ``db.table`` under the connection's warehouse, or ``namespace.table`` of
        the connection's Iceberg catalog. Templated.
    :param lakeformat_conn_id: the ``lakeformat`` connection. Templated.
    :param iceberg_conn_id: instead, a connection of the official Iceberg provider (type ``iceberg``) as the
        catalog of ``namespace.table`` (``hooks/lakeformat.py``); giving both is refused. Templated.
    :param table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's ``format`` extra, else detected
        from the table's files). Templated.
    """

    template_fields: Sequence[str] = ("table", "lakeformat_conn_id", "iceberg_conn_id", "table_format")
    ui_color = "#d6ecf3"
    operation: ClassVar[str] = "operation"  # the result's ``operation`` unless the result names its own

    def __init__(
        self,
        *,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        iceberg_conn_id: str | None = None,
        table_format: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        choose_conn_id(lakeformat_conn_id, iceberg_conn_id)  # both (or neither) fails the DAG's parse
        self.table = table
        self.lakeformat_conn_id = lakeformat_conn_id
        self.iceberg_conn_id = iceberg_conn_id
        self.table_format = table_format
        # Read by the OpenLineage mixin (operators/lineage.py) after the task ran.
        self._lineage_table_uri = None
        self._lineage_result = None

    @property
    def conn_id_in_use(self) -> str:
        """The connection that places the table: ``iceberg_conn_id`` when given, else ``lakeformat_conn_id``."""
        return self.iceberg_conn_id or self.lakeformat_conn_id

    @cached_property
    def hook(self) -> LakeformatHook:
        return LakeformatHook(self.lakeformat_conn_id, iceberg_conn_id=self.iceberg_conn_id)

    def execute(self, context: Context) -> dict[str, Any]:
        table_uri = self.table
        try:
            table_uri = self.hook.resolve(self.table, self.table_format).target
            result = result_document(self.operation, self.run(context, table_uri))
        except AirflowException:
            raise
        except Exception as exc:
            mapped = map_error(exc, table_uri, self.conn_id_in_use)
            if mapped is None:
                raise
            if cause_adds_nothing(exc):
                raise mapped from None
            raise mapped from exc
        self._lineage_result = result
        self.log.info("%s", self.summarize(result))
        self.log.info("Result: %s", json.dumps(result, sort_keys=True, default=str))
        return result

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        """Do the work; return a JSON-able dict (it becomes the XCom return value, see :func:`result_document`).

        ``table_uri`` is the table's root URI, or ``namespace.table`` for a table of the connection's catalog.
        """
        raise NotImplementedError

    def open_lake_table(self, table_uri: str) -> LakeTable:
        """The table of either format (``core/tables.py``), remembered for lineage."""
        table = self.hook.open_lake_table(table_uri, self.table_format)
        self._lineage_table_uri = table.maintenance.table.uri
        return table

    def summarize(self, result: Mapping[str, Any]) -> str:
        """One line for the task log: the same summary the CLI prints for the operation's result."""
        from airflow_lakeformat.core.maintenance.results import summary

        return summary(result)

    def lock_owner(self, context: Context) -> str:
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        where = f"{ti.dag_id}/{context['run_id']}/{ti.task_id}" + (f"[{map_index}]" if map_index >= 0 else "")
        return f"airflow {where} try {ti.try_number}"

    def task_commit_user(self, context: Context) -> str:
        """The commit user of this task's commits: the connection's prefix, the DAG id and the task id."""
        ti = context["ti"]
        return self.hook.commit_user(ti.dag_id, ti.task_id)


class LakeformatMaintenanceOperator(LakeformatBaseOperator):
    """Base of maintenance operators: dry run, maintenance lock, and local or Spark execution.

    :param dry_run: plan and report, change nothing. Templated. Default: True for the operators that delete
        files (expiry, orphan cleanup), as in the core's Python API; False for the others.
    :param execution: ``"local"`` (in the worker), ``"spark"`` (spark-submit the job) or ``"auto"``
        (Spark from ``spark_min_files`` live files or ``spark_min_manifests`` manifests). Templated.
    :param spark_conn_id: the Spark connection (its host is the master). Templated.
    :param spark_conf: extra ``--conf`` settings. Templated.
    :param executor_cores, executor_memory, num_executors, total_executor_cores, driver_memory: passed to
        ``spark-submit``.
    :param spark_parallelism: the job's ``--parallelism``.
    :param spark_env_vars: extra environment for the job (storage settings are added from the connection).
    :param spark_py_files: ship this package to the cluster as a ``--py-files`` zip (when the cluster's
        Python lacks the airflow-lakeformat package).
    :param maintenance_lock: take the table's maintenance lock while running (dry runs never take it).
    :param lock_lease: how long the lease is valid; it must outlast the run.
    :param lock_wait: wait up to this long for a held lock (None: fail at once; the task's retries apply).
    """

    template_fields: Sequence[str] = (
        *LakeformatBaseOperator.template_fields,
        "dry_run",
        "execution",
        "spark_conn_id",
        "spark_conf",
    )
    spark_job: ClassVar[str | None] = None  # the job under airflow_lakeformat/spark/jobs; None: local only
    # The formats the Spark job takes (tables it opens by their root URI).
    spark_formats: ClassVar[frozenset[str]] = frozenset({"paimon"})
    # Whether the Spark job also opens Iceberg tables of the connection's catalog (given in its environment).
    spark_opens_catalogs: ClassVar[bool] = False
    # Operators that delete files dry-run unless told otherwise: deleting must be asked for in the DAG.
    deletes: ClassVar[bool] = False

    def __init__(
        self,
        *,
        dry_run: bool | str | None = None,
        execution: Execution | str = "auto",
        spark_conn_id: str = "spark_default",
        spark_conf: dict[str, Any] | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        num_executors: int | None = None,
        total_executor_cores: int | None = None,
        driver_memory: str | None = None,
        spark_parallelism: int | None = None,
        spark_env_vars: dict[str, str] | None = None,
        spark_py_files: bool = False,
        spark_min_files: int = AUTO_SPARK_MIN_FILES,
        spark_min_manifests: int = AUTO_SPARK_MIN_MANIFESTS,
        maintenance_lock: bool = True,
        lock_lease: timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: timedelta | None = None,
        lock_poll_interval: float = DEFAULT_LOCK_POLL_INTERVAL,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # BaseOperator.dry_run() is a legacy "render templates only" method that Airflow 3 no longer calls;
        # the parameter keeps the name users know from the CLI (--dry-run) and other table-format tools.
        self.dry_run = self.deletes if dry_run is None else dry_run  # type: ignore[method-assign, assignment]
        self.execution = execution
        if "{{" not in str(execution):
            self._check_execution(str(execution))
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf or {}
        self.executor_cores = executor_cores
        self.executor_memory = executor_memory
        self.num_executors = num_executors
        self.total_executor_cores = total_executor_cores
        self.driver_memory = driver_memory
        self.spark_parallelism = spark_parallelism
        self.spark_env_vars = spark_env_vars or {}
        self.spark_py_files = spark_py_files
        self.spark_min_files = spark_min_files
        self.spark_min_manifests = spark_min_manifests
        self.maintenance_lock = maintenance_lock
        self.lock_lease = lock_lease
        self.lock_wait = lock_wait
        self.lock_poll_interval = lock_poll_interval
        self._submit_hook: Any = None

    def _check_execution(self, execution: str) -> None:
        if execution not in EXECUTIONS:
            raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, not {execution!r}")
        if execution == "spark" and self.spark_job is None:
            raise ValueError(f"{type(self).__name__} runs in the worker only (execution 'local' or 'auto')")

    @property
    def is_dry_run(self) -> bool:
        return as_bool(self.dry_run, "dry_run")  # type: ignore[arg-type]

    # -- the run ------------------------------------------------------------------------------------

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        self._check_execution(str(self.execution))
        table = self.open_lake_table(table_uri)
        self.check_table(table)
        execution = self.choose_execution(table)
        with self.locked(context, table):
            if execution == "spark":
                result = self.run_spark(context, table, table_uri)
            else:
                result = self.run_local(context, table)
        return {**result, "table": table.uri, "format": table.format, "execution": execution}

    def check_table(self, table: LakeTable) -> None:
        """Refuse (raise) before the lock is taken or a job submitted; by default every table passes."""

    def spark_refusal(self, table: LakeTable) -> str | None:
        """Why this operator's Spark job cannot open ``table`` (None: it can)."""
        # Format branch: which formats a Spark job takes is a property of the job, not of the table.
        if table.format not in self.spark_formats:
            name = table.format.capitalize()
            return f"the Spark job {self.spark_job} does not take {name} tables; use execution='local'"
        if not table.maintenance.opens_by_root and not self.spark_opens_catalogs:
            return (
                f"the Spark job {self.spark_job} opens Iceberg tables by their Hadoop-layout root only, not "
                "from a catalog; use execution='local' (or name the table by its root URI if it is a "
                "Hadoop-layout table)"
            )
        return None

    def check_spark(self, table: LakeTable) -> None:
        """Refuse Spark for a table its job cannot open, with a typed error naming what to do instead."""
        from airflow_lakeformat.core.errors import UnsupportedFormatError

        refusal = self.spark_refusal(table)
        if refusal is not None:
            raise UnsupportedFormatError(table.uri, refusal)

    def choose_execution(self, table: LakeTable) -> str:
        if self.execution == "spark":
            self.check_spark(table)
            return "spark"
        if self.execution != "auto":
            return str(self.execution)
        if self.spark_job is None:
            return "local"
        if self.spark_refusal(table) is not None:
            self.log.info("execution=auto: %s runs in the worker (no Spark job opens it)", table.uri)
            return "local"
        size = table.maintenance.size()
        spark = size.live_files >= self.spark_min_files or size.manifests >= self.spark_min_manifests
        self.log.info(
            "execution=auto: snapshot %s references %s live files in %s manifests -> %s (thresholds: %s files, %s manifests)",
            size.snapshot_id,
            size.live_files,
            size.manifests,
            "spark" if spark else "local",
            self.spark_min_files,
            self.spark_min_manifests,
        )
        return "spark" if spark else "local"

    @contextlib.contextmanager
    def locked(self, context: Context, table: LakeTable) -> Iterator[MaintenanceLock | None]:
        """Hold the table's maintenance lock for the body (not for dry runs, nor when disabled)."""
        if not self.maintenance_lock or self.is_dry_run:
            yield None
            return
        lock = table.maintenance.lock(
            self.lock_owner(context),
            self.lock_lease,
            wait=self.lock_wait,
            poll_interval=self.lock_poll_interval,
        )
        lease = lock.acquire()
        if lock.taken_over is not None:
            self.log.warning(
                "Took over the expired maintenance lease of %r (generation %s)",
                lock.taken_over.owner,
                lock.taken_over.generation,
            )
        self.log.info("Holding the maintenance lock of %s (generation %s)", table.uri, lease.generation)
        try:
            yield lock
        finally:
            lock.release()

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        """The in-process implementation on the format-neutral table; return the core result's JSON."""
        raise NotImplementedError

    # -- Spark --------------------------------------------------------------------------------------

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        """Job-specific arguments after ``--table``, ``--result``, ``--dry-run`` and ``--parallelism``."""
        return []

    def run_spark(self, context: Context, table: LakeTable, target: str | None = None) -> dict[str, Any]:
        """spark-submit this operator's job and return the JSON result it wrote.

        ``target`` is what the connection resolved the table to: for a catalog table, ``namespace.table``, which
        the job gets as ``--table`` with the catalog in ``$LAKEFORMAT_ICEBERG_CATALOG``.
        """
        if self.spark_job is None:
            raise ValueError(f"{type(self).__name__} has no Spark job")
        env = {**self.spark_env_vars, **self.hook.spark_env(table.uri)}
        job_table = table.uri
        if not table.maintenance.opens_by_root:
            job_table = target or table.uri
            env.update(self._catalog_env())
        submission = JobSubmission(
            job=self.spark_job,
            table_uri=job_table,
            dry_run=self.is_dry_run,
            parallelism=self.spark_parallelism,
            args=self.spark_job_args(context, table),
            env_vars=env,
            py_files=self.spark_py_files,
        )
        return submit_job(submission, self._make_submit_hook, self._remember_hook)

    def _catalog_env(self) -> dict[str, str]:
        """The connection's Iceberg catalog for the job's driver, as ``$LAKEFORMAT_ICEBERG_CATALOG`` (masked)."""
        from airflow.sdk.log import mask_secret

        settings = self.hook.settings
        text = json.dumps(
            {"name": settings.catalog.name, "properties": settings.catalog_properties()}, sort_keys=True
        )
        mask_secret(text)
        return {"LAKEFORMAT_ICEBERG_CATALOG": text}

    def _remember_hook(self, hook: Any) -> None:
        self._submit_hook = hook

    def _make_submit_hook(
        self, *, application_args: list[str], env_vars: dict[str, str], py_files: str | None
    ) -> Any:
        return make_submit_hook(
            conn_id=self.spark_conn_id,
            conf=dict(self.spark_conf),
            name=f"lakeformat-{self.spark_job}-{self.task_id}",
            application_args=application_args,
            env_vars=env_vars,
            py_files=py_files,
            resources={
                "executor_cores": self.executor_cores,
                "executor_memory": self.executor_memory,
                "num_executors": self.num_executors,
                "total_executor_cores": self.total_executor_cores,
                "driver_memory": self.driver_memory,
            },
        )

    def on_kill(self) -> None:
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
