"""What every Spark job shares: arguments, storage options, the session, the result and the exit code.

A job is ``spark-submit <job.py> --table URI --result PATH [job args]``. Storage secrets never
travel in argv: options come from ``$LAKEFORMAT_STORAGE_OPTIONS`` (a JSON object) or the JSON file
named by ``$LAKEFORMAT_STORAGE_OPTIONS_FILE``, plus the AWS variables the core already honours. The
driver resolves them once and hands them to executors inside the job's closure, so executors need
neither the driver's environment nor its files.

The result is one JSON document, written to ``--result`` and printed on stdout as one line
``LAKEFORMAT_RESULT <json>``. A failure prints one line ``lakeformat-job: error: ...`` on stderr
(which spark-submit's PythonRunner merges into its stdout) and exits with the CLI's codes; a
failure inside a Spark task is unwrapped to the Python exception the task raised, so a bad input
row reports as the typed error it is.

Nothing here imports PySpark at module level: a job that finds nothing to do (a dry run, an
already-landed commit) never starts a JVM-side session.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_lakeformat.core import errors
from airflow_lakeformat.core.errors import EXIT_ERROR, EXIT_OK, exit_code_for
from airflow_lakeformat.core.io import S3_ENDPOINT_VARIABLES
from airflow_lakeformat.core.paimon.table import Table

if TYPE_CHECKING:
    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable

R = TypeVar("R")

RESULT_PREFIX = "LAKEFORMAT_RESULT "
ERROR_PREFIX = "lakeformat-job: error: "
STORAGE_OPTIONS_ENV = "LAKEFORMAT_STORAGE_OPTIONS"
STORAGE_OPTIONS_FILE_ENV = "LAKEFORMAT_STORAGE_OPTIONS_FILE"
# The Iceberg catalog of a job that takes catalog tables (compact_data): a JSON object {"name": ..., "properties":
# {...}} as pyiceberg's load_catalog takes them (secrets included, hence the environment); --table is then
# namespace.table of that catalog.
ICEBERG_CATALOG_ENV = "LAKEFORMAT_ICEBERG_CATALOG"
# Fault injection for the test suite only: a task raises once it has written this many files, and
# the driver kills itself (SIGKILL) right before it would commit.
FAIL_AFTER_FILES_ENV = "LAKEFORMAT_TEST_FAIL_AFTER_FILES"
KILL_BEFORE_COMMIT_ENV = "LAKEFORMAT_TEST_KILL_BEFORE_COMMIT"

_MAX_MESSAGE = 2000


class InjectedFailureError(RuntimeError):
    """Raised by a task when the test-only fault injection says so."""


# -- storage options -----------------------------------------------------------------------------


def storage_options_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """fsspec storage options from ``$LAKEFORMAT_STORAGE_OPTIONS`` or ``$LAKEFORMAT_STORAGE_OPTIONS_FILE``."""
    environ = os.environ if environ is None else environ
    text = environ.get(STORAGE_OPTIONS_ENV)
    origin = f"${STORAGE_OPTIONS_ENV}"
    path = environ.get(STORAGE_OPTIONS_FILE_ENV)
    if text and path:
        raise ValueError(f"set ${STORAGE_OPTIONS_ENV} or ${STORAGE_OPTIONS_FILE_ENV}, not both")
    if path:
        origin = path
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the storage options file ({exc})") from exc
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        # The text may hold secrets: name where it came from, never echo it.
        raise ValueError(f"{origin}: storage options are not valid JSON ({exc.msg})") from None
    if not isinstance(options, dict):
        raise ValueError(f"{origin}: storage options must be a JSON object")
    return options


def iceberg_catalog_from_env(
    environ: Mapping[str, str] | None = None,
) -> tuple[str | None, dict[str, str]] | None:
    """The catalog name and properties in ``$LAKEFORMAT_ICEBERG_CATALOG``, or None when it is not set.

    Example:
        >>> iceberg_catalog_from_env({"LAKEFORMAT_ICEBERG_CATALOG": '{"name": "prod", "properties": {"type": "rest"}}'})
        ('prod', {'type': 'rest'})
    """
    environ = os.environ if environ is None else environ
    text = environ.get(ICEBERG_CATALOG_ENV)
    if not text:
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"${ICEBERG_CATALOG_ENV}: not valid JSON ({exc.msg})") from None
    properties = document.get("properties") if isinstance(document, dict) else None
    name = document.get("name") if isinstance(document, dict) else None
    if not isinstance(properties or {}, dict) or not isinstance(name, (str, type(None))):
        raise ValueError(f'${ICEBERG_CATALOG_ENV}: must be {{"name": NAME or null, "properties": {{...}}}}')
    return name, {str(k): str(v) for k, v in (properties or {}).items()}


def executor_storage_options(
    uri: str, options: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``options`` completed from the driver's environment, so executors do not depend on theirs.

    For S3 URIs the AWS credentials, endpoint and region variables the core honours are copied in
    where the options do not set them; other stores get the options unchanged.
    """
    environ = os.environ if environ is None else environ
    resolved: dict[str, Any] = json.loads(json.dumps(dict(options)))  # a deep copy of plain data
    protocol = uri.split("://", 1)[0].lower() if "://" in uri else "file"
    if protocol not in ("s3", "s3a"):
        return resolved
    client_kwargs = resolved.get("client_kwargs") or {}
    if "key" not in resolved and "secret" not in resolved and environ.get("AWS_ACCESS_KEY_ID"):
        resolved["key"] = environ["AWS_ACCESS_KEY_ID"]
        resolved["secret"] = environ.get("AWS_SECRET_ACCESS_KEY", "")
        if environ.get("AWS_SESSION_TOKEN"):
            resolved["token"] = environ["AWS_SESSION_TOKEN"]
    if "endpoint_url" not in resolved and "endpoint_url" not in client_kwargs:
        endpoint = next((environ[v] for v in S3_ENDPOINT_VARIABLES if environ.get(v)), None)
        if endpoint:
            resolved["endpoint_url"] = endpoint
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region and "region_name" not in client_kwargs:
        resolved["client_kwargs"] = {**client_kwargs, "region_name": region}
    return resolved


