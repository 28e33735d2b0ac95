"""Shared fixtures. Slow suites carry markers: interop (pypaimon venv), s3 (SeaweedFS), spark, airflow."""

from __future__ import annotations

import faulthandler
import os
import shutil
import tarfile
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.seaweedfs", "tests.support.pypaimon", "tests.support.java_iceberg"]

FIXTURES = Path(__file__).parent / "fixtures"

# Every JVM a test starts through spark-submit (run_job, Airflow's SparkSubmitHook, an in-process pyspark
# session) is short-lived and does little work: the C1 JIT alone and the serial GC start it and run its
# tiny jobs faster on two busy cores (an orphan job's spark-submit: 52-75 s -> 35-53 s beside other
# tests). JVM flags only; the demo test removes them to run the README's command as a user does.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)


@pytest.fixture(scope="session")
def _sample_warehouse_pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("sample")
    with tarfile.open(FIXTURES / "pypaimon-2.1.0-sample-warehouse.tar.gz") as archive:
        archive.extractall(target, filter="data")
    return target / "warehouse" / "db.db"


@pytest.fixture
def sample_tables(_sample_warehouse_pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the pypaimon-written sample (append_tbl, pk_tbl, append_ovw_tbl) per test."""
    copy = tmp_path / "db.db"
    shutil.copytree(_sample_warehouse_pristine, copy)
    return copy


#: A pytest process still alive this long after its last test (a non-daemon thread, an atexit handler
#: waiting on a server) prints every thread's stack and exits 1, rather than holding scripts/test.sh.
EXIT_GRACE_SECONDS = float(os.environ.get("LAKEFORMAT_EXIT_GRACE_SECONDS", "300"))


def pytest_unconfigure(config: pytest.Config) -> None:
    faulthandler.dump_traceback_later(EXIT_GRACE_SECONDS, exit=True)
