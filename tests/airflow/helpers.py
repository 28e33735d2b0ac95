"""Helpers for the Airflow tests: DAG modules, connections, tables with data."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.paimon.commit import Committer
from airflow_lakeformat.core.paimon.create import create_table, schema_from_fields
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.write.data_files import write_data_files

TEST_DAGS = Path(__file__).parent / "dags"
FIELDS = [{"name": "dt", "type": "STRING"}, {"name": "v", "type": "BIGINT"}]


def load_dag_module(name: str) -> ModuleType:
    """Import ``tests/airflow/dags/<name>.py`` once (the bundle parser imports its own copy)."""
    module_name = f"lakeformat_test_dags_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, TEST_DAGS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    """An Airflow connection from the environment (``AIRFLOW_CONN_<ID>``, JSON form)."""
    document = {"conn_type": "lakeformat", **fields}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(document))


def make_table(uri: str, storage_options: dict[str, Any] | None = None) -> Table:
    """An append table partitioned by ``dt``."""
    return create_table(uri, schema_from_fields(FIELDS, ["dt"]), storage_options)


def append(table: Table, rows: int, dt: str = "2024-01-01", user: str = "test-writer") -> int:
    """Commit ``rows`` rows as one snapshot; returns its id."""
    data = pa.table({"dt": [dt] * rows, "v": list(range(rows))})
    result = Committer(table, user).commit(write_data_files(table, data))
    return result.snapshot.id


def task_states(run: Any) -> dict[str, tuple[str, int]]:
    """task id -> (state, try number) of a finished DAG run (map index suffixed when mapped)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == run.dag_id, TaskInstance.run_id == run.run_id)
        ).all()
        return {
            (row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"): (
                str(row.state),
                row.try_number,
            )
            for row in rows
        }


def xcom_result(run: Any, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
    """The XCom a task of a finished DAG run pushed (deserialized)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(
            select(XComModel).where(
                XComModel.dag_id == run.dag_id,
                XComModel.run_id == run.run_id,
                XComModel.task_id == task_id,
                XComModel.key == key,
                XComModel.map_index == map_index,
            )
        ).first()
        assert row is not None, f"no XCom {key!r} from {task_id}"
        return XComModel.deserialize_value(row)


def variable_record(key: str) -> dict[str, Any] | None:
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(select(Variable).where(Variable.key == key)).first()
        return None if row is None else dict(json.loads(row.val))


def task_state(dag_id: str, task_id: str) -> str | None:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        states = session.scalars(
            select(TaskInstance.state).where(TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id)
        ).all()
        return str(states[-1]) if states else None


@contextmanager
def when(condition: Callable[[], bool], action: Callable[[], None]) -> Iterator[None]:
    """Run ``action`` in a thread as soon as ``condition`` holds; re-raise its failure at the end.

    A condition that never holds within 300 s fails the test, and the action still runs then: what the body
    waits for (a sensor, a lock) then ends, so the test fails instead of hanging its stream."""
    failures: list[BaseException] = []

    def holds() -> bool:
        try:
            return condition()
        except Exception:  # e.g. SQLite busy while the DAG run writes: look again
            return False

    def body() -> None:
        try:
            deadline = time.monotonic() + 300
            while not holds():
                if time.monotonic() > deadline:
                    failures.append(TimeoutError("the condition never held"))
                    break
                time.sleep(0.05)
            action()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join(timeout=300)
        if failures:
            raise failures[0]