# -- arguments -----------------------------------------------------------------------------------


def base_parser(job: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"spark-submit {job}.py",
        description=f"lakeformat Spark job {job!r}; storage options come from ${STORAGE_OPTIONS_ENV} "
        f"or ${STORAGE_OPTIONS_FILE_ENV}, never from the command line",
    )
    parser.add_argument("--table", required=True, help="table root URI (local path, file://, s3://...)")
    parser.add_argument("--result", help="local path for the JSON result (also printed on stdout)")
    parser.add_argument("--dry-run", action="store_true", help="plan and report, change nothing")
    parser.add_argument("--parallelism", type=int, help="number of Spark tasks (default: from the cluster)")
    return parser


# -- errors --------------------------------------------------------------------------------------


_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")


def task_exception(text: str) -> tuple[str, str] | None:
    """(class name, message) of the last Python traceback in a Spark error's text, if there is one."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    for line in text[start + len(_TRACEBACK) :].splitlines():
        if not line.strip() or line[0].isspace():
            continue
        match = _EXCEPTION_LINE.match(line.strip())
        if match:
            return match[1], (match[2] or "").strip()
        return None
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "..."


def describe_error(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for a job failure."""
    if isinstance(exc, errors.LakeformatError):
        return _one_line(str(exc) or type(exc).__name__), exit_code_for(type(exc))
    if isinstance(exc, (OSError, ValueError, KeyError)):
        return _one_line(f"{type(exc).__name__}: {exc}"), EXIT_ERROR
    text = str(exc)
    found = task_exception(text)
    if found is not None:
        name, message = found
        simple = name.rsplit(".", 1)[-1]
        kind = getattr(errors, simple, None)
        code = exit_code_for(kind) if isinstance(kind, type) and issubclass(kind, BaseException) else 1
        return _one_line(f"a Spark task failed: {simple}: {message}"), code
    first = next((line.strip(" :") for line in text.splitlines() if line.strip(" :")), type(exc).__name__)
    return _one_line(f"{type(exc).__name__}: {first}"), EXIT_ERROR


# -- results -------------------------------------------------------------------------------------


def emit_result(document: Mapping[str, Any], path: str | None) -> None:
    """Write the result atomically to ``path`` (if given), then print it as one stdout line."""
    text = json.dumps(document, sort_keys=True, default=str)
    if path:
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".lakeformat-result-", dir=directory)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text + "\n")
            os.replace(temp, path)
        finally:
            if os.path.exists(temp):
                os.unlink(temp)
    sys.stdout.write(RESULT_PREFIX + text + "\n")
    sys.stdout.flush()


# -- the session and the job -----------------------------------------------------------------------


def spark_session(app_name: str) -> Any:
    """The job's SparkSession: spark-submit's settings win; ``local[*]`` when run as a plain script.

    Nothing SQL-side is touched here (that costs seconds), so RDD-only jobs start faster.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]").config("spark.ui.enabled", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def spark_session_active() -> bool:
    """Whether this process already runs a SparkContext (the job then uses it and leaves it running)."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


