"""Test DAGs: LakeformatSnapshotSensor deferred to its trigger, poking, rescheduled, and failing."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import DAG, Context

from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

FAILURES: dict[str, BaseException] = {}


def remember_failure(context: Context) -> None:
    FAILURES[context["dag"].dag_id] = context["exception"]  # type: ignore[assignment]


COMMON = {"retries": 2, "retry_delay": timedelta(0), "on_failure_callback": remember_failure, "timeout": 600}

# The wait goes to the trigger at once (no check in the worker first), so it always defers.
with DAG("lakeformat_test_sensor_deferrable", schedule=None, params={"table": "db.events"}) as deferrable_dag:
    LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        deferrable=True,
        check_before_defer=False,
        poll_interval=0.1,
        ignore_commit_kinds=["COMPACT"],
        min_new_records=4,
        **COMMON,
    )

with DAG(
    "lakeformat_test_sensor_explicit", schedule=None, params={"table": "db.events", "after": 0}
) as explicit_dag:
    LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        after_snapshot_id="{{ params.after }}",
        deferrable=True,
        poll_interval=0.1,
        **COMMON,
    )

with DAG(
    "lakeformat_test_sensor_trigger", schedule=None, params={"table": "db.events", "after": 0}
) as trigger_dag:
    LakeformatSnapshotSensor(
        task_id="wait",
        table="{{ params.table }}",
        after_snapshot_id="{{ params.after }}",
        deferrable=True,
        check_before_defer=False,
        poll_interval=0.1,
        **COMMON,
    )

with DAG("lakeformat_test_sensor_reschedule", schedule=None, params={"table": "db.events"}) as reschedule_dag:
    LakeformatSnapshotSensor(
        task_id="wait", table="{{ params.table }}", mode="reschedule", poke_interval=0.1, **COMMON
    )

with DAG("lakeformat_test_sensor_poke", schedule=None, params={"table": "db.events"}) as poke_dag:
    LakeformatSnapshotSensor(
        task_id="wait", table="{{ params.table }}", mode="poke", poke_interval=0.1, **COMMON
    )
