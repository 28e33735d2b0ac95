"""Run the package's Spark jobs through a real ``spark-submit`` (``local[2]``) and capture their results.

Each submit costs a JVM and a Python driver (about 10-20 s on two cores), so tests group their
assertions per run. Storage options travel in the environment (``$LAKEFORMAT_STORAGE_OPTIONS``),
never in argv; :class:`SparkRun` keeps the command so tests can check that.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lakeformat.spark.locate import job_path
from airflow_lakeformat.spark.runtime import ERROR_PREFIX, RESULT_PREFIX, STORAGE_OPTIONS_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
DEFAULT_JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
DEFAULT_TIMEOUT = 600.0


@dataclass
class SparkRun:
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any] | None  # the LAKEFORMAT_RESULT document (stdout and --result file agree)
    seconds: float

    @property
    def error_lines(self) -> list[str]:
        # spark-submit's PythonRunner merges the Python driver's stderr into its stdout.
        lines = self.stdout.splitlines() + self.stderr.splitlines()
        return [line for line in lines if line.startswith(ERROR_PREFIX)]

    def describe(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-40:])
        return f"exit {self.returncode} after {self.seconds:.1f} s: {' '.join(self.command)}\n--- stderr (tail) ---\n{tail}"


def spark_env(extra: Mapping[str, str] | None = None, python: str = PYTHON) -> dict[str, str]:
    """The environment spark-submit needs here: Java 17, the venv's Python for executors, loopback only."""
    # Hermetic: storage settings reach a job only through what the test passes.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LAKEFORMAT_"))}
    env.setdefault("JAVA_HOME", DEFAULT_JAVA_HOME)
    env["PYSPARK_PYTHON"] = python
    env["PYSPARK_DRIVER_PYTHON"] = python
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.path.dirname(PYTHON) + os.pathsep + env.get("PATH", "")
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_HOME"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def run_job(
    job: str,
    table: str,
    *args: str,
    work_dir: Path,
    env: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    py_files: str | None = None,
    script: str | None = None,
    python: str = PYTHON,
    timeout: float = DEFAULT_TIMEOUT,
) -> SparkRun:
    """``spark-submit --master local[2] [--py-files ZIP] <job> --table TABLE --result ... ARGS``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    result_path = work_dir / f"result-{job}-{len(list(work_dir.glob('result-*')))}.json"
    command = [
        os.path.join(os.path.dirname(PYTHON), "spark-submit"),
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.pyspark.python={python}",
        "--conf", f"spark.pyspark.driver.python={python}",
        "--conf", "spark.task.maxFailures=1",
        "--conf", "spark.ui.showConsoleProgress=false",
    ]  # fmt: skip
    if py_files:
        command += ["--py-files", py_files]
    command += [script or job_path(job), "--table", table, "--result", str(result_path), *args]
    extra = dict(env or {})
    if storage_options is not None:
        extra[STORAGE_OPTIONS_ENV] = json.dumps(storage_options)
    started = time.monotonic()
    completed = subprocess.run(
        command,
        env=spark_env(extra, python),
        cwd=work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert len(lines) <= 1, completed.stdout
    result = json.loads(lines[0][len(RESULT_PREFIX) :]) if lines else None
    if result is not None:
        assert json.loads(result_path.read_text()) == result, "the --result file and stdout disagree"
    seconds = time.monotonic() - started
    if os.environ.get("LAKEFORMAT_TEST_SPARK_TIMINGS"):
        print(f"spark-submit {job}: {seconds:.1f} s, exit {completed.returncode}", file=sys.stderr)
    return SparkRun(command, completed.returncode, completed.stdout, completed.stderr, result, seconds)


def run_in_process(
    job: str,
    table: str,
    *args: str,
    work_dir: Path,
    storage_options: Mapping[str, Any] | None = None,
) -> SparkRun:
    """The job's ``main`` in this process, on the running ``local[2]`` session (the ``spark`` fixture).

    For the runs a test only compares (dry runs, the re-run that must find nothing left): the same entry
    point, argv and result document as :func:`run_job`, without the 20-30 s of a new JVM and Python driver
    per submit. Runs that need a fault injected on executors (an environment variable the executors read
    when they start) stay on :func:`run_job`. Storage options travel in the environment, as with a submit.
    """
    import importlib

    module = importlib.import_module(f"airflow_lakeformat.spark.jobs.{job}")
    work_dir.mkdir(parents=True, exist_ok=True)
    result_path = work_dir / f"result-{job}-{len(list(work_dir.glob('result-*')))}.json"
    argv = ["--table", table, "--result", str(result_path), *args]
    previous = os.environ.get(STORAGE_OPTIONS_ENV)
    started = time.monotonic()
    try:
        if storage_options is not None:
            os.environ[STORAGE_OPTIONS_ENV] = json.dumps(storage_options)
        code = module.main(argv)
    finally:
        if previous is None:
            os.environ.pop(STORAGE_OPTIONS_ENV, None)
        else:
            os.environ[STORAGE_OPTIONS_ENV] = previous
    result = json.loads(result_path.read_text()) if result_path.exists() and code == 0 else None
    return SparkRun([f"{job}.main", *argv], code, "", "", result, time.monotonic() - started)


def isolated_python(directory: Path) -> str:
    """A Python that sees the venv's dependencies but not this package (only through ``--py-files``).

    ``-S`` skips site initialisation, so the editable install's ``.pth`` entry is never read; the
    venv's site-packages are put back on ``PYTHONPATH`` explicitly (path entries there are not
    processed for ``.pth`` files).
    """
    site_packages = sysconfig.get_paths()["purelib"]
    wrapper = directory / "python-without-lakeformat"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}" exec "{PYTHON}" -S "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(wrapper)


def data_files(root: Path) -> set[str]:
    """Every ``*.parquet`` file below a local table root, relative to it."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")}


