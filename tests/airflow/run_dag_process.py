"""Run one test DAG with ``dag.test()`` in this process's Airflow installation and report the run as JSON.

Usage: ``python tests/airflow/run_dag_process.py <dag file stem> <key in its DAGS> '<run_conf JSON>' ...``
(more key and conf pairs run one after the other, in the same process).

Airflow reads ``AIRFLOW_HOME`` (and the rest of its configuration) from the environment the caller
gives; a test starts several of these at once to have several Airflow installations act on one table.
Starting Airflow's in-process execution API costs seconds per process, so one process runs several
DAGs rather than one process per DAG. After each run, stdout gets the line
``LAKEFORMAT_TEST_RUN {"dagId", "runId", "state", "tasks", "xcoms"}``: ``tasks`` maps task id to
``[state, try number]``, ``xcoms`` holds the return value of every task that succeeded and returned one.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

RESULT_PREFIX = "LAKEFORMAT_TEST_RUN "


def main(argv: list[str]) -> None:
    if len(argv) < 3 or len(argv) % 2 == 0:
        raise SystemExit(__doc__)
    stem, *pairs = argv
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root, for tests.*
    from tests.airflow.helpers import load_dag_module

    dags = load_dag_module(stem).DAGS
    for key, conf in zip(pairs[::2], pairs[1::2], strict=True):
        report(dags[key].test(run_conf=json.loads(conf)))


def report(run: Any) -> None:
    from tests.airflow.helpers import task_states, xcom_result

    tasks = task_states(run)
    xcoms = {}
    for task_id, (state, _) in tasks.items():
        if state == "success":
            with contextlib.suppress(AssertionError):  # the task returned nothing
                xcoms[task_id] = xcom_result(run, task_id)
    document = {
        "dagId": run.dag_id,
        "runId": run.run_id,
        "state": str(run.state),
        "tasks": tasks,
        "xcoms": xcoms,
    }
    print(RESULT_PREFIX + json.dumps(document, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
