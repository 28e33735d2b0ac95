"""Downstream, waiting on the table itself: a deferrable sensor waits (in the triggerer, holding no worker
slot) for a snapshot newer than the last one this sensor saw, ignoring COMPACT snapshots of maintenance,
then a task reads the matched snapshot from XCom. A run triggered with ``after_snapshot_id`` waits for a
snapshot after that id instead.

Environment: ``LAKEFORMAT_DEMO_TABLE`` (default ``demo.events``, under the warehouse of the connection),
``LAKEFORMAT_CONN_ID`` (default ``lakeformat_default``), ``LAKEFORMAT_SENSOR_POLL_INTERVAL`` (seconds,
default 30), ``LAKEFORMAT_SENSOR_TIMEOUT`` (seconds, default 6 h).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.sensors.snapshot import LakeformatSnapshotSensor

# A db.table name is placed under the connection's warehouse when the sensor runs.
TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")

with DAG(
    dag_id="lakeformat_downstream_sensor",
    description="Wait for a new (non-COMPACT) snapshot of the table, then use it",
    schedule=None,
    catchup=False,
    max_active_runs=1,
    params={
        "after_snapshot_id": Param(
            None, type=["null", "integer"], description="wait beyond this id (empty: the last one seen)"
        )
    },
    render_template_as_native_obj=False,
    tags=["lakeformat", "downstream"],
) as dag:
    wait = LakeformatSnapshotSensor(
        task_id="wait_for_snapshot",
        table=TABLE,
        lakeformat_conn_id=CONN_ID,
        after_snapshot_id="{{ params.after_snapshot_id }}",
        ignore_commit_kinds=["COMPACT"],
        deferrable=True,
        poll_interval=float(os.environ.get("LAKEFORMAT_SENSOR_POLL_INTERVAL", "30")),
        timeout=float(os.environ.get("LAKEFORMAT_SENSOR_TIMEOUT", str(6 * 3600))),
    )

    @task
    def use_snapshot(snapshot: dict[str, Any]) -> int:
        print(
            f"snapshot {snapshot['id']} ({snapshot['commitKind']}) of {snapshot['table']}: "
            f"{snapshot['newRecords']} new records since snapshot {snapshot['afterSnapshotId']}"
        )
        return int(snapshot["id"])

    use_snapshot(wait.output)
