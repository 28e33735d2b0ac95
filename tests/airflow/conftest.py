"""Airflow test environment: a private AIRFLOW_HOME, SQLite reset once per session, DAG files, connections.

Airflow reads its configuration when it is first imported, so the environment is set when this file is
imported, before any test module imports airflow. ``dag.test()`` needs the DAG in a bundle, so the DAGs
under test live as files in ``tests/airflow/dags`` (the dags folder of this session); tests import them
with ``tests.airflow.helpers.load_dag_module`` and pass per-test settings through params and connections.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.airflow.helpers import set_connection

if "airflow" in sys.modules:
    raise RuntimeError("airflow was imported before tests/airflow/conftest.py could set AIRFLOW_HOME")

TEST_DAGS = Path(__file__).parent / "dags"
_HOME = tempfile.mkdtemp(prefix="lakeformat-airflow-home-")
# A warehouse whose path the DAG files may read at parse time (literal table URIs for Asset outlets).
_WAREHOUSE = tempfile.mkdtemp(prefix="lakeformat-airflow-warehouse-")
atexit.register(shutil.rmtree, _HOME, True)
atexit.register(shutil.rmtree, _WAREHOUSE, True)

os.environ.update(
    {
        "AIRFLOW_HOME": _HOME,
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(TEST_DAGS),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
        # Asset events queue runs of consuming DAGs only when those are not paused.
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "LAKEFORMAT_TEST_WAREHOUSE": _WAREHOUSE,
        # Spark in local mode, driven by the spark-submit of this virtualenv.
        "JAVA_HOME": os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {
                "conn_type": "spark",
                "host": "local[2]",
                "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
            }
        ),
    }
)


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A fresh metadata database, once per session (about 4 s)."""
    from airflow.utils import db

    db.resetdb()


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A local warehouse, and ``lakeformat_default`` pointing at it."""
    root = tmp_path / "warehouse"
    root.mkdir()
    set_connection(monkeypatch, "lakeformat_default", host=str(root))
    yield root


@pytest.fixture
def session_warehouse() -> Path:
    """The warehouse whose path DAG files know at parse time."""
    return Path(os.environ["LAKEFORMAT_TEST_WAREHOUSE"])