class JobContext:
    """One run of a job: its arguments, storage options, table and (lazily) its SparkSession."""

    def __init__(self, job: str, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.job = job
        self.args = args
        self.started = time.monotonic()
        self.storage_options = storage_options_from_env(environ)
        self.executor_options = executor_storage_options(args.table, self.storage_options, environ)
        self.fail_after_files = int(environ.get(FAIL_AFTER_FILES_ENV) or 0)
        self.kill_before_commit = (environ.get(KILL_BEFORE_COMMIT_ENV) or "") == "1"
        self.catalog = iceberg_catalog_from_env(environ)
        self.session_seconds: float | None = None  # time to start the session, once started
        self._spark: Any = None
        self._owns_spark = False

    def open_table(self) -> Table:
        """The job's Paimon table (the Paimon-only jobs: write, compact_data)."""
        return Table.open(self.args.table, self.executor_options)

    def open_lake_table(self, catalogs: bool = False) -> PaimonTable | IcebergLakeTable:
        """The job's table of either format, through the facade (``core/tables.py``: detected from its files;
        an Iceberg table by its Hadoop-layout root), or with ``$LAKEFORMAT_ICEBERG_CATALOG`` set, ``--table``
        of that catalog (only for the jobs that say they take ``catalogs``).

        Raises:
            UsageError: a catalog was given to a job whose executors open tables by their root.
        """
        from airflow_lakeformat.core.tables import open_table

        if self.catalog is None:
            return open_table(self.args.table, storage_options=self.executor_options)
        if not catalogs:
            raise errors.UsageError(
                f"the Spark job {self.job} opens Iceberg tables by their Hadoop-layout root only; "
                f"unset ${ICEBERG_CATALOG_ENV}"
            )
        name, properties = self.catalog
        return open_table(
            self.args.table,
            format="iceberg",
            catalog=name,
            catalog_properties=properties,
            storage_options=self.storage_options or None,
        )

    @property
    def spark(self) -> Any:
        if self._spark is None:
            started = time.monotonic()
            self._owns_spark = not spark_session_active()
            self._spark = spark_session(f"lakeformat-{self.job}")
            self.session_seconds = time.monotonic() - started
        return self._spark

    def parallelism(self, items: int, per_core: int = 1) -> int:
        """Tasks for ``items`` work units: ``--parallelism`` or the cluster's default, at most one per unit."""
        wanted = int(self.args.parallelism or self.spark.sparkContext.defaultParallelism * per_core)
        return max(1, min(items, wanted))

    def before_commit(self) -> None:
        if self.kill_before_commit:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def stop(self) -> None:
        """Stop the session the job started (one that was running before, in a notebook or a test, stays)."""
        if self._spark is not None and self._owns_spark:
            self._spark.stop()
        self._spark = None


def run_job(
    job: str,
    argv: Sequence[str] | None,
    configure: Callable[[argparse.ArgumentParser], None],
    body: Callable[[JobContext], Mapping[str, Any]],
) -> int:
    """Parse arguments, run ``body`` and report its document; map any failure to one line and an exit code."""
    parser = base_parser(job)
    configure(parser)
    args = parser.parse_args(argv)
    context: JobContext | None = None
    try:
        context = JobContext(job, args)
        document = dict(body(context))
        elapsed = time.monotonic() - context.started
        if context.session_seconds is not None:
            # The fixed cost of the run, apart from the work that scales with the data (bench/README.md).
            document["sessionSeconds"] = round(context.session_seconds, 3)
        emit_result(
            {"job": job, "mode": "spark", **document, "durationSeconds": round(elapsed, 3)}, args.result
        )
    except Exception as exc:
        message, code = describe_error(exc)
        sys.stdout.flush()
        print(ERROR_PREFIX + message, file=sys.stderr, flush=True)
        return code
    finally:
        if context is not None:
            context.stop()
    return EXIT_OK


def by_format(
    table: PaimonTable | IcebergLakeTable,
    *,
    paimon: Callable[[PaimonTable], R],
    iceberg: Callable[[IcebergLakeTable], R],
) -> R:
    """Run a job's per-format half on the facade table the job opened.

    Example:
        >>> by_format(context.open_lake_table(), paimon=paimon_orphans.run, iceberg=iceberg_orphans.run)  # doctest: +SKIP
    """
    from airflow_lakeformat.core.tables import IcebergLakeTable

    # Format branch: the one place a Spark job picks its per-format executor bodies (the distributed steps
    # are built from each format's own blocks; the facade runs a whole operation in one process).
    if isinstance(table, IcebergLakeTable):
        return iceberg(table)
    return paimon(table)


def check_fault(files_written: int, limit: int) -> None:
    """Test-only fault injection: fail the task once it has written ``limit`` files (0: never)."""
    if limit and files_written >= limit:
        raise InjectedFailureError(
            f"injected failure after {files_written} files (${FAIL_AFTER_FILES_ENV}={limit})"
        )
