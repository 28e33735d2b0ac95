"""What every Lakeformat operator shares: the table and connection, typed results in XCom, and error mapping.

:class:`LakeformatBaseOperator` resolves the table through :class:`LakeformatHook`, runs the subclass's
work, logs a one-line summary plus the JSON result, and returns the JSON (so it lands in XCom). Errors
are mapped once, here:

* ``CommitStateUnknownError`` (and a Spark job's exit code 8) fails the task *without retry*: whether the
  commit landed is unknown, and a blind retry of a delete could delete what the landed commit still
  references. The message says how to check and re-run.
* Errors about the table or the settings (missing table, corrupt or unsupported metadata, a refused
  request, bad connection settings or arguments, access denied) fail without retry too: a retry would
  fail the same.
* Anything else (a dropped connection, a held maintenance lock, a conflict with a concurrent commit
  that a new attempt resolves) is raised as is, so the task's ``retries`` apply.

:class:`LakeformatMaintenanceOperator` adds what maintenance needs: ``dry_run``, the per-table maintenance
lock, and ``execution``: ``local`` runs the core in the worker, ``spark`` submits the operation's Spark
job through ``SparkSubmitHook``, ``auto`` picks Spark when the latest snapshot references at least
``spark_min_files`` live data files or ``spark_min_manifests`` manifests (counted from the two manifest
lists alone, without reading a manifest).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_lakeformat.core.errors import (
    EXIT_COMMIT_UNKNOWN,
    EXIT_CORRUPT,
    EXIT_MAINTENANCE_REFUSED,
    EXIT_NO_TABLE,
    EXIT_NOT_FOUND,
    EXIT_UNSUPPORTED,
)
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatConnectionError, LakeformatHook
from airflow_lakeformat.operators.templated import as_bool

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.maintenance.lock import MaintenanceLock
    from airflow_lakeformat.core.paimon.table import Table

Execution = Literal["auto", "local", "spark"]
EXECUTIONS: tuple[str, ...] = ("auto", "local", "spark")
# Thresholds for execution="auto". In-process planning reads about 60k manifest entries per second and
# a worker holds every live file in memory while it plans, so from a few hundred thousand files on the
# cluster is the better place; the manifest count bounds the number of reads.
AUTO_SPARK_MIN_FILES = 250_000
AUTO_SPARK_MIN_MANIFESTS = 5_000
DEFAULT_LOCK_LEASE = timedelta(hours=2)
DEFAULT_LOCK_POLL_INTERVAL = 30.0

# Spark job exit codes (core/errors.py, the same as the CLI's) that a retry cannot cure.
_JOB_EXIT_PERMANENT = frozenset(
    {EXIT_NO_TABLE, EXIT_CORRUPT, EXIT_UNSUPPORTED, EXIT_NOT_FOUND, EXIT_MAINTENANCE_REFUSED}
)
_JOB_RESULT_PREFIX = "LAKEFORMAT_RESULT "
_JOB_ERROR_PREFIX = "lakeformat-job: error: "


def commit_state_unknown_message(exc: object, table_uri: str) -> str:
    return (
        f"{exc}. Whether the commit landed is unknown, so this task is failed without retry: a repeated "
        f"run could act on files the landed commit still references. Check the table "
        f"(`lakeformat snapshots {table_uri}`), then clear this task to run it again."
    )


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


@dataclass(frozen=True)
class TableSize:
    """What the latest snapshot references, from its manifest lists only."""

    snapshot_id: int | None
    live_files: int
    manifests: int


def table_size(table: Table) -> TableSize:
    latest = table.snapshot_manager.latest_snapshot()
    if latest is None:
        return TableSize(None, 0, 0)
    base, delta = table.data_manifests(latest)
    metas = base + delta
    files = sum(m.num_added_files - m.num_deleted_files for m in metas)
    return TableSize(latest.id, max(files, 0), len(metas))


class LakeformatBaseOperator(BaseOperator):
    """Base of the Lakeformat operators: table, connection, result to XCom, error mapping.

    :param table: full table URI, or ``db.table`` under the connection's warehouse. Templated.
    :param lakeformat_conn_id: the ``lakeformat`` connection. Templated.
    """

    template_fields: Sequence[str] = ("table", "lakeformat_conn_id")
    ui_color = "#d6ecf3"

    def __init__(self, *, table: str, lakeformat_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.lakeformat_conn_id = lakeformat_conn_id

    @cached_property
    def hook(self) -> LakeformatHook:
        return LakeformatHook(self.lakeformat_conn_id)

    def execute(self, context: Context) -> dict[str, Any]:
        table_uri = self.table
        try:
            table_uri = self.hook.table_uri(self.table)
            result = self.run(context, table_uri)
        except AirflowException:
            raise
        except Exception as exc:
            mapped = map_error(exc, table_uri, self.lakeformat_conn_id)
            if mapped is None:
                raise
            raise mapped from exc
        self.log.info("%s", self.summarize(result))
        self.log.info("Result: %s", json.dumps(result, sort_keys=True, default=str))
        return result

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        """Do the work; return a JSON-able dict (it becomes the XCom return value)."""
        raise NotImplementedError

    def summarize(self, result: Mapping[str, Any]) -> str:
        """One line for the task log: the same summary the CLI prints for the operation's result."""
        from airflow_lakeformat.core.maintenance.results import summary

        return summary(result)

    def lock_owner(self, context: Context) -> str:
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        where = f"{ti.dag_id}/{context['run_id']}/{ti.task_id}" + (f"[{map_index}]" if map_index >= 0 else "")
        return f"airflow {where} try {ti.try_number}"


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
        Python does not have airflow-lakeformat installed).
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
        table = self.hook.open_table(table_uri)
        self.check_table(table)
        execution = self.choose_execution(table)
        with self.locked(context, table):
            if execution == "spark":
                result = self.run_spark(context, table)
            else:
                result = self.run_local(context, table)
        return {**result, "table": table.uri, "execution": execution}

    def check_table(self, table: Table) -> None:
        """Refuse (raise) before the lock is taken or a job submitted; by default every table passes."""

    def choose_execution(self, table: Table) -> str:
        if self.execution != "auto":
            return str(self.execution)
        if self.spark_job is None:
            return "local"
        size = table_size(table)
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
    def locked(self, context: Context, table: Table) -> Iterator[MaintenanceLock | None]:
        """Hold the table's maintenance lock for the body (not for dry runs, nor when disabled)."""
        if not self.maintenance_lock or self.is_dry_run:
            yield None
            return
        from airflow_lakeformat.core.maintenance.lock import MaintenanceLock

        lock = MaintenanceLock(
            table,
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

    def run_local(self, context: Context, table: Table) -> dict[str, Any]:
        """The in-process implementation; return the core result's JSON."""
        raise NotImplementedError

    # -- Spark --------------------------------------------------------------------------------------

    def spark_job_args(self, context: Context) -> list[str]:
        """Job-specific arguments after ``--table``, ``--result``, ``--dry-run`` and ``--parallelism``."""
        return []

    def run_spark(self, context: Context, table: Table) -> dict[str, Any]:
        """spark-submit this operator's job and return the JSON result it wrote."""
        if self.spark_job is None:
            raise ValueError(f"{type(self).__name__} has no Spark job")
        from airflow_lakeformat.spark.locate import job_path, py_files_zip

        with tempfile.TemporaryDirectory(prefix="lakeformat-job-") as workdir:
            result_path = os.path.join(workdir, "result.json")
            args = ["--table", table.uri, "--result", result_path]
            if self.is_dry_run:
                args.append("--dry-run")
            if self.spark_parallelism:
                args += ["--parallelism", str(self.spark_parallelism)]
            args += self.spark_job_args(context)
            hook = self._make_submit_hook(
                application_args=args,
                env_vars={**self.spark_env_vars, **self.hook.spark_env(table.uri)},
                py_files=py_files_zip(workdir) if self.spark_py_files else None,
            )
            self._submit_hook = hook
            try:
                hook.submit(job_path(self.spark_job))
            except AirflowException as exc:
                raise self._job_failure(hook, table.uri) from exc
            finally:
                self._submit_hook = None
            if os.path.exists(result_path):
                with open(result_path, encoding="utf-8") as handle:
                    return dict(json.load(handle))
            if hook.result_line is not None:  # cluster deploy mode: the driver's file is not here
                return dict(json.loads(hook.result_line))
        raise AirflowException(f"Spark job {self.spark_job} succeeded but left no result")

    def _make_submit_hook(
        self, *, application_args: list[str], env_vars: dict[str, str], py_files: str | None
    ) -> Any:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        class JobSubmitHook(SparkSubmitHook):
            """Remembers the job's result and error lines while SparkSubmitHook logs the output."""

            result_line: str | None = None
            error_line: str | None = None

            def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
                def tee() -> Iterator[Any]:
                    for raw in itr:
                        line = str(raw).strip()
                        if line.startswith(_JOB_RESULT_PREFIX):
                            self.result_line = line[len(_JOB_RESULT_PREFIX) :]
                        elif _JOB_ERROR_PREFIX in line:
                            self.error_line = line[line.index(_JOB_ERROR_PREFIX) + len(_JOB_ERROR_PREFIX) :]
                        yield raw

                super()._process_spark_submit_log(tee())

        return JobSubmitHook(
            conf=dict(self.spark_conf),
            conn_id=self.spark_conn_id,
            py_files=py_files,
            executor_cores=self.executor_cores,
            executor_memory=self.executor_memory,
            num_executors=self.num_executors,
            total_executor_cores=self.total_executor_cores,
            driver_memory=self.driver_memory,
            name=f"lakeformat-{self.spark_job}-{self.task_id}",
            application_args=application_args,
            env_vars=env_vars,
        )

    def _job_failure(self, hook: Any, table_uri: str) -> BaseException:
        process = getattr(hook, "_submit_sp", None)
        code = getattr(process, "returncode", None)
        message = hook.error_line or f"spark-submit exited with code {code}"
        what = f"Spark job {self.spark_job} on {table_uri} failed: {message}"
        if code == EXIT_COMMIT_UNKNOWN:
            return AirflowFailException(commit_state_unknown_message(what, table_uri))
        if code in _JOB_EXIT_PERMANENT:
            return AirflowFailException(what)
        return AirflowException(what)

    def on_kill(self) -> None:
        if self._submit_hook is not None:
            self._submit_hook.on_kill()
