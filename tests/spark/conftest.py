"""The Spark tests' shared ``local[2]`` session: jobs run in this process (``main``) on it.

One session per pytest process (its JVM starts once, ~10-20 s on two busy cores), shared by every module
that runs a job in process; jobs leave a session they did not start running. ``spark-submit`` itself is
exercised by the runs that need a fresh driver (fault injection, a killed driver, the operators' tests).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.spark import DEFAULT_JAVA_HOME


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One ``local[2]`` session for the process."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JAVA_HOME", os.environ.get("JAVA_HOME", DEFAULT_JAVA_HOME))
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("lakeformat-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.task.maxFailures", "1")
            .getOrCreate()
        )
        try:
            yield session
        finally:
            session.stop()
            # py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
            # logging's streams are closed: a "--- Logging error ---" traceback at the end of every run.
            logging.getLogger("py4j").setLevel(logging.WARNING)
