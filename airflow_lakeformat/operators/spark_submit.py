"""Submitting a Lakeformat Spark job from an operator: arguments, environment, result and failure mapping.

A maintenance operator with ``execution="spark"`` runs ``spark-submit <airflow_lakeformat/spark/jobs/<job>.py>
--table URI --result <tmp file> [--dry-run] [--parallelism N] [job args]`` through the Spark provider's
``SparkSubmitHook`` (imported only here, when a job is submitted), with the connection's storage settings in
the job's environment (never on its command line). :func:`submit_job` returns the JSON document the job
wrote, or the ``LAKEFORMAT_RESULT`` line it printed when the driver ran elsewhere (cluster deploy mode).

A failed job's ``lakeformat-job: error:`` line becomes the task's one error message; its exit code (the
CLI's, ``core/errors.py``) decides whether a retry can help (:func:`job_failure`).

Example:
    >>> submission = JobSubmission("expire_snapshots", "/wh/db.db/t", dry_run=True, args=["--retain-min", "5"])
    >>> submission.application_args("/tmp/r.json")[:4]
    ['--table', '/wh/db.db/t', '--result', '/tmp/r.json']
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_lakeformat.core.errors import (
    EXIT_COMMIT_UNKNOWN,
    EXIT_CORRUPT,
    EXIT_MAINTENANCE_REFUSED,
    EXIT_NO_TABLE,
    EXIT_NOT_FOUND,
    EXIT_UNSUPPORTED,
    EXIT_USAGE,
)

# Spark job exit codes (core/errors.py, the same as the CLI's) that a retry cannot cure.
JOB_EXIT_PERMANENT = frozenset(
    {EXIT_USAGE, EXIT_NO_TABLE, EXIT_CORRUPT, EXIT_UNSUPPORTED, EXIT_NOT_FOUND, EXIT_MAINTENANCE_REFUSED}
)
JOB_RESULT_PREFIX = "LAKEFORMAT_RESULT "
JOB_ERROR_PREFIX = "lakeformat-job: error: "


def commit_state_unknown_message(exc: object, table_uri: str) -> str:
    """The message of a task failed without retry because a commit's outcome is unknown."""
    return (
        f"{exc}. Whether the commit landed is unknown, so this task is failed without retry: a repeated "
        f"run could act on files the landed commit still references. Check the table "
        f"(`lakeformat snapshots {table_uri}`), then clear this task to run it again."
    )


@dataclass
class JobSubmission:
    """One Spark job run: which job, on which table, with which arguments and environment."""

    job: str
    table_uri: str
    dry_run: bool = False
    parallelism: int | None = None
    args: list[str] = field(default_factory=list)
    env_vars: dict[str, str] = field(default_factory=dict, repr=False)
    py_files: bool = False

    def application_args(self, result_path: str) -> list[str]:
        """The job's command line after the script: ``--table``, ``--result``, flags, then the job's own."""
        args = ["--table", self.table_uri, "--result", result_path]
        if self.dry_run:
            args.append("--dry-run")
        if self.parallelism:
            args += ["--parallelism", str(self.parallelism)]
        return args + list(self.args)


def make_submit_hook(
    *,
    conn_id: str,
    conf: dict[str, Any],
    name: str,
    application_args: list[str],
    env_vars: dict[str, str],
    py_files: str | None,
    resources: dict[str, Any],
) -> Any:
    """A ``SparkSubmitHook`` that also remembers the job's result and error lines while it logs the output."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class JobSubmitHook(SparkSubmitHook):
        """Remembers the job's result and error lines while SparkSubmitHook logs the output."""

        result_line: str | None = None
        error_line: str | None = None

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            def tee() -> Iterator[Any]:
                for raw in itr:
                    line = str(raw).strip()
                    if line.startswith(JOB_RESULT_PREFIX):
                        self.result_line = line[len(JOB_RESULT_PREFIX) :]
                    elif JOB_ERROR_PREFIX in line:
                        self.error_line = line[line.index(JOB_ERROR_PREFIX) + len(JOB_ERROR_PREFIX) :]
                    yield raw

            super()._process_spark_submit_log(tee())

    return JobSubmitHook(
        conf=dict(conf),
        conn_id=conn_id,
        py_files=py_files,
        name=name,
        application_args=application_args,
        env_vars=env_vars,
        **resources,
    )


def job_failure(job: str, hook: Any, table_uri: str) -> BaseException:
    """The Airflow exception for a failed job: no retry for an unknown commit state or a permanent error."""
    process = getattr(hook, "_submit_sp", None)
    code = getattr(process, "returncode", None)
    message = hook.error_line or f"spark-submit exited with code {code}"
    what = f"Spark job {job} on {table_uri} failed: {message}"
    if code == EXIT_COMMIT_UNKNOWN:
        return AirflowFailException(commit_state_unknown_message(what, table_uri))
    if code in JOB_EXIT_PERMANENT:
        return AirflowFailException(what)
    return AirflowException(what)


def submit_job(
    submission: JobSubmission, make_hook: Callable[..., Any], on_hook: Callable[[Any], None]
) -> dict[str, Any]:
    """Run the job and return its result document.

    Args:
        submission: the job, table and arguments.
        make_hook: builds the submit hook from ``application_args``, ``env_vars`` and ``py_files``.
        on_hook: called with the hook while the job runs (so ``on_kill`` can reach it), then with None.

    Raises:
        AirflowFailException: the job failed in a way a retry cannot cure (see :func:`job_failure`).
        AirflowException: the job failed otherwise, or succeeded without leaving a result.
    """
    from airflow_lakeformat.spark.locate import job_path, py_files_zip

    with tempfile.TemporaryDirectory(prefix="lakeformat-job-") as workdir:
        result_path = os.path.join(workdir, "result.json")
        hook = make_hook(
            application_args=submission.application_args(result_path),
            env_vars=submission.env_vars,
            py_files=py_files_zip(workdir) if submission.py_files else None,
        )
        on_hook(hook)
        try:
            hook.submit(job_path(submission.job))
        except AirflowException as exc:
            failure = job_failure(submission.job, hook, submission.table_uri)
            if hook.error_line:  # the job's own line says it all; spark-submit's message adds nothing
                raise failure from None
            raise failure from exc
        finally:
            on_hook(None)
        if os.path.exists(result_path):
            with open(result_path, encoding="utf-8") as handle:
                return dict(json.load(handle))
        if hook.result_line is not None:  # cluster deploy mode: the driver's file is not here
            return dict(json.loads(hook.result_line))
    raise AirflowException(f"Spark job {submission.job} succeeded but left no result")
