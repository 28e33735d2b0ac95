"""Test DAGs: LakeformatHealthSensor deferred to its trigger, and poking."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_lakeformat.sensors.health import LakeformatHealthSensor

# The wait goes to the trigger at once (no look in the worker first), so it always defers.
with DAG("lakeformat_test_health_deferrable", schedule=None, params={"table": "db.events"}) as deferrable_dag:
    LakeformatHealthSensor(
        task_id="wait",
        table="{{ params.table }}",
        conditions={"smallFiles": 3, "score_below": 0},
        deferrable=True,
        check_before_defer=False,
        poke_interval=0.1,
        timeout=600,
    )

with DAG("lakeformat_test_health_poke", schedule=None, params={"table": "db.events"}) as poke_dag:
    LakeformatHealthSensor(
        task_id="wait",
        table="{{ params.table }}",
        conditions={"operations": ["compact_data"]},
        mode="poke",
        poke_interval=0.1,
        timeout=600,
    )