# -- test data shared by the Spark job tests ---------------------------------------------------------

FIELDS = [
    {"name": "dt", "type": "DATE"},
    {"name": "s", "type": "STRING"},
    {"name": "v", "type": "BIGINT"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
    {"name": "price", "type": "DECIMAL(10, 2)"},
]
_ARROW = pa.schema(
    [
        ("dt", pa.date32()),
        ("s", pa.string()),
        ("v", pa.int64()),
        ("ts", pa.timestamp("us")),
        ("price", pa.decimal128(10, 2)),
    ]
)


def source_table(start: int, count: int) -> pa.Table:
    """Rows ``start .. start + count - 1`` over three dates, with nulls, escapes and sub-second timestamps."""
    values = range(start, start + count)
    return pa.table(
        {
            "dt": [date(2024, 1, 1) + timedelta(days=v % 3) for v in values],
            "s": [None if v % 7 == 0 else f"s/{v}=é" for v in values],
            "v": list(values),
            "ts": [datetime(2024, 1, 2, 3, 4, 5) + timedelta(microseconds=v * 1001) for v in values],
            "price": [Decimal(v % 100000) / 100 for v in values],
        },
        schema=_ARROW,
    )


def write_parquet_source(directory: Path, tables: Sequence[pa.Table]) -> Path:
    """One Parquet file per table in ``directory`` (Spark reads the directory)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, table in enumerate(tables):
        pq.write_table(table, directory / f"part-{index:03d}.parquet")
    return directory


def _normalized(row: Mapping[str, Any]) -> dict[str, Any]:
    """The pypaimon oracle's JSON form of a row of :data:`FIELDS`."""
    return {
        "dt": row["dt"].isoformat() if row["dt"] is not None else None,
        "s": row["s"],
        "v": row["v"],
        "ts": row["ts"].isoformat() if row["ts"] is not None else None,
        "price": format(row["price"], "f") if row["price"] is not None else None,
    }


def expected_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as ``oracle_read`` returns them: normalised and in its order."""
    rows = [_normalized(r) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False))
