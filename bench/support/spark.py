"""The Spark benchmarks' shared pieces: a job run with ``spark-submit`` on ``local[2]``, and generated rows.

:func:`spark_submit` runs one of the package's Spark jobs and returns the result document the job
prints (the line starting with ``LAKEFORMAT_RESULT``) with the wall time of the whole submit;
:func:`rows_table` makes rows with random names and amounts, so that they compress like real data.
Shared by ``bench_spark_write.py`` and ``bench_compact_data.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULT_PREFIX = "LAKEFORMAT_RESULT "
FIELDS = [
    {"name": "dt", "type": "DATE"},
    {"name": "id", "type": "BIGINT"},
    {"name": "name", "type": "STRING"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "price", "type": "DECIMAL(10, 2)"},
    {"name": "ts", "type": "TIMESTAMP(6)"},
]
DATES = 4


def rows_table(start: int, count: int, seed: int) -> Any:
    """``count`` rows with ids from ``start``: random names and amounts, so they compress like real data."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + count, dtype=np.int64)
    names = pa.array(rng.integers(0, 2**63 - 1, count, dtype=np.int64)).cast(pa.string())
    days = (19_723 + ids % DATES).astype(np.int32)
    micros = 1_704_164_645_000_000 + ids * 1_001
    return pa.table(
        {
            "dt": pa.array(days, pa.int32()).cast(pa.date32()),
            "id": pa.array(ids),
            "name": names,
            "amount": pa.array(rng.random(count) * 1000),
            "price": pa.array(rng.integers(0, 10_000_000, count), pa.int64())
            .cast(pa.decimal128(19, 0))
            .cast(pa.decimal128(10, 2)),
            "ts": pa.array(micros, pa.int64()).cast(pa.timestamp("us")),
        }
    )


def spark_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "LAKEFORMAT_TEST_"))}
    env.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(extra or {})
    return env


def spark_submit(job: str, table: str, args: list[str], work_dir: Path) -> dict[str, Any]:
    """Run one job on ``local[2]``; return its result document plus the wall time of spark-submit."""
    from airflow_lakeformat.spark.locate import job_path

    command = [
        os.path.join(os.path.dirname(sys.executable), "spark-submit"),
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", f"spark.pyspark.python={sys.executable}",
        "--driver-memory", "2g",
        job_path(job), "--table", table, *args,
    ]  # fmt: skip
    started = time.perf_counter()
    completed = subprocess.run(
        command, env=spark_env(), cwd=work_dir, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if completed.returncode != 0 or not lines:
        tail = "\n".join((completed.stdout + completed.stderr).splitlines()[-30:])
        raise RuntimeError(f"spark-submit {job} failed with {completed.returncode}:\n{tail}")
    return {**json.loads(lines[0][len(RESULT_PREFIX) :]), "wallSeconds": wall}
